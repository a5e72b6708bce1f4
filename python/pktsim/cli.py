"""The ``pktsim`` command."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

from . import __version__, _core
from .errors import ScenarioError
from .testbed.errors import TestbedError
from .textio import atomic_write, bytes_h, si, table

# The modules a command needs are imported by that command: `pktsim run` starts without the
# sweep machinery, pandas or matplotlib (tests/test_structure.py checks it).

EXIT_USAGE = 2
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A command-line value that is wrong; the message says which and why."""


def _quantity(kind: str, option: str, text: str) -> float:
    from .model import parse_quantity

    try:
        return parse_quantity(kind, text)
    except ValueError as e:
        raise UsageError(f"{option} {e}") from None


def _load_or_active(args) -> tuple:
    """--cpu-load as a fraction and --active-cycles per second (each None when not given)."""
    load = _quantity("percent", "--cpu-load", args.cpu_load) if args.cpu_load is not None else None
    active = None
    if args.active_cycles is not None:
        try:
            active = float(args.active_cycles)
        except ValueError:
            active = None
        if active is None or not (active > 0 and math.isfinite(active)):
            raise UsageError(
                f"--active-cycles {args.active_cycles!r}: expected the active cycles per second as a finite number above 0, e.g. 3.1e9"
            ) from None
    return load, active


def _write_file(option: str, path: str, data: "str | bytes") -> None:
    """atomic_write, with a path that cannot be written as a UsageError naming the option."""
    if Path(path).is_dir():
        raise UsageError(f"{option} {path}: is a directory; expected a file to write")
    try:
        atomic_write(path, data)
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write the file ({e.strerror or e})") from None


def cmd_import_host(args) -> int:
    from . import hostimport

    host = hostimport.from_dir(args.from_dir, args.iface) if args.from_dir else hostimport.from_live(args.iface)
    text = hostimport.to_toml(host, args.from_dir or "this machine")
    if args.output:
        _write_file("-o", args.output, text)
        print(f"wrote {args.output}")
    else:
        print(text, end="")
    return 0


def _dump(obj) -> str:
    return json.dumps(obj, indent=2, allow_nan=False)


# ---------------------------------------------------------------------------------------- model


def cmd_model(args) -> int:
    if args.from_measurement:
        return _model_from_measurement(args)
    if not args.file:
        raise UsageError("model: give a scenario FILE (or --from-measurement with --rate and --cpu-load)")
    from .model import GROUPS, predict
    from .scenario import Scenario

    sc = Scenario.load(args.file, args.set)
    p = predict(sc)
    if args.json:
        print(_dump(p))
        return 0
    if "bottleneck_node" in p:
        print(format_chain_model(p, args.file))
        return 0
    d = sc.data
    fib = p["fib"]
    print(f"pktsim model: {p['name']}  ({args.file})")
    print(
        f"  CPU {si(p['frequency_hz'], 'Hz', 2)} x {p['cores']} core{'s' if p['cores'] != 1 else ''}, "
        f"link {d['link']['rate']}, mean frame {p['mean_frame_bytes']:g} B, "
        f"{fib['flows']} flow{'s' if fib['flows'] != 1 else ''}, FIB {fib['routes']} route{'s' if fib['routes'] != 1 else ''} "
        f"(working set {bytes_h(fib['working_set_bytes'])} in {fib['resides_in']})"
    )
    print()
    total = p["c_total_cycles"]
    rows = [[g, f"{p['cycles_by_group'][g]:.1f}", f"{100 * p['cycles_by_group'][g] / total:.1f}%"] for g in GROUPS]
    rows.append(["C_total (Eq. 2)", f"{total:.1f}", "100.0%"])
    print(table(rows, ["group", "cycles/packet", "share"], "lrr"))
    print()
    busy = [c for c in p["per_core"] if c["share"] > 0]
    load_note = "" if p["cpu_load_max"] <= p["cpu_load"] + 1e-9 else f"up to {100 * p['cpu_load_max']:.1f} % with each frame paying its events alone"
    lines = [
        ["R_max (Eq. 1, one core)", si(p["r_max_pps"], "pps"), f"{p['ns_per_packet']:.1f} ns per packet on a core of this node"],
        ["CPU capacity (all cores)", si(p["r_cpu_pps"], "pps"), f"{len(busy)} of {p['cores']} cores get traffic (RSS)" if p["cores"] > 1 else ""],
        ["loss-free capacity", si(p["capacity_pps"], "pps"), "where the first core (or the link) saturates"],
        ["line rate", si(p["line_rate_pps"], "pps"), ""],
        ["offered", si(p["offered_pps"], "pps"), ""],
        ["predicted", si(p["predicted_pps"], "pps"), f"bottleneck: {p['bottleneck']}" + (", saturated" if p["saturated"] else "")],
        ["dropped", si(p["dropped_pps"], "pps"), ""],
        ["CPU load", f"{100 * p['cpu_load']:.1f} %", load_note],
    ]
    print(table(lines, ["quantity", "value", "note"], "lrl"))
    terms = [[k, f"{v:.1f}"] for k, v in p["frame_cost_ns"].items() if v > 0]
    if terms:
        print()
        print(table(terms, ["time per frame at saturation", "ns"], "lr"))
    notes = list(p["notes"])
    if p["cpu_load_max"] > p["cpu_load"] + 1e-9:
        notes.insert(0, "CPU load: " + p["cpu_load_basis"])
    for n in notes:
        print(f"  note: {n}")
    return 0


def format_chain_model(p: dict, origin: str) -> str:
    """``pktsim model CHAIN``: each node's capacity, the links', and the bottleneck."""
    rows = []
    for i, (name, n) in enumerate(zip(p["node_names"], p["nodes"])):
        inbound = si(p["link_rate_pps"][i - 1], "pps") if i else "-"
        mark = "  <- bottleneck" if i == p["bottleneck_node"] else ""
        rows.append([str(i), name, si(n["capacity_pps"], "pps"), n["bottleneck"], inbound, f"{100 * n['cpu_load']:.1f} %{mark}"])
    b = p["bottleneck_node"]
    return "\n".join([
        f"pktsim model: chain {p['name']}  ({origin}), {len(p['nodes'])} nodes",
        "",
        table(rows, ["node", "name", "loss-free capacity", "limited by", "inbound link", "CPU load"], "llrlrl", width=None),
        "",
        f"  chain capacity {si(p['r_max_pps'], 'pps')}: node {b} ({p['node_names'][b]}, {p['bottleneck']}); "
        f"offered {si(p['offered_pps'], 'pps')}, predicted {si(p['predicted_pps'], 'pps')}" + (" (saturated)" if p["saturated"] else ""),
    ])


def _model_from_measurement(args) -> int:
    from .model import from_measurement, parse_quantity
    from .scenario import Scenario

    if args.rate is None:
        raise UsageError("model --from-measurement: --rate is required (e.g. --rate 1.67Mpps)")
    rate = _quantity("packetrate", "--rate", args.rate)
    if args.freq is not None:
        freq = _quantity("frequency", "--freq", args.freq)
    elif args.file:
        freq = parse_quantity("frequency", Scenario.load(args.file, args.set).data["cpu"]["frequency"])
    else:
        raise UsageError("model --from-measurement: --freq is required without a scenario FILE (e.g. --freq 3.3GHz)")
    load, active = _load_or_active(args)
    try:
        m = from_measurement(rate, freq, load, active)
    except ValueError as e:
        raise UsageError(f"model --from-measurement: {e}") from None
    if args.json:
        print(_dump(m))
        return 0
    print("pktsim model --from-measurement (000 Eq. 3: C_total = f * CPU_load / R)")
    print(
        table(
            [
                ["measured rate", si(m["rate_pps"], "pps")],
                ["CPU frequency", si(m["frequency_hz"], "Hz", 2)],
                ["CPU load", f"{100 * m['cpu_load']:.1f} %"],
                ["active cycles", si(m["active_cycles_per_s"], "cycles/s")],
                ["C_total", f"{m['c_total_cycles']:.1f} cycles/packet"],
                ["R_max at full load (Eq. 1)", si(m["r_max_pps"], "pps")],
            ],
            ["quantity", "value"],
            "ll",
        )
    )
    return 0


