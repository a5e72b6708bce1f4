"""The ``pktsim`` commands other than ``run``: :mod:`pktsim.cli` parses the command line and
imports this module only for them."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

from . import _core
from .errors import UsageError
from .testbed.errors import TestbedError
from .textio import atomic_write, bytes_h, json_text, si, table


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
            raise UsageError(f"--active-cycles {args.active_cycles!r}: expected the active cycles per second as a finite number above 0, e.g. 3.1e9") from None
    return load, active


def _write_file(option: str, path: str, data: str | bytes) -> None:
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
        print(json_text(p))
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
    return "\n".join(
        [
            f"pktsim model: chain {p['name']}  ({origin}), {len(p['nodes'])} nodes",
            "",
            table(rows, ["node", "name", "loss-free capacity", "limited by", "inbound link", "CPU load"], "llrlrl", width=None),
            "",
            f"  chain capacity {si(p['r_max_pps'], 'pps')}: node {b} ({p['node_names'][b]}, {p['bottleneck']}); "
            f"offered {si(p['offered_pps'], 'pps')}, predicted {si(p['predicted_pps'], 'pps')}" + (" (saturated)" if p["saturated"] else ""),
        ]
    )


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
        print(json_text(m))
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


# ---------------------------------------------------------------------------------------- sweep


def cmd_sweep(args) -> int:
    from .errors import ScenarioError
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
    # The first point is resolved here, under each variant: where the scenario refuses it
    # under all of them (a misspelt key, a value of the wrong kind: every point would
    # fail), the sweep is refused at once. Other points the scenario refuses are reported as
    # they fail, and the rest of the grid runs.
    first = [(k, vals[0]) for k, vals in params.items()]
    refusals = []
    for vsets in [list(v) for v in variants.values()] or [[]]:
        try:
            sc.with_sets([*vsets, *first])
            break
        except ScenarioError as e:
            refusals.append(e)
    else:
        point = ", ".join(f"{k}={v}" for k, v in first)
        raise UsageError(f"sweep: its first point ({point}) is refused: {refusals[0]}")
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


def _figure_options(args) -> dict:
    if not 20 <= args.dpi <= 1200:
        raise UsageError(f"--dpi {args.dpi}: expected 20 to 1200 dots per inch")
    m = re.match(r"^([0-9.]+)x([0-9.]+)$", args.size or "")
    if not m or not (0.5 <= float(m.group(1)) <= 40 and 0.5 <= float(m.group(2)) <= 40):
        raise UsageError(f"--size {args.size}: expected WIDTHxHEIGHT in inches, each 0.5 to 40 (e.g. 3.5x2.6)")
    return {"fmt": args.format, "dpi": args.dpi, "size": (float(m.group(1)), float(m.group(2)))}


def cmd_plot(args) -> int:
    import stat

    from .experiments import read_table
    from .plots import sweep_plots

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
        print(json_text(c.to_json()))
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

    items = [profile_groups(name) for name in args.profiles]
    cal.bar_chart(items, args.output, args.title)
    print(f"wrote {args.output}")
    return 0


def profile_groups(name: str) -> tuple[str, dict]:
    """A cost profile's label and cycles per group, as measured: at the FIB it was
    measured with, so that its routing cycles are as written (at another FIB size the
    model would move them)."""
    import tomllib

    from .model import predict
    from .scenario import Scenario

    file = Path(name).is_file()
    sc = {"cpu": {"frequency": "1GHz"}, "link": {"rate": "100Gbit/s"}, "traffic": {"rate": "1kpps"}, "cost": {"profile": Path(name).name if file else name}}
    try:
        text = Path(name).read_text() if file else _core.bundled_profile_text(name)
        measured = tomllib.loads(text).get("profile", {})
        sc["traffic"]["flows"] = int(measured.get("reference_flows", 1))
        sc["fib"] = {"routes": int(measured.get("reference_routes", 1))}
    except (OSError, UnicodeDecodeError, ValueError, TypeError):
        pass  # the core names what is wrong with the profile
    p = predict(Scenario.from_dict(sc, origin=f"<profile {name}>", base_dir=str(Path(name).parent) if file else "."))
    return (Path(name).stem if file else name, p["cycles_by_group"])


# ---------------------------------------------------------------------------------------- compare


def cmd_compare(args) -> int:
    from .comparison import compare
    from .scenario import Scenario

    a = Scenario.load(args.a, args.set)
    b = Scenario.load(args.b, args.set)
    res = compare(a, b)
    if args.json:
        print(json_text(res))
        return 0
    print(f"pktsim compare: A = {res['a']['name']} ({args.a})")
    print(f"                B = {res['b']['name']} ({args.b})")
    print()
    if res["config_diff"]:
        print("configuration: B differs from A in")
        print(
            table(
                [[d["key"], "-" if d["a"] is None else str(d["a"]), "-" if d["b"] is None else str(d["b"])] for d in res["config_diff"]],
                ["key", "A", "B"],
                "lll",
            )
        )
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
    from .reproduce import AUTHORS, PAPERS, paper_id, reproduce

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
        print(json_text(results[0] if len(results) == 1 else results))
        return 0
    for res in results:
        print(f"pktsim reproduce {res['paper']}: {res['title']}")
        _print_rows(res, f"summary ({res['paper']})")
        print()
    if len(results) > 1:
        from .reproduce.rows import summary, summary_text

        print(summary_text(summary(r for res in results for r in res["rows"]), "summary (all papers)"))
    return 0


def _reproduce_with_progress(reproduce, papers: list, show: bool) -> list:
    """Each paper's reproduction, with a progress bar over their simulations (rate and ETA;
    tqdm: terminal or Jupyter). The ETA counts on each paper's ``runs``
    (:data:`pktsim.reproduce.PAPERS`); the bar adapts when a paper runs more or fewer."""
    if not show:
        return [reproduce(p) for p in papers]
    from tqdm.auto import tqdm

    from .reproduce import PAPERS
    from .sim import observe_runs

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


def _print_rows(res: dict, label: str = "summary") -> None:
    """A reproduce-style table: quantity, reported (measured), predicted, error, kind;
    then the summary lines (predicted rows' errors, relations held)."""
    from .reproduce.rows import summary, summary_text, text_table

    print(text_table(res["rows"]))
    print()
    print(summary_text(res.get("summary") or summary(res["rows"]), label))


# ---------------------------------------------------------------------------------------- testbed


def _tb_duration(args) -> float | None:
    """--duration in seconds (None when not given)."""
    return _quantity("duration", "--duration", args.duration) / 1e12 if args.duration else None


def cmd_tune(args) -> int:
    from .scenario import Scenario
    from .tune import GoalError, KnobError, TuneError, output, tune
    from .tune import knobs as knob_registry

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

        def show(done, total, label):
            bar.total = total
            bar.n = done
            bar.set_postfix_str(label, refresh=False)
            bar.refresh()

        progress = show

    try:
        t = tune(
            sc,
            load=args.load,
            load_range=args.load_range,
            loads=args.loads,
            minimize=args.minimize,
            maximize=args.maximize,
            subject_to=args.subject_to,
            knobs=spec,
            budget=args.budget,
            replications=args.replications,
            seed=args.seed,
            jobs=args.jobs,
            dask=args.dask,
            node=args.node,
            progress=progress,
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
        print(json_text(t))
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
        atomic_write(args.output, json_text(res) + "\n")
    if plot and args.plot:
        from . import plots

        getattr(plots, plot)(res, args.plot)
    if args.json:
        print(json_text(res))
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
    head = [
        "offered kpps",
        "fwd kpps",
        "drop kpps",
        "dut ns/frame",
        "dut CPU %",
        "frames/wake",
        "frames/poll",
        "p50 us",
        "p90 us",
        "p99 us",
        "p99.9 us",
        "foreign CPU %",
    ]
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
        print(
            f"  tick: {t['hz']} Hz, a gap at {100 * t['share_of_periods']:.0f}% of the ticks; "
            f"length p50 {us(L['p50'])} us, p90 {us(L['p90'])} us, p99 {us(L['p99'])} us"
        )
    if r:
        L = r["length_ns"] or {}
        print(
            f"  the rest: {r['rate_per_s']:.0f}/s; length p50 {us(L.get('p50'))} us, p90 {us(L.get('p90'))} us, "
            f"p99 {us(L.get('p99'))} us, mean {us(r['mean_length_ns'])} us"
        )
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
        res = tunecheck.run(
            args.dir,
            args.path,
            args.rules,
            args.routes,
            args.quick,
            duration,
            args.repetitions,
            args.rounds,
            load_share=args.load_share,
            progress=None if args.json else _tb_progress,
        )
    except tunecheck.Refused as e:
        raise UsageError(str(e)) from None
    if args.output:
        _write_file("-o", args.output, json_text(res) + "\n")
    if args.plot:
        tunecheck.plot(res, args.plot)
    if args.json:
        print(json_text(res))
        return 0
    ms, t = res["measurements"], res["tune"]
    share = f", {100 * t['load_pps'] / ms['model_capacity_pps']:.0f}% of the model's capacity" if ms["model_capacity_pps"] else ""
    print(f"pktsim testbed tune-check {args.dir} --path {args.path}: {res['title']}")
    print(
        f"  dut capacity {ms['capacity_pps'] / 1e3:.1f} kpps (current settings); measured at {ms['rate_pps'] / 1e3:.1f} kpps "
        f"(target {t['load_pps'] / 1e3:.1f} kpps{share}); {res['setup']['rounds']} rounds of current and tuned, "
        f"each {res['setup']['repetitions']} x {res['setup']['duration_s']:g} s"
    )
    for c in res["changes"]:
        was = f"as it was ({c['before_run']})"
        print(f"  {c['key']}: {c['current'] or was} -> {c['tuned'] or was} ({c['where']} {c['name']})")
    print()
    print(tunecheck.text(res))
    print()
    g = res["goal"]
    print(
        f"  goal ({g['text']}): {'met' if g['met'] else 'NOT met'}" + ("" if res["constraints_hold_measured"] else "; a constraint does not hold on the kernel")
    )
    o = res["offered_traffic"]
    if o["disturbed"]:
        print(
            f"  disturbed: other tasks used {100 * (o['foreign_cpu'] or 0):.0f}% of a CPU; the generator ran up to {(o['max_late_ns'] or 0) / 1e6:.1f} ms late "
            f"and sent {o['frames_per_send_batch'] or 0:.2f} frames at a time (about 1 on time): the kernel got bursts, the model a constant rate"
        )
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
        parts.append(
            f"killed {len(gone['processes'])} leftover process{'es' if len(gone['processes']) != 1 else ''} (PID {', '.join(map(str, gone['processes']))})"
        )
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
        [
            f"{b['from_bytes']} B" if b["from_bytes"] == b["to_bytes"] else f"{b['from_bytes']}-{b['to_bytes']} B",
            b["packets"],
            f"{100 * b['packets'] / total:.1f}%",
        ]
        for b in info["sizes"]
    ]
    print(table(rows, ["size", "packets", "share"], align="lrr"))
    return 0
