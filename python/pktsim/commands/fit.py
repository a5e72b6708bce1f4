"""``pktsim fit``: a scenario's costs fitted to measurements, every measured value against
pktsim's (fitted or predicted), the fitted scenario written out."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UsageError
from ..textio import json_text, table
from .common import _figure_options, _print_rows, _write_file


def _rows_option(text: str) -> list[int]:
    try:
        out = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise UsageError(f"--fit-on {text}: expected row numbers from 1, comma-separated (e.g. 1,3,6)") from None
    if not out:
        raise UsageError(f"--fit-on {text!r}: no row; expected row numbers from 1, comma-separated")
    return out


def _observed_rows(paths: list[str]) -> list[dict]:
    """Each ``pktsim observe -o`` file as a row of measurements."""
    from ..observe import ObserveError, load

    try:
        return [load(p)[1] for p in paths]
    except ObserveError as e:
        raise UsageError(f"--observed {e}") from None


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [p.strip() for p in text.split(",") if p.strip()]


def cmd_fit(args) -> int:
    from ..fitting import DataError, fit
    from ..scenario import Scenario

    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: expected a whole number of local processes, at least 1")
    if args.max_runs < 1:
        raise UsageError(f"--max-runs {args.max_runs}: expected a whole number of simulations, at least 1")
    figure = _figure_options(args) if args.plot else None
    sc = Scenario.load(args.file, args.set)
    data, source = args.data, args.data
    if args.observed:
        data, source = _observed_rows(args.observed), ", ".join(args.observed)

    def say(message: str) -> None:
        print(f"pktsim fit: {message}", file=sys.stderr, flush=True)

    try:
        f = fit(
            sc,
            data,
            args.free,
            x=_split(args.x),
            y=_split(args.y),
            fit_on=_rows_option(args.fit_on) if args.fit_on else None,
            fit_fraction=args.fit_fraction,
            jobs=args.jobs,
            dask=args.dask,
            max_runs=args.max_runs,
            progress=say,
        )
    except DataError as e:
        raise UsageError(str(e)) from None
    if args.output:
        _write_file("-o", args.output, fitted_toml(f, sc, Path(args.output), source))
    if args.plot:
        from ..fitting.plot import fit_figure

        fit_figure(f, args.plot, **figure)
    if args.json:
        print(json_text(f.to_dict()))
        return 0
    print_fit(f, source)
    if args.output:
        print(f"wrote {args.output}")
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def print_fit(f, source: str) -> None:
    n = len({r["data_row"] for r in f.rows})
    fitted = ", ".join(str(i + 1) for i in f.fit_rows)
    st = f.status
    print(f"fitted on rows {fitted} of {n} ({source}); {f.runs} simulations, {st['iterations']} steps: {st['message']}")
    print()
    rows = []
    for v in f.free:
        if v["ci95_text"] is not None:
            ci = f"+- {v['ci95_text']}"
        elif not v["identifiable"]:
            ci = "not identifiable: moves no fitted value"
        else:
            ci = "none: as many values as free keys"
        note = " (at its bound)" if v["at_bound"] else ""
        start = f"{v['start']:.6g}{v['unit']}" if v["unit"] else f"{v['start']:.6g}"
        rows.append([v["key"], start, v["text"] + note, ci, v["kind"]])
    print(table(rows, ["key", "start", "fitted", "95% interval", "kind"], "lrrll"))
    print()
    _print_rows({"rows": f.rows, "summary": f.summary}, "measured vs pktsim")
    if len(f.fit_rows) == n:
        print("every row was fitted on: no row is left to judge the fit by (--fit-fraction below 1, or --fit-on)")


def fitted_toml(f, sc, path: Path, source: str) -> str:
    from ..scenariofile import scenario_file

    head = [
        f"# {sc.origin} fitted by pktsim fit to {source} (rows {', '.join(str(i + 1) for i in f.fit_rows)})",
        f"#   rms relative error on the fitted rows {100 * f.status['rms_rel_error']:.2f}%; "
        f"median |error| on the predicted rows {_pct(f.summary.get('median_abs_error'))}",
    ]
    for v in f.free:
        ci = f" +- {v['ci95_text']} (95%)" if v["ci95_text"] else ""
        head.append(f"#   {v['key']} = {v['text']}{ci} (fitted; was {v['start']:.6g}{v['unit']})")
    return scenario_file(sc, list(f.values), list(f.values.items()), f.scenario, head, path)


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"