# ---------------------------------------------------------------------------------------- run / sweep


def cmd_run(args) -> int:
    from .sim import run_file

    r = run_file(args.file, args.set)
    if args.json:
        print(_dump(r))
        return 0
    print(format_run(r, args.file))
    return 0


def format_run(r: dict, origin: str) -> str:
    text = _format_run(r, origin)
    if "nodes" not in r:
        return text
    # A chain: the figures above are end to end; then where frames were lost, then each node.
    rows = []
    for i, (n, loss) in enumerate(zip(r["nodes"], r["loss_by_node"])):
        rows.append([str(i), r["node_names"][i], si(n["throughput_pps"], "pps"), f"{loss['dropped_packets']:,} ({100 * loss['share_of_offered']:.3f} %)",
                     f"{n['latency_ns']['p50'] / 1e3:.2f}", f"{n['latency_ns']['p99'] / 1e3:.2f}", f"{100 * n['cpu_utilization']:.1f} %"])
    return text + "\n\n" + table(rows, ["node", "name", "forwarded", "dropped (of offered)", "p50 us", "p99 us", "CPU"], "llrrrrr") + "\n  (end to end above: from the first node's ingress to the last node's egress)"


def _format_run(r: dict, origin: str) -> str:
    L = r["latency_ns"]
    lines = [
        f"pktsim run: {r['name']}  ({origin}, seed {r['seed']})",
        f"  simulated {r['sim_time_s'] * 1e3:.1f} ms ({r['sim_packets']:,} packets) in {r['wall_s']:.3f} s wall",
        "",
        table(
            [
                ["offered", si(r["offered_pps"], "pps")],
                # Frames the host consumed (XDP_DROP, an application) count as throughput.
                ["throughput" if r.get("consumed_packets") else "forwarded", si(r["throughput_pps"], "pps") + f"  ({si(r['throughput_bps'], 'bit/s')})"
                 + (f"; forwarded {r['forwarded_packets']:,}, consumed {r['consumed_packets']:,} packets" if r.get("consumed_packets") else "")],
                ["loss", f"{100 * r['loss_ratio']:.3f} %  " + ", ".join(f"{k} {v:,}" for k, v in r["drops"].items() if v)],
                # Only the activities that took time, the longest first.
                ["CPU", f"{100 * r['cpu_utilization']:.1f} %  " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in sorted(r["cpu_by_activity"].items(), key=lambda kv: -kv[1]) if v > 0)],
            ]
            # Interrupts, polls and softirqs only where the I/O mode has them.
            + ([["IRQs", f"{r['irq_per_s']:,.0f} /s  ({r['irqs_per_packet']:.4f} per packet)"]] if r["irq_per_s"] > 0 else [])
            + ([["polls", f"{r['polls_per_packet']:.4f} per packet, {r['packets_per_poll']['mean']:.1f} rx packets per poll"]] if r["polls_per_packet"] > 0 else [])
            + ([["softirqs", f"{r['softirqs_per_packet']:.4f} per packet, {r['time_squeeze']:,} time squeezes, {r['ksoftirqd_wakeups']:,} ksoftirqd wake-ups"]] if r["softirqs_per_packet"] > 0 else [])
            + _wakeup_rows(r),
            ["quantity", "value"],
            "ll",
        ),
        "",
        table(
            [[f"{L[k] / 1e3:.2f}" for k in ("p25", "p50", "p75", "p90", "p99", "p999", "max", "mean")]],
            ["p25", "p50", "p75", "p90", "p99", "p99.9", "max", "mean"],
            "rrrrrrrr",
        )
        + "   latency, us",
    ]
    groups = [(f"class {k}", v) for k, v in r.get("per_class", {}).items()] if len(r.get("per_class", {})) > 1 else []
    if len(r.get("per_ring", [])) > 1:
        groups += [(f"ring {g['ring']} (core {g['core']}, {g['queue']})", g) for g in r["per_ring"]]
    if groups:
        rows = []
        for label, g in groups:
            L = g["latency_ns"]
            ci = g.get("latency_mean_ci95_ns")
            rows.append(
                [
                    label,
                    si(g["offered_pps"], "pps"),
                    si(g["throughput_pps"], "pps"),
                    f"{100 * g['loss_ratio']:.2f}%",
                    f"{L['mean'] / 1e3:.2f}" + (f" +- {ci / 1e3:.2f}" if ci is not None else ""),
                    f"{L['p50'] / 1e3:.2f}",
                    f"{L['p99'] / 1e3:.2f}",
                ]
            )
        lines += ["", table(rows, ["", "offered", "throughput", "loss", "mean us (95% CI)", "p50 us", "p99 us"], "lrrrrrr")]
    lines += [f"note: {n}" for n in r.get("notes", [])]
    return "\n".join(lines)


def _wakeup_rows(r: dict) -> list:
    io = r.get("io") or {}
    if not isinstance(io, dict) or "wakeups" not in io:
        return []
    w, fwd = io["wakeups"], r["forwarded_packets"]
    rate = w * r["throughput_pps"] / fwd if fwd else 0.0
    per = f"{fwd / w:.1f} packets per wake-up" if w else "the thread never slept"
    return [["wake-ups", f"{rate:,.0f} /s, {per} (NAPI thread)"]]


def cmd_sweep(args) -> int:
    from .experiments import SweepInterrupted, check_output, parse_variants, results, run_grid, summarize, sweep_plan
    from .model import predict
    from .scenario import Scenario
    from .values import expand_values

    if args.replications is not None and args.replications < 1:
        raise UsageError(f"--replications {args.replications}: expected a whole number of runs per point, at least 1")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: expected a whole number of local processes, at least 1")
    if len(args.param) != len(args.values):
        raise UsageError("sweep: give one --values after each --param")
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
            sc, params, replications, variants=variants, jobs=args.jobs, dask=args.dask, output=args.output,
            progress=not args.json and sys.stderr.isatty(), restart=args.restart,
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
    # Plain records of the few columns needed (iterrows builds a Series per row).
    for r in failed[[*keys, "replication", "error"]].to_dict("records"):
        point = ", ".join(f"{k}={r[k]}" for k in keys)
        print(f"pktsim: point {point} (replication {r['replication']}) failed: {r['error']}", file=sys.stderr)
    if args.json:
        res = []
        for r, full in zip(df[[*keys, "replication", "status", "error"]].to_dict("records"), results(df)):
            item = dict(full or {}) if r["status"] == "ok" else {"status": "error", "error": r["error"]}
            item["swept"] = {k: r[k] for k in keys}
            item["replication"] = int(r["replication"])
            res.append(item)
        print(_dump(res))
        return 1 if len(failed) else 0
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return 1
    metrics = ["offered_pps", "throughput_pps", "loss_ratio", "latency_ns_p50", "latency_ns_p99", "irq_per_s", "polls_per_packet", "cpu_utilization"]
    summ = summarize(ok, keys, metrics)
    rows = []
    for r in summ.to_dict("records"):
        def ci(m, scale=1.0, fmtv="{:.2f}"):
            mean, half = r[f"{m}_mean"] * scale, r[f"{m}_ci95"] * scale
            return fmtv.format(mean) + ("" if half != half else " +- " + fmtv.format(half))
        rows.append(
            [
                *(str(r[k]) for k in keys),
                si(r["offered_pps_mean"], "pps"),
                si(r["throughput_pps_mean"], "pps"),
                f"{100 * r['loss_ratio_mean']:.2f}%",
                ci("latency_ns_p50", 1e-3),
                ci("latency_ns_p99", 1e-3),
                f"{r['irq_per_s_mean']:,.0f}",
                f"{r['polls_per_packet_mean']:.3f}",
                f"{100 * r['cpu_utilization_mean']:.1f}%",
            ]
        )
    head = [*keys, "offered", "throughput", "loss", "p50 us", "p99 us", "IRQ/s", "polls/pkt", "CPU"]
    print(table(rows, head, "l" * len(keys) + "rrrrrrrr"))
    if replications > 1:
        print(f"\n{replications} replications per point; +- is the 95% confidence half-width")
    if args.output:
        print(f"wrote {args.output} ({len(df)} rows)")
    if args.plots:
        from .plots import sweep_plots

        # The model's loss-free capacity marks saturation when only the load is swept.
        capacity = predict(sc)["capacity_pps"] if list(params) == ["traffic.rate"] and not variants else None
        for f in sweep_plots(df, args.plots, capacity_pps=capacity, **figure):
            print(f"wrote {f}")
    return 1 if len(failed) else 0


