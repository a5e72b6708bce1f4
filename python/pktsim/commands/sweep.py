"""``pktsim sweep`` (a grid of scenario keys with replications, its table and plots) and
``pktsim plot`` (the standard plots of a saved sweep table)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UsageError
from ..textio import json_text, si, table
from .common import _figure_options, _writable_dir


def cmd_sweep(args) -> int:
    from ..experiments import SweepInterrupted, check_output, failures, first_point_refusal, parse_variants, results, run_grid, summarize, sweep_plan
    from ..model import predict
    from ..scenario import Scenario
    from ..values import expand_values

    if args.replications is not None and args.replications < 1:
        raise UsageError(f"--replications {args.replications}: expected a whole number of runs per point, at least 1")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: expected a whole number of local processes, at least 1")
    if len(args.param) != len(args.values):
        raise UsageError("sweep: give one --values after each --param")
    twice = sorted({k for k in args.param if args.param.count(k) > 1})
    if twice:
        raise UsageError(f"--param {twice[0]}: given twice; expected each key once (put all its values in one --values)")
    sc = Scenario.load(args.file, args.set)
    params, replications = sweep_plan(sc, dict(zip(args.param, args.values)), args.replications)
    if not params:
        raise UsageError("sweep: nothing to sweep (--param KEY --values ..., or a [sweep] table in the scenario)")
    if replications < 1:
        raise UsageError(f"{args.file}: sweep.replications = {replications}: expected a whole number of runs per point, at least 1")
    try:
        variants = parse_variants(args.variant)
    except ValueError as e:
        raise UsageError(str(e)) from None
    for key, vals in params.items():
        try:
            params[key] = expand_values(vals, key)  # once: the grid takes the list as it is
            if not params[key]:
                raise ValueError(f"{vals!r}: no values")
        except ValueError as e:
            raise UsageError(f"--values for {key}: {e}") from None
        seen = set()
        for v in params[key]:
            if v in seen:
                raise UsageError(f"--values for {key}: {v!r} is given twice; expected each value once (--replications repeats a point)")
            seen.add(v)
    # The first point is resolved here, under each variant: where the scenario refuses it
    # under all of them (a misspelt key, a value of the wrong kind: every point would
    # fail), the sweep is refused at once. Other points the scenario refuses are reported as
    # they fail, and the rest of the grid runs.
    refused = first_point_refusal(sc, params, variants)
    if refused:
        raise UsageError(refused)
    if args.output:
        try:
            check_output(args.output)
        except ValueError as e:
            raise UsageError(f"-o {e}") from None
    if args.plots:
        _writable_dir("--plots", args.plots)
    figure = _figure_options(args)
    try:
        df = run_grid(
            sc,
            params,
            replications,
            variants=variants,
            jobs=args.jobs,
            dask=args.dask,
            output=args.output,
            progress=not args.json and sys.stderr.isatty(),
            restart=args.restart,
            allow_large=args.allow_large,
        )
    except SweepInterrupted as e:
        kept = f"; rerun the same command to resume from {args.output}.partial.jsonl" if args.output else ""
        print(f"pktsim: sweep stopped after {e.done} of {e.total} runs{kept}", file=sys.stderr)
        raise
    except OSError as e:
        raise UsageError(f"-o {args.output}: cannot write the sweep table ({e.strerror or e})") from None
    except ValueError as e:
        raise UsageError(f"sweep: {e}") from None
    failed = df[df["status"] != "ok"]
    keys = (["variant"] if variants else []) + list(params)
    for line in failures(df, keys):
        print(f"pktsim: {line}", file=sys.stderr)
    if args.json:
        res = []
        for r, full in zip(df[[*keys, "replication", "status", "error"]].to_dict("records"), results(df)):
            item = dict(full or {}) if r["status"] == "ok" else {"status": "error", "error": r["error"]}
            item["swept"] = {k: r[k] for k in keys}
            item["replication"] = int(r["replication"])
            res.append(item)
        print(json_text(res))
        return 1 if len(failed) else 0
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return 1
    metrics = ["offered_pps", "throughput_pps", "loss_ratio", "latency_ns_p50", "latency_ns_p99", "irq_per_s", "polls_per_packet", "cpu_utilization"]
    summ = summarize(ok, keys, metrics)

    def ci(r, m, scale=1.0, fmtv="{:.2f}"):
        mean, half = r[f"{m}_mean"] * scale, r[f"{m}_ci95"] * scale
        return fmtv.format(mean) + ("" if half != half else " +- " + fmtv.format(half))

    rows = []
    for r in summ.to_dict("records"):
        rows.append(
            [
                *(str(r[k]) for k in keys),
                si(r["offered_pps_mean"], "pps"),
                si(r["throughput_pps_mean"], "pps"),
                f"{100 * r['loss_ratio_mean']:.2f}%",
                ci(r, "latency_ns_p50", 1e-3),
                ci(r, "latency_ns_p99", 1e-3),
                f"{r['irq_per_s_mean']:,.0f}",
                f"{r['polls_per_packet_mean']:.3f}",
                f"{100 * r['cpu_utilization_mean']:.1f}%",
            ]
        )
    head = [*keys, "offered", "throughput", "loss", "p50 us", "p99 us", "IRQ/s", "polls/pkt", "CPU"]
    print(table(rows, head, "l" * len(keys) + "rrrrrrrr"))
    # Points where a run's note says more frames left the window than arrived in it (those
    # queued at its start): by over a frame and 0.1%, as the note's rule.
    ended = ok["forwarded_packets"] + ok.get("consumed_packets", 0)
    offered = ok["offered_packets"]
    edge = (offered > 0) & (ended > offered + 1) & (ended > 1.001 * offered)
    above = int(edge.groupby([ok[k] for k in keys], sort=False).any().sum()) if keys else int(edge.any())
    if above:
        print(
            f"\nthroughput above the offered load at {above} point{'s' if above > 1 else ''}: frames queued at the start of the "
            "measurement window leave within it; a longer measure.duration makes this edge smaller"
        )
    if replications > 1:
        print(f"\n{replications} replications per point; +- is the 95% confidence half-width")
    if args.output:
        print(f"wrote {args.output} ({len(df)} rows)")
    if args.plots:
        from ..plots import sweep_plots

        # The model's loss-free capacity marks saturation when only the load is swept.
        capacity = predict(sc)["capacity_pps"] if list(params) == ["traffic.rate"] and not variants else None
        for f in sweep_plots(df, args.plots, capacity_pps=capacity, **figure):
            print(f"wrote {f}")
    return 1 if len(failed) else 0


def cmd_plot(args) -> int:
    import stat

    from ..experiments import read_table
    from ..plots import sweep_plots

    figure = _figure_options(args)  # (before the table and pandas: a bad option is said at once)
    src = Path(args.table)
    if src.suffix not in (".parquet", ".csv"):
        raise UsageError(f"plot: {args.table}: expected a sweep table written by `pktsim sweep -o` (.parquet or .csv)")
    try:
        if not stat.S_ISREG(src.stat().st_mode):
            raise UsageError(f"plot: {args.table}: not a regular file; expected a sweep table (.parquet or .csv)")
    except OSError as e:
        raise UsageError(f"plot: {args.table}: cannot read the sweep table ({e.strerror or e})") from None
    _writable_dir("-o", args.output)
    try:
        df = read_table(args.table)
    except (OSError, ValueError) as e:
        raise UsageError(f"plot: {args.table}: cannot read the sweep table ({e})") from None
    if "throughput_pps" not in df:
        raise UsageError(f"plot: {args.table}: not a pktsim sweep table (no throughput_pps column)")
    ok = df[df["status"] == "ok"] if "status" in df else df
    if ok.empty:
        raise UsageError(f"plot: {args.table}: no successful rows to plot (status = ok)")
    needed = ["offered_pps", "throughput_pps", "loss_ratio", "irq_per_s", "polls_per_packet"] + [f"latency_ns_{p}" for p in ("p25", "p50", "p75", "p99")]
    for col in needed:
        if col not in ok or ok[col].dtype.kind not in "fi":
            raise UsageError(f"plot: {args.table}: not a pktsim sweep table (column {col} is missing or not numeric)")
    if args.x is not None and args.x not in df:
        columns = list(df.columns)
        such = columns[: columns.index("replication")] if "replication" in df else ["offered_pps"]
        raise UsageError(f"--x {args.x}: no such column in {args.table}; expected a column such as {', '.join(such)}")
    for f in sweep_plots(df, args.output, args.x, **figure):
        print(f"wrote {f}")
    return 0
