"""``pktsim reproduce``: the papers' rows, their summaries, the HTML report, and a progress
bar over the papers' simulations."""

from __future__ import annotations

import sys

from ..errors import UsageError
from ..textio import json_text
from .common import _print_rows


def cmd_reproduce(args) -> int:
    from ..reproduce import AUTHORS, PAPERS, paper_id, reproduce

    papers = list(PAPERS) if args.paper == "all" else [paper_id(args.paper) or args.paper]
    for paper in papers:
        if paper not in PAPERS:
            names = ", ".join(f"{n} ({a})" for a, n in AUTHORS.items())
            raise UsageError(f"reproduce: no reproduction of paper {args.paper!r} (have: {names}, all)")
    if args.report and not args.json:
        from ..report import build

        index = build(args.report, papers)
        print(f"wrote {index}")
        return 0
    results = _reproduce_with_progress(reproduce, papers, show=not args.json and sys.stderr.isatty())
    if args.report:
        # Both: the report from the same reproductions, then the JSON alone on stdout.
        from ..report import build

        index = build(args.report, papers, results)
        print(f"wrote {index}", file=sys.stderr)
    if args.json:
        # One paper: its object, with its summary. All: the list of those objects, as
        # before (a consumer iterating papers keeps working); the pooled summary is the
        # text output's last lines, or pktsim.reproduce.summary over every paper's rows.
        print(json_text(results[0] if len(results) == 1 else results))
        return 0
    for res in results:
        print(f"pktsim reproduce {res['paper']}: {res['title']}")
        _print_rows(res, f"summary ({res['paper']})")
        print()
    if len(results) > 1:
        from ..reproduce.rows import summary, summary_text

        print(summary_text(summary(r for res in results for r in res["rows"]), "summary (all papers)"))
    return 0


def _reproduce_with_progress(reproduce, papers: list, show: bool) -> list:
    """Each paper's reproduction, with a progress bar over their simulations (rate and ETA;
    tqdm: terminal or Jupyter). The ETA counts on each paper's ``runs``
    (:data:`pktsim.reproduce.PAPERS`); the bar adapts when a paper runs more or fewer."""
    if not show:
        return [reproduce(p) for p in papers]
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