def _writable_dir(option: str, path: str) -> Path:
    """A directory the command can write files into (created if missing), or a UsageError
    naming the option and the path."""
    d = Path(path)
    try:
        d.mkdir(parents=True, exist_ok=True)
        import tempfile

        with tempfile.TemporaryFile(dir=d):
            pass
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write files there ({e.strerror or e}); expected a writable directory") from None
    return d


def _figure_args(p) -> None:
    p.add_argument("--format", choices=("png", "svg", "pdf"), default="png", help="figure file format (default png)")
    p.add_argument("--dpi", type=int, default=300, metavar="N", help="resolution of PNG figures (default 300)")
    p.add_argument("--size", default="3.5x2.6", metavar="WxH", help="panel size in inches (default 3.5x2.6, a paper column)")


def _figure_options(args) -> dict:
    if not 20 <= args.dpi <= 1200:
        raise UsageError(f"--dpi {args.dpi}: expected 20 to 1200 dots per inch")
    m = re.match(r"^([0-9.]+)x([0-9.]+)$", args.size or "")
    if not m or not (0.5 <= float(m.group(1)) <= 40 and 0.5 <= float(m.group(2)) <= 40):
        raise UsageError(f"--size {args.size}: expected WIDTHxHEIGHT in inches, each 0.5 to 40 (e.g. 3.5x2.6)")
    return {"fmt": args.format, "dpi": args.dpi, "size": (float(m.group(1)), float(m.group(2)))}


def cmd_plot(args) -> int:
    from .experiments import read_table
    from .plots import sweep_plots

    import stat

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
        raise UsageError(f"--x {args.x}: no such column in {args.table}; expected a column such as {', '.join(list(df.columns)[: list(df.columns).index('replication')] if 'replication' in df else ['offered_pps'])}")
    for f in sweep_plots(df, args.output, args.x, **_figure_options(args)):
        print(f"wrote {f}")
    return 0


# ---------------------------------------------------------------------------------------- calibrate


def cmd_calibrate(args) -> int:
    from pathlib import Path as _P

    from . import calibrate as cal

    if args.rate is None:
        raise UsageError("calibrate: --rate is required (the measured forwarding rate, e.g. --rate 1.67Mpps)")
    if args.freq is None:
        raise UsageError("calibrate: --freq is required (the CPU clock, e.g. --freq 3.3GHz)")
    rate = _quantity("packetrate", "--rate", args.rate)
    freq = _quantity("frequency", "--freq", args.freq)
    if not (freq > 0 and math.isfinite(freq)):
        raise UsageError(f"--freq {args.freq!r}: expected a CPU clock above 0 Hz, e.g. 3.3GHz")
    load, active = _load_or_active(args)
    if (load is None) == (active is None):
        raise UsageError("calibrate: give --cpu-load (e.g. 100%) or --active-cycles, one of them")
    for option, value, what in (("--routes", args.routes, "routes in the FIB"), ("--flows", args.flows, "flows in the traffic")):
        if not 1 <= value <= 2**63 - 1:
            raise UsageError(f"{option} {value}: expected the number of {what} when profiled, a whole number from 1 to 2^63-1")
    rules = cal.Rules.load(args.rules)
    profile = cal.read_profile(args.profile, args.format)
    try:
        c = cal.calibrate(profile, rules, rate, freq, load, active, idle_into_other=args.idle_into_other)
    except ValueError as e:
        raise UsageError(f"calibrate: {e}") from None
    name = args.name or _P(args.profile).stem
    if args.bars and _P(args.bars).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"--bars {args.bars!r}: expected a file name ending in .png, .svg or .pdf")
    outputs = (
        ("-o", args.output, lambda p: atomic_write(p, c.to_profile_toml(name, args.routes, args.flows))),
        ("--flamegraph", args.flamegraph, lambda p: atomic_write(p, cal.flamegraph(profile, rules, f"{name}: cycles by group"))),
        ("--bars", args.bars, lambda p: cal.bar_chart([(name, c.cycles_by_group)], p, f"{name}: cycles per packet by group")),
    )
    for option, path, write in outputs:
        if not path:
            continue
        try:
            write(path)
        except OSError as e:
            raise UsageError(f"{option} {path!r}: expected a writable file path ({e.strerror or e})") from None
    if args.json:
        print(_dump(c.to_json()))
        return 0
    j = c.to_json()
    print(f"pktsim calibrate: {args.profile} ({profile.fmt}, {c.samples_text()}, rules {rules.origin})")
    print(f"  {si(rate, 'pps')} at {100 * j['cpu_load']:.1f}% of {si(freq, 'Hz', 2)}: C_total = {c.c_total_cycles:.1f} cycles/packet (000 Eq. 3)")
    print()
    rows = [[g, f"{c.samples_by_group.get(g, 0.0) / c.active_samples:.1%}", f"{v:.1f}"] for g, v in c.cycles_by_group.items()]
    rows.append(["C_total", "100.0%", f"{c.c_total_cycles:.1f}"])
    print(table(rows, ["group", "share", "cycles/packet"], "lrr"))
    if j["idle_share"] > 0:
        print(f"\n  idle samples: {j['idle_share']:.1%} of all (left out of the active cycles)")
    if c.outside:
        print(f"\n  outside the packet path: {c.outside_share:.1%} of active samples (in C_other): work under shared")
        print("  entry points (softirq, interrupts, ...) with no packet frame below; by what ran:")
        for fn, share in c.outside_top(10):
            print(f"    {share:6.1%}  {fn}")
    print(f"\n  unmatched: {c.unmatched_share:.1%} of active samples (in C_other); top functions:")
    for fn, share in c.unmatched_top(10):
        print(f"    {share:6.1%}  {fn}")
    for w in j["warnings"]:
        print(f"\n  warning: {w}")
    for label, p in (("cost profile", args.output), ("flame graph", args.flamegraph), ("bar chart", args.bars)):
        if p:
            print(f"  wrote {label}: {p}")
    return 0


def cmd_plot_groups(args) -> int:
    from . import calibrate as cal
    from .model import predict
    from .scenario import Scenario

    items = []
    for name in args.profiles:
        sc = {"cpu": {"frequency": "1GHz"}, "link": {"rate": "100Gbit/s"}, "traffic": {"rate": "1kpps"}, "cost": {"profile": name}}
        from pathlib import Path as _P

        base = str(_P(name).parent) if _P(name).is_file() else "."
        if _P(name).is_file():
            sc["cost"]["profile"] = _P(name).name
        p = predict(Scenario.from_dict(sc, origin=f"<profile {name}>", base_dir=base))
        items.append((_P(name).stem if _P(name).is_file() else name, p["cycles_by_group"]))
    cal.bar_chart(items, args.output, args.title)
    print(f"wrote {args.output}")
    return 0


