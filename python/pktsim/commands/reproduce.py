"""``pktsim reproduce``: the papers' rows, their summaries, the HTML report, and a progress
bar over the papers' simulations."""

from __future__ import annotations

import sys

from ..errors import UsageError
from ..textio import fit_lines, json_text
from .common import _print_rows


def cmd_reproduce(args) -> int:
    from ..reproduce import AUTHORS, PAPERS, paper_id, reproduce

    papers = list(PAPERS) if args.paper == "all" else [paper_id(args.paper) or args.paper]
    for paper in papers:
        if paper not in PAPERS:
            names = ", ".join(f"{n} ({a})" for a, n in AUTHORS.items())
            raise UsageError(f"reproduce: no reproduction of paper {args.paper!r} (have: {names}, all)")
    import shutil
    import tempfile

    # With a report and worker processes, each paper's figures are drawn in the worker that
    # reproduced it, side by side with the others, into a scratch directory; the report
    # moves them beside its page (an interrupted run leaves no half-made report).
    scratch = tempfile.mkdtemp(prefix="pktsim-figures-") if args.report else None
    try:
        drawn: dict = {}
        results = _reproduce_with_progress(
            reproduce, papers, show=not args.json and sys.stderr.isatty(), lines=not sys.stderr.isatty(), figures_to=scratch, drawn=drawn
        )
        if args.report:
            # The report from these reproductions; with --json, the JSON alone on stdout.
            from ..report import build

            index = build(args.report, papers, results, drawn=drawn)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.report:
        print(f"wrote {index}", file=sys.stderr if args.json else sys.stdout)
        if not args.json:
            return 0
    if args.json:
        # One paper: its object, with its summary. All: the list of those objects, as
        # before (a consumer iterating papers keeps working); the pooled summary is the
        # text output's last lines, or pktsim.reproduce.summary over every paper's rows.
        print(json_text(results[0] if len(results) == 1 else results))
        return 0
    for res in results:
        print(fit_lines(f"pktsim reproduce {res['paper']}: {res['title']}"))
        _print_rows(res, f"summary ({res['paper']})")
        print()
    if len(results) > 1:
        from ..reproduce.rows import summary, summary_text

        print(fit_lines(summary_text(summary(r for res in results for r in res["rows"]), "summary (all papers)")))
    return 0


def _reproduce_with_progress(reproduce, papers: list, show: bool, lines: bool = False, figures_to: str | None = None, drawn: dict | None = None) -> list:
    """Each paper's reproduction, with a progress bar over their simulations (rate and ETA;
    tqdm: terminal or Jupyter). The ETA counts on each paper's ``runs``
    (:data:`pktsim.reproduce.PAPERS`); the bar adapts when a paper runs more or fewer.
    Several papers on a machine with several CPUs run side by side in worker processes
    (the bar then advances a paper at a time). ``lines``: where stderr is not a terminal
    (a log, CI), a line there as each paper is done instead."""
    import os
    import time

    start = time.monotonic()

    def said(p: str, k: int) -> None:
        if lines:
            print(f"pktsim reproduce: {p} done ({k} of {len(papers)}, {time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)

    workers = min(len(papers), os.cpu_count() or 1)
    if workers > 1:
        return _in_processes(papers, workers, show, said, figures_to, drawn)
    if not show:
        out = []
        for k, p in enumerate(papers, 1):
            out.append(reproduce(p))
            said(p, k)
        return out
    from tqdm.auto import tqdm

    from ..reproduce import PAPERS
    from ..sim import observe_runs

    out = []
    expected = [PAPERS[p].runs for p in papers]
    with tqdm(total=max(sum(expected), 1), unit="run", file=sys.stderr, dynamic_ncols=True, leave=False) as bar:
        done = 0
        for p, n in zip(papers, expected):
            bar.set_postfix_str(f"paper {p}", refresh=True)

            def counted(_result):
                if bar.n + 1 > bar.total:
                    bar.total = bar.n + 1
                bar.update(1)

            with observe_runs(counted):
                out.append(reproduce(p))
            done += n
            if bar.n < done:  # fewer runs than counted before: skip ahead
                bar.update(done - bar.n)
    return out


def _in_processes(papers: list, workers: int, show: bool, said=lambda p, k: None, figures_to: str | None = None, drawn: dict | None = None) -> list:
    """The papers' reproductions in `workers` processes, the longest first (their ``runs``),
    returned in the papers' order; each is the same dict a reproduction in this process
    gives, bit for bit. With ``figures_to`` each worker also draws its paper's figures into
    a directory of the paper's own there, and ``drawn`` gets ``{paper: (directory,
    figures)}``. Ctrl-C stops the workers at once (``abandon_pool``)."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from ..experiments.workers import _spawner, _worker_init, abandon_pool
    from ..reproduce import PAPERS

    bar = None
    if show:
        from tqdm.auto import tqdm

        bar = tqdm(total=max(sum(PAPERS[p].runs for p in papers), 1), unit="run", file=sys.stderr, dynamic_ncols=True, leave=False)
    ex = ProcessPoolExecutor(max_workers=workers, initializer=_worker_init, initargs=(_spawner(),))
    try:
        futures = {ex.submit(_reproduce_one, p, figures_to): p for p in sorted(papers, key=lambda p: -PAPERS[p].runs)}
        done = {}
        for fut in as_completed(futures):
            p = futures[fut]
            done[p], figs = fut.result()
            if figs is not None and drawn is not None:
                drawn[p] = figs
            said(p, len(done))
            if bar:
                bar.set_postfix_str(f"paper {p} done", refresh=False)
                bar.update(PAPERS[p].runs)
    except BaseException:
        abandon_pool(ex)
        raise
    finally:
        if bar:
            bar.close()
    ex.shutdown(wait=True)
    return [done[p] for p in papers]


def _reproduce_one(paper: str, figures_to: str | None = None) -> tuple:
    """One paper's reproduction and, with ``figures_to``, its figures drawn into
    ``figures_to/PAPER`` (the directory and the figures' names and captions)."""
    from pathlib import Path

    from ..reproduce import PAPERS, reproduce

    res = reproduce(paper)
    if figures_to is None:
        return res, None
    where = Path(figures_to) / paper
    where.mkdir()
    return res, (str(where), PAPERS[paper].figures(where, res))