# ---------------------------------------------------------------------------------------- compare


def cmd_compare(args) -> int:
    from .comparison import compare
    from .scenario import Scenario

    a = Scenario.load(args.a, args.set)
    b = Scenario.load(args.b, args.set)
    res = compare(a, b)
    if args.json:
        print(_dump(res))
        return 0
    print(f"pktsim compare: A = {res['a']['name']} ({args.a})")
    print(f"                B = {res['b']['name']} ({args.b})")
    print()
    if res["config_diff"]:
        print("configuration: B differs from A in")
        print(table([[d["key"], "-" if d["a"] is None else str(d["a"]), "-" if d["b"] is None else str(d["b"])] for d in res["config_diff"]], ["key", "A", "B"], "lll"))
    else:
        print("configuration: A and B are the same scenario")
    print()

    def fmt(v, unit):
        if v is None:
            return "-"
        if unit in ("pps", "1/s"):
            return si(v, "pps" if unit == "pps" else "/s")
        if unit == "ns":
            return f"{v / 1e3:.2f} us"
        if unit == "fraction":
            return f"{100 * v:.2f} %"
        return f"{v:.2f}"

    rows = []
    for r in res["rows"]:
        rel = "" if r["rel_diff"] is None else f"{100 * r['rel_diff']:+.1f}%"
        diff = "-" if r["diff"] is None else (fmt(r["diff"], r["unit"]) if r["unit"] != "fraction" else f"{100 * r['diff']:+.2f} pp")
        rows.append([r["quantity"], fmt(r["a"], r["unit"]), fmt(r["b"], r["unit"]), diff, rel])
    print(table(rows, ["quantity", "A", "B", "B - A", "change"], "lrrrr"))
    return 0


# ---------------------------------------------------------------------------------------- reproduce


def cmd_reproduce(args) -> int:
    from .reproduce import PAPERS, reproduce

    from .reproduce import AUTHORS, paper_id

    papers = list(PAPERS) if args.paper == "all" else [paper_id(args.paper) or args.paper]
    for paper in papers:
        if paper not in PAPERS:
            names = ", ".join(f"{n} ({a})" for a, n in AUTHORS.items())
            raise UsageError(f"reproduce: no reproduction of paper {args.paper!r} (have: {names}, all)")
    if args.report:
        from .report import build

        index = build(args.report, papers)
        print(f"wrote {index}")
        return 0
    results = _reproduce_with_progress(reproduce, papers, show=not args.json and sys.stderr.isatty())
    if args.json:
        # One paper: its object, with its summary. All: the list of those objects, as
        # before (a consumer iterating papers keeps working); the pooled summary is the
        # text output's last lines, or pktsim.reproduce.summary over every paper's rows.
        print(_dump(results[0] if len(results) == 1 else results))
        return 0
    for res in results:
        print(f"pktsim reproduce {res['paper']}: {res['title']}")
        _print_rows(res, f"summary ({res['paper']})")
        print()
    if len(results) > 1:
        from .reproduce.rows import summary, summary_text

        print(summary_text(summary(r for res in results for r in res["rows"]), "summary (all papers)"))
    return 0


# Simulations each reproduction runs (counted with pktsim.sim.observe_runs), for the ETA of
# `pktsim reproduce`'s progress bar; the bar adapts when a paper runs more or fewer.
_REPRODUCE_RUNS = {"000": 0, "001": 122, "002": 49, "003": 18, "004": 24}


def _reproduce_with_progress(reproduce, papers: list, show: bool) -> list:
    """Each paper's reproduction, with a progress bar over their simulations (rate and ETA;
    tqdm: terminal or Jupyter)."""
    if not show:
        return [reproduce(p) for p in papers]
    from tqdm.auto import tqdm

    from .sim import observe_runs

    out = []
    expected = [_REPRODUCE_RUNS.get(p, 0) for p in papers]
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


def _print_rows(res: dict, label: str = "summary") -> None:
    """A reproduce-style table: quantity, reported (measured), predicted, error, kind;
    then the summary lines (predicted rows' errors, relations held)."""
    from .reproduce.rows import summary, text_table, summary_text

    print(text_table(res["rows"]))
    print()
    print(summary_text(res.get("summary") or summary(res["rows"]), label))


# ---------------------------------------------------------------------------------------- testbed


def _tb_duration(args) -> float | None:
    """--duration in seconds (None when not given)."""
    return _quantity("duration", "--duration", args.duration) / 1e12 if args.duration else None


def cmd_tune(args) -> int:
    from .scenario import Scenario
    from .tune import GoalError, KnobError, TuneError, tune
    from .tune import knobs as knob_registry
    from .tune import output

    if args.list_knobs:
        data = Scenario.load(args.file, args.set).data if args.file else {"app": {}, "nic": {"itr": {"profile": "mlx5-eqe"}}}
        print(knob_registry.describe(data))
        return 0
    if not args.file:
        raise UsageError("tune: give a scenario FILE")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: expected a whole number of local processes, at least 1")
    sc = Scenario.load(args.file, args.set)
    if args.output:
        _writable_dir("-o", args.output)
    spec = [k for item in (args.knobs or []) for k in _split_knobs(item)] or None
    bar = None
    progress = None
    if not args.json and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=args.budget, unit="cand", file=sys.stderr, leave=False)

        def progress(done, total, label):
            bar.total = total
            bar.n = done
            bar.set_postfix_str(label, refresh=False)
            bar.refresh()

    try:
        t = tune(
            sc, load=args.load, load_range=args.load_range, loads=args.loads, minimize=args.minimize, maximize=args.maximize,
            subject_to=args.subject_to, knobs=spec, budget=args.budget, replications=args.replications, seed=args.seed,
            jobs=args.jobs, dask=args.dask, node=args.node, progress=progress,
        )
    except (GoalError, KnobError, TuneError) as e:
        raise UsageError(str(e)) from None
    finally:
        if bar is not None:
            bar.close()
    if args.output:
        try:
            written = output.write(t, sc, args.output)
        except OSError as e:
            raise UsageError(f"-o {args.output}: cannot write the tune's files ({e.strerror or e})") from None
    if args.json:
        print(_dump(t))
    else:
        print(output.text(t))
        if args.output:
            print("\nwrote " + ", ".join(str(p) for p in written))
    if not t["recommended"]:
        print(f"pktsim tune: no recommendation: {t.get('why_none', 'no candidate meets the constraints')}", file=sys.stderr)
        return 1
    return 0


def _split_knobs(item: str) -> list:
    """``--knobs a,b`` (commas between knobs; a key's value list ``k=v1,v2`` keeps its commas)."""
    out: list = []
    for part in item.split(","):
        part = part.strip()
        if not part:
            continue
        if out and "=" in out[-1] and "=" not in part and not _looks_like_knob(part):
            out[-1] += "," + part
        else:
            out.append(part)
    return out


def _looks_like_knob(text: str) -> bool:
    return "." in text and text.split(".")[0] in ("nic", "host", "socket", "cpu", "app", "traffic")


def cmd_testbed_run(args) -> int:
    from .testbed import runner
    from .testbed.topology import Topology

    duration = _tb_duration(args)
    if duration is None:
        duration = 3.0
    if args.rate and args.sweep:
        raise UsageError("testbed run: give --rate or --sweep, not both")
    if args.points is not None and not args.sweep:
        raise UsageError(f"--points {args.points}: the number of loads of a --sweep; give --sweep too, or leave --points out")
    if args.points is None:
        args.points = 8
    rate = _quantity("packetrate", "--rate", args.rate) if args.rate else None
    # Everything is checked before the namespaces are built.
    try:
        runner.check(rate, duration, args.repetitions, args.points if args.sweep else None)
        if args.sweep:
            runner.parse_sweep(args.sweep)
        topo = Topology(routes=args.routes, rules=args.rules)
    except TestbedError as e:
        raise UsageError(str(e)) from None
    with topo:
        if args.sweep:
            lo, hi = runner.parse_sweep(args.sweep)
            res = runner.sweep(topo, lo, hi, args.points, duration, args.repetitions, progress=None if args.json else _tb_progress)
        else:
            res = runner.repeat(topo, rate, duration, args.repetitions)
    res["setup"] = {"routes": args.routes, "rules": args.rules, "duration_s": duration, "repetitions": args.repetitions}
    if _emit_tb(args, res):
        return 0
    points = res["points"] if args.sweep else [res]
    if args.sweep:
        print(f"pktsim testbed: dut capacity {res['capacity_pps'] / 1e3:.1f} kpps ({args.rules} nftables rules, {args.routes} routes)")
    print(_format_tb(points))
    return 0


def _emit_tb(args, res: dict, plot: str | None = None) -> bool:
    """A testbed result to -o, to --plot (with the named function of pktsim.plots) and, with
    --json, to stdout; True when the JSON was printed (nothing else is)."""
    if args.output:
        atomic_write(args.output, _dump(res) + "\n")
    if plot and args.plot:
        from . import plots

        getattr(plots, plot)(res, args.plot)
    if args.json:
        print(_dump(res))
    return bool(args.json)


def _tb_progress(i: int, n: int, what: str) -> None:
    print(f"  [{i + 1}/{n}] {what}", file=sys.stderr, flush=True)


def _format_tb(points: list[dict]) -> str:
    def f(v, scale=1.0, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v * scale)

    rows = []
    for p in points:
        sp = p.get("spread", {}).get("dut_ns_per_packet")
        rows.append(
            [
                f(p["offered_pps"], 1e-3),
                f(p["forwarded_pps"], 1e-3),
                f(p["ingress_drop_pps"], 1e-3),
                f(p["dut_ns_per_packet"]) + (f" +-{100 * sp['rel_sd']:.1f}%" if sp else ""),
                f(p["dut_utilization"], 100),
                f(p["packets_per_wakeup"]),
                f(p["packets_per_poll"]),
                *(f(p["latency_ns"][q], 1e-3) for q in ("p50", "p90", "p99", "p999")),
                f(p["foreign_cpu"], 100),
            ]
        )
    head = ["offered kpps", "fwd kpps", "drop kpps", "dut ns/frame", "dut CPU %", "frames/wake", "frames/poll", "p50 us", "p90 us", "p99 us", "p99.9 us", "foreign CPU %"]
    return table(rows, head, "r" * len(head))


def cmd_testbed_validate(args) -> int:
    from .testbed import paths
    from .testbed.validate import plan

    duration = _tb_duration(args)
    try:
        plan(args.quick, duration, args.repetitions)
        paths.topology(args.path, args.rules, args.routes, args.loops)  # checks the dials; builds nothing
    except TestbedError as e:
        raise UsageError(str(e)) from None
    if args.loops is not None and args.path not in paths.LOOPED:
        raise UsageError(f"--loops {args.loops}: only --path xdp and --path afxdp have an XDP program's cost loop")
    if args.scenario_out and args.path not in ("stack", "defer"):
        raise UsageError(f"--scenario-out {args.scenario_out}: only --path stack and --path defer calibrate a scenario (the veth threaded-NAPI model)")
    res = paths.run(args.path, args.rules, args.routes, args.loops, args.quick, duration, args.repetitions, progress=None if args.json else _tb_progress)
    if args.scenario_out:
        from .testbed.validate import scenario_file_text

        _write_file("--scenario-out", args.scenario_out, scenario_file_text(res))
    if _emit_tb(args, res, "testbed_validation"):
        return 0
    m, st = res["machine"], res["setup"]
    dial = f"XDP program loop {st['loops']} turns" if args.path in paths.LOOPED else f"{args.rules} nftables rules, {args.routes} routes"
    print(f"pktsim testbed validate --path {args.path}: {res['title']}")
    print(f"  {m.get('cpu_model', '?')}, {m['cpus']} CPUs, Linux {m['kernel']}; {dial}")
    print(f"  {paths.PATHS[args.path].describe(res)}")
    print()
    _print_rows(res)
    print()
    if res["calibration"].get("interference"):
        print("  'fitted' rows were used for the calibration; p99 and p99.9 are predicted with the interference the probe measured on the dut CPU.")
    else:
        print("  'fitted' rows were used for the calibration; 'tail' rows (p99) include scheduler-tick and timer delays the model leaves out.")
    return 0


def cmd_testbed_probe(args) -> int:
    from .testbed import tails

    duration = _tb_duration(args)
    if duration is None:
        duration = 10.0
    try:
        tails.check_duration(duration)
    except TestbedError as e:
        raise UsageError(str(e)) from None
    res = tails.probe(duration)
    if _emit_tb(args, res, "testbed_probe"):
        return 0
    t, r = res.get("tick"), res.get("rest")
    us = lambda ns: "-" if ns is None else f"{ns / 1e3:.1f}"  # noqa: E731
    print(f"pktsim testbed probe: CPU {res['raw']['cpu']} at SCHED_FIFO {res['raw']['priority']}, {res['observed_s']:.2f} s observed")
    print(f"  {res['gaps']} gaps over {res['threshold_ns'] / 1e3:g} us ({res['gaps_per_s']:.0f}/s), {100 * res['stolen_share']:.2f}% of the CPU taken")
    if t:
        L = t["length_ns"]
        print(f"  tick: {t['hz']} Hz, a gap at {100 * t['share_of_periods']:.0f}% of the ticks; length p50 {us(L['p50'])} us, p90 {us(L['p90'])} us, p99 {us(L['p99'])} us")
    if r:
        L = r["length_ns"] or {}
        print(f"  the rest: {r['rate_per_s']:.0f}/s; length p50 {us(L.get('p50'))} us, p90 {us(L.get('p90'))} us, p99 {us(L.get('p99'))} us, mean {us(r['mean_length_ns'])} us")
    return 0


def cmd_testbed_plot(args) -> int:
    from .plots import testbed_validation

    try:
        res = json.loads(Path(args.result).read_text())
        res["measurements"]["points"], res["predictions"], res["calibration"]
    except OSError as e:
        raise UsageError(f"{args.result}: cannot read ({e.strerror or e})") from None
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"{args.result}: expected the JSON of `pktsim testbed validate --json` (or -o)") from None
    testbed_validation(res, args.output)
    print(f"wrote {args.output}")
    return 0


def cmd_testbed_tune_check(args) -> int:
    from .testbed import tunecheck

    duration = _tb_duration(args)
    try:
        res = tunecheck.run(args.dir, args.path, args.rules, args.routes, args.quick, duration, args.repetitions, args.rounds,
                            load_share=args.load_share, progress=None if args.json else _tb_progress)
    except tunecheck.Refused as e:
        raise UsageError(str(e)) from None
    if args.output:
        _write_file("-o", args.output, _dump(res) + "\n")
    if args.plot:
        tunecheck.plot(res, args.plot)
    if args.json:
        print(_dump(res))
        return 0
    ms, t = res["measurements"], res["tune"]
    share = f", {100 * t['load_pps'] / ms['model_capacity_pps']:.0f}% of the model's capacity" if ms["model_capacity_pps"] else ""
    print(f"pktsim testbed tune-check {args.dir} --path {args.path}: {res['title']}")
    print(f"  dut capacity {ms['capacity_pps'] / 1e3:.1f} kpps (current settings); measured at {ms['rate_pps'] / 1e3:.1f} kpps "
          f"(target {t['load_pps'] / 1e3:.1f} kpps{share}); {res['setup']['rounds']} rounds of current and tuned, "
          f"each {res['setup']['repetitions']} x {res['setup']['duration_s']:g} s")
    for c in res["changes"]:
        was = f"as it was ({c['before_run']})"
        print(f"  {c['key']}: {c['current'] or was} -> {c['tuned'] or was} ({c['where']} {c['name']})")
    print()
    print(tunecheck.text(res))
    print()
    g = res["goal"]
    print(f"  goal ({g['text']}): {'met' if g['met'] else 'NOT met'}"
          + ("" if res["constraints_hold_measured"] else "; a constraint does not hold on the kernel"))
    o = res["offered_traffic"]
    if o["disturbed"]:
        print(f"  disturbed: other tasks used {100 * (o['foreign_cpu'] or 0):.0f}% of a CPU; the generator ran up to {(o['max_late_ns'] or 0) / 1e6:.1f} ms late "
              f"and sent {o['frames_per_send_batch'] or 0:.2f} frames at a time (about 1 on time): the kernel got bursts, the model a constant rate")
    print("  pred: the model's figures in tune.json; meas: the mean over the rounds +- its 95% interval; change: (tuned - current) / current.")
    return 0


def cmd_testbed_teardown(args) -> int:
    from .testbed.topology import LockBusy, require_root, teardown_all

    require_root()
    try:
        gone = teardown_all(force=args.force)
    except LockBusy as e:
        raise TestbedError(f"{e}: refusing to tear it down (wait for it to end, or `pktsim testbed teardown --force` stops it first)") from None
    parts = [f"stopped the live run (PID {gone['stopped']})"] if gone["stopped"] else []
    if gone["stale_lock"] and not gone["stopped"]:
        parts.append(f"cleared the lock record of the dead run PID {gone['stale_lock']}")
    if gone["processes"]:
        parts.append(f"killed {len(gone['processes'])} leftover process{'es' if len(gone['processes']) != 1 else ''} (PID {', '.join(map(str, gone['processes']))})")
    if gone["namespaces"]:
        parts.append("deleted " + ", ".join(gone["namespaces"]))
    if gone["nftables"]:
        parts.append("deleted nftables table " + ", ".join(gone["nftables"]))
    if gone["directories"]:
        parts.append("removed " + ", ".join(gone["directories"]))
    if gone.get("sysctls"):
        parts.append("restored sysctl " + ", ".join(gone["sysctls"]))
    print("; ".join(parts) if parts else "nothing left behind")
    return 0


# ---------------------------------------------------------------------------------------- schema / profiles


def cmd_schema(args) -> int:
    text = json.dumps(json.loads(_core.schema("profile" if args.profile else "scenario")), indent=2) + "\n"
    if args.output:
        _write_file("-o", args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_profiles(args) -> int:
    names = _core.bundled_profiles()
    if args.name:
        if args.name not in names:
            raise UsageError(f"profiles: no bundled profile {args.name!r} (have: {', '.join(names)})")
        sys.stdout.write(_core.bundled_profile_text(args.name))
        return 0
    for n in names:
        print(n)
    return 0


# ---------------------------------------------------------------------------------------- trace-info


def cmd_trace_info(args) -> int:
    info = json.loads(_core.trace_info(args.file))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{info['file']}: {info['format']}, timestamps to {info['resolution']}, link type {info['link_type']}")
    print(f"packets   {info['packets']}  ({info['non_ip_packets']} not IP)")
    print(f"duration  {info['duration_s']:.6f} s")
    print(f"rate      {si(info['rate_pps'], 'pps')}, {si(info['rate_bps'], 'bit/s')} (frames with FCS, without preamble and gap)")
    print(f"frames    {info['mean_frame_bytes']:.1f} B mean on the wire (captured length + 4 B FCS), {bytes_h(info['bytes'])} in all")
    print(f"flows     {info['flows']} (distinct 5-tuples)")
    total = max(info["packets"], 1)
    rows = [
        [f"{b['from_bytes']} B" if b["from_bytes"] == b["to_bytes"] else f"{b['from_bytes']}-{b['to_bytes']} B", b["packets"], f"{100 * b['packets'] / total:.1f}%"]
        for b in info["sizes"]
    ]
    print(table(rows, ["size", "packets", "share"], align="lrr"))
    return 0


# ---------------------------------------------------------------------------------------- main


def _measurement_args(p: argparse.ArgumentParser, freq_help: str) -> None:
    """The measurement behind 000 Eq. 3: rate, CPU load or active cycles, clock."""
    p.add_argument("--rate", metavar="RATE", help="measured forwarding rate, e.g. 1.67Mpps")
    p.add_argument("--cpu-load", metavar="LOAD", help="measured CPU load of the core, e.g. 100%%")
    p.add_argument("--active-cycles", metavar="N", help="measured active cycles per second (instead of --cpu-load)")
    p.add_argument("--freq", metavar="FREQ", help=freq_help)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="pktsim", description="Predict and explain the performance of software packet-processing systems.")
    ap.add_argument("--version", action="version", version=f"pktsim {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    m = sub.add_parser("model", help="analytical cycles-per-packet model (000 Eq. 1-3)")
    m.add_argument("file", nargs="?", metavar="FILE", help="scenario TOML file")
    m.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key (repeatable), e.g. traffic.rate=1.2Mpps")
    m.add_argument("--json", action="store_true", help="print one JSON object")
    m.add_argument("--from-measurement", action="store_true", help="Eq. 3: C_total from a measured rate and CPU load")
    _measurement_args(m, "CPU frequency, e.g. 3.3GHz (default: the scenario's)")
    m.set_defaults(func=cmd_model)

    r = sub.add_parser("run", help="simulate a scenario: throughput, loss, latency percentiles, IRQ and poll rates, CPU")
    r.add_argument("file", metavar="FILE", help="scenario TOML file")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key (repeatable)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.set_defaults(func=cmd_run)

    w = sub.add_parser("sweep", help="simulate a grid of scenario keys with replications, locally or on Dask")
    w.add_argument("file", metavar="FILE", help="scenario TOML file")
    w.add_argument("--param", action="append", default=[], metavar="KEY", help="scenario key to vary (repeatable: a grid), e.g. traffic.rate, or seed")
    w.add_argument("--values", action="append", default=[], metavar="VALUES", help="START:STOP:STEP (0.1Mpps:2.4Mpps:0.1Mpps) or a comma list, after each --param")
    w.add_argument("--replications", type=int, metavar="N", help="runs per point with seeds seed, seed+1, ... (default 1 or [sweep] replications); with --param seed, each point's seed is the swept one")
    w.add_argument(
        "--variant", action="append", default=[], metavar="NAME=KEY=VALUE[,KEY=VALUE...]",
        help="a named configuration (repeatable), crossed with the --param grid; adds a variant column, "
        "e.g. --variant static=nic.itr.mode=static,nic.itr.interval=50us --variant dynamic=nic.itr.mode=dynamic",
    )
    w.add_argument("--jobs", type=int, metavar="N", help="local processes (default: all cores)")
    w.add_argument("--dask", metavar="ADDR", help="run on a Dask cluster, e.g. tcp://host:8786")
    w.add_argument(
        "-o", "--output", metavar="OUT.parquet",
        help="write one row per (point, replication): .parquet or .csv, each swept key with KEY_value in base units; "
        "per-class, per-ring and time-series results go next to it as long tables (out.per_class.parquet, out.per_ring.parquet, "
        "out.time_series.parquet; .csv likewise). "
        "Parquet metadata: the resolved scenario, the --set overrides, the variants and each worker's pktsim version. "
        "An interrupted sweep resumes from OUT.partial.jsonl "
        "when the scenario, its overrides and the grid are the same (a hash in the file); otherwise it says so and starts over. "
        "Error rows are run again.",
    )
    w.add_argument("--restart", action="store_true", help="with -o: discard the saved rows of an interrupted sweep and start over")
    w.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key (repeatable)")
    w.add_argument("--json", action="store_true", help="print a JSON list, one object per point")
    w.add_argument("--plots", metavar="DIR", help="also draw the standard plots into DIR")
    _figure_args(w)
    w.set_defaults(func=cmd_sweep)

    pl = sub.add_parser("plot", help="the standard plots of a sweep table (.parquet or .csv)")
    pl.add_argument("table", metavar="SWEEP")
    pl.add_argument("-o", "--output", required=True, metavar="DIR")
    pl.add_argument("--x", metavar="COLUMN", help="x axis (default: the offered load for a load sweep, else the swept key)")
    _figure_args(pl)
    pl.set_defaults(func=cmd_plot)

    k = sub.add_parser("calibrate", help="cycles per packet by group from a perf profile (000 Eq. 3)")
    k.add_argument("profile", metavar="PROFILE", help="perf script output, folded stacks, or perf report --stdio")
    _measurement_args(k, "CPU clock, e.g. 3.3GHz")
    k.add_argument("--rules", metavar="RULES.toml", help="group rules (default: the bundled Linux forwarding rules)")
    k.add_argument("--format", default="auto", choices=["auto", "perf-script", "folded", "perf-report"])
    k.add_argument("--idle-into-other", action="store_true", help="count idle functions as C_other (000 at partial load)")
    k.add_argument("--name", help="profile name (default: the file's stem)")
    k.add_argument("--routes", type=int, default=1, help="routes in the FIB when profiled (default 1)")
    k.add_argument("--flows", type=int, default=1, help="flows in the traffic when profiled (default 1)")
    k.add_argument("-o", "--output", metavar="COST.toml", help="write the cost profile")
    k.add_argument("--flamegraph", metavar="OUT.svg", help="write a flame graph coloured by group")
    k.add_argument("--bars", metavar="OUT.png", help="write a stacked bar chart of cycles per group")
    k.add_argument("--json", action="store_true")
    k.set_defaults(func=cmd_calibrate)

    g = sub.add_parser("plot-groups", help="stacked bars of cycles per group for cost profiles side by side (000 Figs. 7, 9)")
    g.add_argument("profiles", nargs="+", metavar="PROFILE", help="bundled profile names or cost-profile files")
    g.add_argument("-o", "--output", required=True, metavar="OUT.png")
    g.add_argument("--title", default="Cycles per packet by group")
    g.set_defaults(func=cmd_plot_groups)

    c = sub.add_parser("compare", help="model and simulate two scenarios side by side, with the differences")
    c.add_argument("a", metavar="A.toml")
    c.add_argument("b", metavar="B.toml")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a key in both (repeatable)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_compare)

    r = sub.add_parser(
        "reproduce",
        help="reproduce a seed paper's numbers: predicted vs reported, with errors",
        description="Reproduce a seed paper's numbers: each row is reported vs predicted with the error and its kind "
        "(predicted; fitted: a calibration point or fit closure; derived: the paper's own arithmetic or pktsim's inputs; "
        "relation: a claim that holds or not). The output ends with a summary: predicted rows with their median and "
        "worst |error| (fitted and derived rows left out), relations held; rows with |error| > 10% are flagged.",
    )
    r.add_argument("paper", metavar="PAPER", help="000, 001, 002, 003, 004, or all")
    r.add_argument(
        "--json",
        action="store_true",
        help="print JSON: for one paper an object {paper, title, rows, summary, ...}; for all, a list of those "
        "objects (one per paper, each with its own summary; the pooled summary is pktsim.reproduce.summary over all rows)",
    )
    r.add_argument("--report", metavar="DIR", help="write DIR/index.html with tables and figures")
    r.set_defaults(func=cmd_reproduce)

    tu = sub.add_parser("tune", help="recommend the kernel knobs for a latency, loss or CPU target, with the commands that apply them")
    tu.add_argument("file", nargs="?", metavar="FILE", help="scenario TOML file (today's configuration)")
    tu.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key (repeatable)")
    tu.add_argument("--load", metavar="RATE", help="the target load, e.g. 300kpps (the objectives are read there)")
    tu.add_argument("--load-range", metavar="LO:HI", help="loads the constraints must hold at, e.g. 50kpps:1Mpps (--loads of them, log-spaced)")
    tu.add_argument("--loads", type=int, default=5, metavar="N", help="loads over --load-range (default 5)")
    tu.add_argument("--minimize", action="append", default=[], metavar="METRIC", help="an objective (repeatable): cpu, cpu_ns_per_packet, latency_ns.p99, ... (any figure of run --json)")
    tu.add_argument("--maximize", action="append", default=[], metavar="METRIC", help="an objective to maximise, e.g. throughput_pps")
    tu.add_argument("--subject-to", action="append", default=[], metavar="CONSTRAINT", help='a constraint (repeatable), e.g. "latency_ns.p99 <= 50us", "loss_ratio <= 1e-4"')
    tu.add_argument("--knobs", action="append", metavar="KNOB,...", help="knobs to turn (default: every one that applies): nic.itr, nic.napi, socket.busy_poll, host.budget, nic.rx_ring, nic.tx_ring, host.af_xdp.batch, cpu.cores; or one key, narrowed: nic.itr.interval=10us:200us")
    tu.add_argument("--list-knobs", action="store_true", help="list the knobs, their keys and legal values (for FILE, if given) and exit")
    tu.add_argument("--node", type=int, metavar="I", help="for a chain file: the node whose knobs to tune (default: the bottleneck the model names)")
    tu.add_argument("--budget", type=int, default=500, metavar="N", help="most candidate configurations to simulate (default 500; a space no larger is searched whole)")
    tu.add_argument("--replications", type=int, metavar="N", help="runs per candidate and load (default: 1 if two seeds give the same figures, else 3)")
    tu.add_argument("--seed", type=int, default=1, metavar="N", help="seed of the search (the scenario's seed drives the runs)")
    tu.add_argument("--jobs", type=int, metavar="N", help="local processes (default: all cores)")
    tu.add_argument("--dask", metavar="ADDR", help="run candidates on a Dask cluster, e.g. tcp://host:8786")
    tu.add_argument("-o", "--output", metavar="DIR", help="write DIR/tuned.toml, DIR/apply.sh, DIR/pareto.png and DIR/tune.json")
    tu.add_argument("--json", action="store_true", help="print one JSON object")
    tu.set_defaults(func=cmd_tune)

    tb = sub.add_parser("testbed", help="measure real Linux forwarding in network namespaces and hold the model against it (root)")
    tbs = tb.add_subparsers(dest="testbed_command", metavar="COMMAND")
    tb.set_defaults(func=lambda a: (tb.print_help(), EXIT_USAGE)[1])

    def dials(p):
        p.add_argument("--routes", type=int, default=0, metavar="N", help="N /32 routes in the dut (the generator cycles through them)")
        p.add_argument("--rules", type=int, default=400, metavar="N", help="N non-matching nftables rules in the forward hook (default 400)")
        p.add_argument("--duration", metavar="D", help="per run, 50ms to 60s, e.g. 3s")
        p.add_argument("--json", action="store_true")
        p.add_argument("-o", "--output", metavar="FILE", help="also write the JSON result to FILE")

    tr = tbs.add_parser("run", help="forward bounded traffic gen -> dut -> sink and measure it")
    tr.add_argument("--rate", metavar="R", help="offered rate, e.g. 100kpps (default: as fast as the generator can)")
    tr.add_argument("--sweep", metavar="LO%:HI%", help="loads as fractions of the measured capacity, e.g. 10%%:120%%")
    tr.add_argument("--points", type=int, default=None, metavar="N", help="loads in a sweep, 2 to 50 (default 8)")
    tr.add_argument("--repetitions", type=int, default=3, metavar="N", help="runs per load, 1 to 20 (default 3)")
    dials(tr)
    tr.set_defaults(func=cmd_testbed_run)
    tv = tbs.add_parser("validate", help="measure a path, calibrate its model on a few points, predict the rest, print measured vs predicted")
    tv.add_argument(
        "--path",
        choices=("stack", "defer", "xdp", "afxdp"),
        default="stack",
        help="stack: the kernel's forwarding (nftables dial); defer: the same with napi_defer_hard_irqs / gro_flush_timeout dialled; "
        "xdp: native XDP redirect between the veths; afxdp: a forwarder between two AF_XDP sockets, batch 1 to 256 (default stack)",
    )
    tv.add_argument("--loops", type=int, default=None, metavar="N", help="--path xdp / afxdp: turns of the XDP program's cost loop per frame (default 15000 / 3000)")
    tv.add_argument("--quick", action="store_true", help="a few points, 1 run each, 0.5 s (a smoke test)")
    tv.add_argument("--repetitions", type=int, default=None, metavar="N", help="runs per load, 1 to 20 (default 3; 1 with --quick)")
    tv.add_argument("--plot", metavar="FILE", help="also draw measured vs predicted (PNG or SVG by suffix)")
    tv.add_argument("--scenario-out", metavar="FILE.toml", help="--path stack / defer: also write the calibrated model as a scenario (for pktsim run, sweep, tune)")
    dials(tv)
    tv.set_defaults(func=cmd_testbed_validate)
    tt = tbs.add_parser("tune-check", help="apply what `pktsim tune -o DIR` recommends to the dut and measure current vs tuned against the predicted improvement")
    tt.add_argument("dir", metavar="DIR", help="the directory `pktsim tune ... -o DIR` wrote (DIR/tune.json)")
    tt.add_argument("--path", choices=("stack", "defer", "afxdp"), default="defer", help="the dut the sets are applied to (default defer: veth, threaded NAPI, nftables)")
    tt.add_argument("--load-share", action="store_true", help="measure at the share of the dut's measured capacity that the target load is of the model's capacity (default: at the target load itself)")
    tt.add_argument("--rounds", type=int, default=None, metavar="N", help="rounds of current then tuned, 1 to 20 (default 3; 2 with --quick)")
    tt.add_argument("--repetitions", type=int, default=None, metavar="N", help="runs per setting and round, 1 to 20 (default 3; 1 with --quick)")
    tt.add_argument("--quick", action="store_true", help="2 rounds of 1 run of 0.5 s each (a smoke test, about half a minute)")
    tt.add_argument("--plot", metavar="FILE", help="also draw predicted vs measured change per metric (PNG or SVG by suffix)")
    dials(tt)
    tt.set_defaults(func=cmd_testbed_tune_check)
    tq = tbs.add_parser("probe", help="measure the interference the dut CPU suffers with nothing to forward (tick, the rest), as root")
    tq.add_argument("--duration", metavar="D", help="how long, 100ms to 600s (default 10s)")
    tq.add_argument("--plot", metavar="FILE", help="also draw the gaps (PNG or SVG by suffix)")
    tq.add_argument("--json", action="store_true")
    tq.add_argument("-o", "--output", metavar="FILE", help="also write the JSON result to FILE")
    tq.set_defaults(func=cmd_testbed_probe)
    tp = tbs.add_parser("plot", help="draw measured vs predicted from a saved validate result")
    tp.add_argument("result", metavar="RESULT.json", help="the JSON of `pktsim testbed validate --json` (or -o)")
    tp.add_argument("-o", "--output", metavar="FILE", required=True, help="PNG or SVG by suffix")
    tp.set_defaults(func=cmd_testbed_plot)
    td = tbs.add_parser(
        "teardown",
        help="remove what a killed run left behind (namespaces, processes, temporary directories); refuses while a run is live (exit 1)",
    )
    td.add_argument("--force", action="store_true", help="stop a live run first (SIGTERM: it tears down itself; SIGKILL after 10 s)")
    td.set_defaults(func=cmd_testbed_teardown)

    ih = sub.add_parser("import-host", help="write a scenario from this machine's (or saved) ethtool, sysctl, lscpu and /proc/interrupts output")
    ih.add_argument("--from", dest="from_dir", metavar="DIR", help="saved outputs: ethtool-i.txt, ethtool-g.txt, ethtool-l.txt, ethtool-c.txt, ethtool.txt, sysctl.txt, lscpu.txt, interrupts.txt (any may be missing)")
    ih.add_argument("--iface", metavar="NAME", help="the interface (default: the one the saved outputs name, or the first one that is not lo)")
    ih.add_argument("-o", "--output", metavar="HOST.toml", help="write the scenario here (default: print it)")
    ih.set_defaults(func=cmd_import_host)

    s = sub.add_parser("schema", help="print the JSON Schema of the scenario format")
    s.add_argument("--profile", action="store_true", help="the cost-profile format instead")
    s.add_argument("-o", "--output", metavar="FILE")
    s.set_defaults(func=cmd_schema)

    ti = sub.add_parser("trace-info", help="a pcap or pcapng trace at a glance: packets, duration, rate, sizes, flows")
    ti.add_argument("file", metavar="FILE", help="the trace (pcap or pcapng)")
    ti.add_argument("--json", action="store_true", help="print JSON")
    ti.set_defaults(func=cmd_trace_info)

    p = sub.add_parser("profiles", help="list the bundled cost profiles, or print one")
    p.add_argument("name", nargs="?")
    p.set_defaults(func=cmd_profiles)
    return ap


class OutputError(Exception):
    """Standard output could not be written (a full disk, /dev/full, a closed terminal)."""


class _GuardedStdout:
    """sys.stdout whose write failures become :class:`OutputError` (a broken pipe stays a
    BrokenPipeError: the reader went away, which is not an error)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputError(e.strerror or str(e)) from None

    def flush(self):
        try:
            return self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputError(e.strerror or str(e)) from None

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _silence_stdout(stream) -> None:
    """Point the process's stdout at /dev/null so that the interpreter's final flush of
    what could not be written does not fail again."""
    import os

    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return  # not a real file (captured output)
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    import signal

    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        # A terminated run unwinds like Ctrl-C: the testbed tears down, files stay whole.
        signal.signal(signal.SIGTERM, _sigterm)
    ap = build_parser()
    args = ap.parse_args(argv)
    if not getattr(args, "func", None):
        ap.print_help()
        return EXIT_USAGE
    real_stdout = sys.stdout
    sys.stdout = _GuardedStdout(real_stdout)
    try:
        rc = args.func(args)
        sys.stdout.flush()
        return rc
    except OutputError as e:
        _silence_stdout(real_stdout)
        print(f"pktsim: error: cannot write to standard output ({e}); expected a writable stdout", file=sys.stderr)
        return EXIT_USAGE
    except ScenarioError as e:
        print(f"pktsim: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except UsageError as e:
        print(f"pktsim: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except TestbedError as e:
        print(f"pktsim testbed: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pktsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout(real_stdout)
        return 0
    except BaseException as e:  # a Rust panic arrives as pyo3's PanicException (a BaseException)
        if isinstance(e, SystemExit):
            raise
        print(f"pktsim: internal error: {type(e).__name__}: {e} (this is a bug in pktsim; please report it with the scenario)", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        sys.stdout = real_stdout


if __name__ == "__main__":
    sys.exit(main())
