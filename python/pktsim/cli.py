"""The ``pktsim`` command."""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .cliparser import OUTPUT_OPTIONS, OnlySubcommand, Parser, _figure_args, _measurement_args, add_examples, add_fit, add_observe, add_tune, command_of
from .errors import ScenarioError, UsageError
from .testbed.errors import TestbedError
from .textio import fit_lines, json_text, si, table

# The modules a command needs are imported by that command: `pktsim run` starts without the
# sweep machinery, pandas or matplotlib (tests/test_structure.py checks it), and without the
# other commands' code, which is in pktsim.commands.

EXIT_USAGE = 2
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


# ---------------------------------------------------------------------------------------- run


def cmd_run(args) -> int:
    from .sim import run_file

    if args.plot:
        _check_plot_path(args.plot)
    r = run_file(args.file, args.set, allow_large=args.allow_large, notify=lambda m: print(f"pktsim: {m}", file=sys.stderr, flush=True))
    if args.plot:
        from .series_plot import time_series

        if not r.get("series"):
            raise ScenarioError(f"--plot {args.plot}: the run has no time series: set measure.interval (e.g. --set measure.interval=1ms)")
        time_series(r, args.plot)
    if args.json:
        print(json_text(r))
        return 0
    print(format_run(r, args.file))
    return 0


def _check_plot_path(path: str) -> None:
    """A figure's path, checked before anything runs: a PNG or SVG, and not a directory
    (a missing directory is made, as for every output; main() checks it can be)."""
    from pathlib import Path

    p = Path(path)
    if p.suffix.lower() not in (".png", ".svg"):
        raise ScenarioError(f"--plot {path}: expected a .png or .svg file")
    if p.is_dir():
        raise ScenarioError(f"--plot {path}: a directory; expected a .png or .svg file")


def format_run(r: dict, origin: str) -> str:
    text = _format_run(r, origin)
    if "nodes" not in r:
        return text
    # A chain: the figures above are end to end; then where frames were lost, then each node.
    rows = []
    for i, (n, loss) in enumerate(zip(r["nodes"], r["loss_by_node"])):
        rows.append(
            [
                str(i),
                r["node_names"][i],
                si(n["throughput_pps"], "pps"),
                f"{loss['dropped_packets']:,} ({100 * loss['share_of_offered']:.3f} %)",
                f"{n['latency_ns']['p50'] / 1e3:.2f}",
                f"{n['latency_ns']['p99'] / 1e3:.2f}",
                f"{100 * n['cpu_utilization']:.1f} %",
            ]
        )
    return (
        text
        + "\n\n"
        + table(rows, ["node", "name", "forwarded", "dropped (of offered)", "p50 us", "p99 us", "CPU"], "llrrrrr")
        + "\n  (end to end above: from the first node's ingress to the last node's egress)"
    )


def _idle_rows(r: dict) -> list[list[str]]:
    """The idle states the cores slept in (`[cpu.idle]`), like `cpupower monitor`: each
    state's share of the time and entries, and what the wake-ups paid."""
    idle = r.get("idle_states")
    if not idle:
        return []
    used = [s for s in idle["states"] if s["entries"] or s["time_share"] > 0]
    states = ", ".join(f"{s['name']} {100 * s['time_share']:.1f}% ({s['entries']:,} entries)" for s in used) or "none entered"
    return [
        [f"idle ({idle['governor']})", states],
        ["wake-ups", f"{idle['wakeups_per_s']:,.0f} /s from a state that costs, exit latency {idle['mean_exit_latency_ns'] / 1e3:.2f} us mean"],
    ]


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
                [
                    "throughput" if r.get("consumed_packets") else "forwarded",
                    si(r["throughput_pps"], "pps")
                    + f"  ({si(r['throughput_bps'], 'bit/s')})"
                    + (f"; forwarded {r['forwarded_packets']:,}, consumed {r['consumed_packets']:,} packets" if r.get("consumed_packets") else ""),
                ],
                ["loss", f"{100 * r['loss_ratio']:.3f} %  " + ", ".join(f"{k} {v:,}" for k, v in r["drops"].items() if v)],
                # Only the activities that took time, the longest first.
                [
                    "CPU",
                    f"{100 * r['cpu_utilization']:.1f} %  "
                    + ", ".join(f"{k} {100 * v:.1f}%" for k, v in sorted(r["cpu_by_activity"].items(), key=lambda kv: -kv[1]) if v > 0),
                ],
            ]
            # Where NAPI runs: the CPU by context, as mpstat (%irq, %soft) and pidstat show it.
            + (
                [["contexts", ", ".join(f"{k} {100 * v:.1f}%" for k, v in sorted(r["cpu_by_context"].items(), key=lambda kv: -kv[1]) if v > 0)]]
                if any(v > 0 for v in r.get("cpu_by_context", {}).values())
                else []
            )
            # Interrupts, polls and softirqs only where the I/O mode has them.
            + ([["IRQs", f"{r['irq_per_s']:,.0f} /s  ({r['irqs_per_packet']:.4f} per packet)"]] if r["irq_per_s"] > 0 else [])
            + (
                [["polls", f"{r['polls_per_packet']:.4f} per packet, {r['packets_per_poll']['mean']:.1f} rx packets per poll"]]
                if r["polls_per_packet"] > 0
                else []
            )
            + (
                [["softirqs", f"{r['softirqs_per_packet']:.4f} per packet, {r['time_squeeze']:,} time squeezes, {r['ksoftirqd_wakeups']:,} ksoftirqd wake-ups"]]
                if r["softirqs_per_packet"] > 0
                else []
            )
            + _wakeup_rows(r)
            + _idle_rows(r)
            # Under a scaling cpufreq governor, the clock the run settled at.
            + (
                [["clock", f"{r['cpu_freq_hz'] / 1e9:.2f} GHz, where [cpu.freq]'s governor settles at this load"]]
                if any(n.startswith("cpu.freq:") for n in r["notes"])
                else []
            ),
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
    return fit_lines("\n".join(lines))


def _wakeup_rows(r: dict) -> list:
    io = r.get("io") or {}
    if not isinstance(io, dict) or "wakeups" not in io:
        return []
    w, fwd = io["wakeups"], r["forwarded_packets"]
    rate = w * r["throughput_pps"] / fwd if fwd else 0.0
    per = f"{fwd / w:.1f} packets per wake-up" if w else "the thread never slept"
    return [["wake-ups", f"{rate:,.0f} /s, {per} (NAPI thread)"]]


def _later(name: str):
    """Command `name` of :mod:`pktsim.commands`, imported when it runs (its family's module
    alone): `pktsim run` starts without compiling or loading the other commands' code."""

    def call(args) -> int:
        from . import commands

        return getattr(commands, name)(args)

    return call


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every subcommand in full, or with ``only``, that one in
    full and the others by name and help (:class:`~pktsim.cliparser.OnlySubcommand`)."""
    from .reproduce import PAPERS  # the list alone: the papers' modules come when one runs

    ap = Parser(prog="pktsim", description="Predict and explain the performance of software packet-processing systems.")
    ap.add_argument("--version", action="version", version=f"pktsim {__version__}")
    sub = OnlySubcommand(ap.add_subparsers(dest="command", metavar="COMMAND"), only)

    m = sub.add_parser("model", help="analytical cycles-per-packet model (000 Eq. 1-3)")
    m.add_argument("file", nargs="?", metavar="FILE", help="scenario TOML file")
    m.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key (repeatable), e.g. traffic.rate=1.2Mpps")
    m.add_argument("--json", action="store_true", help="print one JSON object")
    m.add_argument("--from-measurement", action="store_true", help="Eq. 3: C_total from a measured rate and CPU load")
    _measurement_args(m, "CPU frequency, e.g. 3.3GHz (default: the scenario's)")
    m.set_defaults(func=_later("cmd_model"))

    r = sub.add_parser("run", help="simulate a scenario: throughput, loss, latency percentiles, IRQ and poll rates, CPU")
    r.add_argument("file", metavar="FILE", help="scenario TOML file")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key (repeatable)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw the time series (needs measure.interval): rates, interrupts and polls, moderation interval, frames per poll, idle wake-ups",
    )
    r.add_argument(
        "--allow-large",
        action="store_true",
        help="run even when it simulates more than 2e9 frames (offered rate x warm-up and duration; about a minute): refused otherwise, to catch typos",
    )
    r.set_defaults(func=cmd_run)

    w = sub.add_parser("sweep", help="simulate a grid of scenario keys with replications, locally or on Dask")
    w.add_argument("file", metavar="FILE", help="scenario TOML file")
    w.add_argument("--param", action="append", default=[], metavar="KEY", help="scenario key to vary (repeatable: a grid), e.g. traffic.rate, or seed")
    w.add_argument(
        "--values", action="append", default=[], metavar="VALUES", help="START:STOP:STEP (0.1Mpps:2.4Mpps:0.1Mpps) or a comma list, after each --param"
    )
    w.add_argument(
        "--replications",
        type=int,
        metavar="N",
        help="runs per point with seeds seed, seed+1, ... (default 1 or [sweep] replications); with --param seed, each point's seed is the swept one",
    )
    w.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=KEY=VALUE[,KEY=VALUE...]",
        help="a named configuration (repeatable), crossed with the --param grid; adds a variant column, "
        "e.g. --variant static=nic.itr.mode=static,nic.itr.interval=50us --variant dynamic=nic.itr.mode=dynamic",
    )
    w.add_argument("--jobs", type=int, metavar="N", help="local processes (default: all cores)")
    w.add_argument("--dask", metavar="ADDR", help="run on a Dask cluster, e.g. tcp://host:8786")
    w.add_argument(
        "-o",
        "--output",
        metavar="OUT.parquet",
        help="write one row per (point, replication): .parquet or .csv, each swept key with KEY_value in base units; "
        "per-class, per-ring and time-series results go next to it as long tables (out.per_class.parquet, out.per_ring.parquet, "
        "out.time_series.parquet; .csv likewise). "
        "Parquet metadata: the resolved scenario, the --set overrides, the variants and each worker's pktsim version. "
        "An interrupted sweep resumes from OUT.partial.jsonl "
        "when the scenario, its overrides and the grid are the same (a hash in the file); otherwise it says so and starts over. "
        "Error rows are run again.",
    )
    w.add_argument("--restart", action="store_true", help="with -o: discard the saved rows of an interrupted sweep and start over")
    w.add_argument(
        "--allow-large",
        action="store_true",
        help="run a grid of more than 100,000 runs, and points of more than 2e9 simulated frames each (refused otherwise, to catch typos)",
    )
    w.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key (repeatable)")
    w.add_argument("--json", action="store_true", help="print a JSON list, one object per point")
    w.add_argument("--plots", metavar="DIR", help="also draw the standard plots into DIR")
    _figure_args(w)
    w.set_defaults(func=_later("cmd_sweep"), output_dirs=("plots",))

    pl = sub.add_parser("plot", help="the standard plots of a sweep table (.parquet or .csv)")
    pl.add_argument("table", metavar="SWEEP", help="a sweep table written by pktsim sweep -o (.parquet or .csv)")
    pl.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the figures (made when the first is written)")
    pl.add_argument("--x", metavar="COLUMN", help="x axis (default: the offered load for a load sweep, else the swept key)")
    _figure_args(pl)
    pl.set_defaults(func=_later("cmd_plot"), output_dirs=("output",))

    k = sub.add_parser("calibrate", help="cycles per packet by group from a perf profile (000 Eq. 3)")
    k.add_argument("profile", metavar="PROFILE", help="perf script output, folded stacks, or perf report --stdio")
    _measurement_args(k, "CPU clock, e.g. 3.3GHz")
    k.add_argument(
        "--frames",
        type=int,
        metavar="N",
        help="instead of --cpu-load: the frames forwarded while the profile was taken; the CPU time is the profile's own "
        "(cpu-clock samples weigh ns; pktsim testbed run --perf-record prints N)",
    )
    k.add_argument("--rules", metavar="RULES.toml", help="group rules (default: the bundled Linux forwarding rules)")
    k.add_argument(
        "--format", default="auto", choices=["auto", "perf-script", "folded", "perf-report"], help="the profile's format (default: told from its text)"
    )
    k.add_argument("--idle-into-other", action="store_true", help="count idle functions as C_other (000 at partial load)")
    k.add_argument("--name", help="profile name (default: the file's stem)")
    k.add_argument("--routes", type=int, default=1, help="routes in the FIB when profiled (default 1)")
    k.add_argument("--flows", type=int, default=1, help="flows in the traffic when profiled (default 1)")
    k.add_argument("-o", "--output", metavar="COST.toml", help="write the cost profile")
    k.add_argument("--flamegraph", metavar="OUT.svg", help="write a flame graph coloured by group")
    k.add_argument("--bars", metavar="OUT.png", help="write a stacked bar chart of cycles per group (.png, .svg or .pdf)")
    k.add_argument("--dpi", type=int, default=200, metavar="N", help="resolution of a PNG bar chart (default 200)")
    k.add_argument("--json", action="store_true", help="print one JSON object: cycles by group, shares, unmatched functions, warnings")
    k.set_defaults(func=_later("cmd_calibrate"))

    g = sub.add_parser("plot-groups", help="stacked bars of cycles per group for cost profiles side by side (000 Figs. 7, 9)")
    g.add_argument("profiles", nargs="+", metavar="PROFILE", help="bundled profile names or cost-profile files")
    g.add_argument("-o", "--output", required=True, metavar="OUT.png", help="the figure (.png, .svg or .pdf)")
    g.add_argument("--title", default="Cycles per packet by group", help="the figure's title")
    g.add_argument("--dpi", type=int, default=200, metavar="N", help="resolution of a PNG (default 200)")
    g.set_defaults(func=_later("cmd_plot_groups"))

    c = sub.add_parser("compare", help="model and simulate two scenarios side by side, with the differences")
    c.add_argument("a", metavar="A.toml", help="the first scenario (the baseline)")
    c.add_argument("b", metavar="B.toml", help="the second scenario (its changes are shown against A)")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a key in both (repeatable)")
    c.add_argument("--json", action="store_true", help="print one JSON object: both results, the rows and the configuration difference")
    c.set_defaults(func=_later("cmd_compare"))

    r = sub.add_parser(
        "reproduce",
        help="reproduce a seed paper's numbers: predicted vs reported, with errors",
        description="Reproduce a seed paper's numbers: each row is reported vs predicted with the error and its kind "
        "(predicted; fitted: a calibration point or fit closure; derived: the paper's own arithmetic or pktsim's inputs; "
        "relation: a claim that holds or not). The output ends with a summary: predicted rows with their median and "
        "worst |error| (fitted and derived rows left out), relations held; rows with |error| > 10% are flagged.",
    )
    r.add_argument("paper", metavar="PAPER", help=", ".join(PAPERS) + ", or all")
    r.add_argument(
        "--json",
        action="store_true",
        help="print JSON: for one paper an object {paper, title, rows, summary, ...}; for all, a list of those "
        "objects (one per paper, each with its own summary; the pooled summary is pktsim.reproduce.summary over all rows)",
    )
    r.add_argument("--report", metavar="DIR", help="write DIR/index.html with tables and figures (with --json, from the same runs)")
    r.set_defaults(func=_later("cmd_reproduce"), output_dirs=("report",))

    add_fit(sub, _later("cmd_fit"), _figure_args)

    add_tune(sub, _later("cmd_tune"))

    tb = sub.add_parser("testbed", help="measure real Linux forwarding in network namespaces and hold the model against it (root)")
    tbs = tb.add_subparsers(dest="testbed_command", metavar="COMMAND")
    tb.set_defaults(func=lambda a: (tb.print_help(), EXIT_USAGE)[1])

    def dials(p):
        p.add_argument("--routes", type=int, default=0, metavar="N", help="N /32 routes in the dut (the generator cycles through them)")
        p.add_argument(
            "--rules", type=int, default=400, metavar="N", help="N non-matching nftables rules in the forward hook (--path share: the input hook; default 400)"
        )
        p.add_argument("--duration", metavar="D", help="per run, 50ms to 60s, e.g. 3s")
        p.add_argument("--json", action="store_true", help="print the result as one JSON object (nothing else on stdout)")
        p.add_argument("-o", "--output", metavar="FILE", help="also write the JSON result to FILE")

    tr = tbs.add_parser("run", help="forward bounded traffic gen -> dut -> sink and measure it")
    tr.add_argument("--rate", metavar="R", help="offered rate, e.g. 100kpps (default: as fast as the generator can)")
    tr.add_argument("--sweep", metavar="LO%:HI%", help="loads as fractions of the measured capacity, e.g. 10%%:120%%")
    tr.add_argument("--points", type=int, default=None, metavar="N", help="loads in a sweep, 2 to 50 (default 8)")
    tr.add_argument("--repetitions", type=int, default=3, metavar="N", help="runs per load, 1 to 20 (default 3)")
    tr.add_argument(
        "--perf-record",
        metavar="FILE",
        help="with --rate: profile the dut CPU over the first run (perf record -e cpu-clock -g) and write perf script's text to FILE (.gz: compressed), "
        "for pktsim calibrate FILE --frames N",
    )
    dials(tr)
    tr.set_defaults(func=_later("cmd_testbed_run"))
    tv = tbs.add_parser("validate", help="measure a path, calibrate its model on a few points, predict the rest, print measured vs predicted")
    tv.add_argument(
        "--path",
        choices=("stack", "defer", "xdp", "afxdp", "share", "observe"),
        default="stack",
        help="stack: the kernel's forwarding (nftables dial); defer: the same with napi_defer_hard_irqs / gro_flush_timeout dialled; "
        "xdp: native XDP redirect between the veths; afxdp: a forwarder between two AF_XDP sockets, batch 1 to 256; "
        "share: a UDP receiver on the receiving CPU, softirq and threaded NAPI, calibrated with it on the other CPU; "
        "observe: pktsim observe inside the dut (stack, deferral, XDP) against the testbed's own counters (default stack)",
    )
    tv.add_argument(
        "--loops", type=int, default=None, metavar="N", help="--path xdp / afxdp: turns of the XDP program's cost loop per frame (default 15000 / 3000)"
    )
    tv.add_argument("--quick", action="store_true", help="a few points, 1 run each, 0.5 s (a smoke test)")
    tv.add_argument("--repetitions", type=int, default=None, metavar="N", help="runs per load, 1 to 20 (default 3; 1 with --quick)")
    tv.add_argument("--plot", metavar="FILE", help="also draw measured vs predicted (PNG or SVG by suffix)")
    tv.add_argument(
        "--scenario-out", metavar="FILE.toml", help="--path stack / defer: also write the calibrated model as a scenario (for pktsim run, sweep, tune)"
    )
    dials(tv)
    tv.set_defaults(func=_later("cmd_testbed_validate"))
    tt = tbs.add_parser(
        "tune-check", help="apply what `pktsim tune -o DIR` recommends to the dut and measure current vs tuned against the predicted improvement"
    )
    tt.add_argument("dir", metavar="DIR", help="the directory `pktsim tune ... -o DIR` wrote (DIR/tune.json)")
    tt.add_argument(
        "--path", choices=("stack", "defer", "afxdp"), default="defer", help="the dut the sets are applied to (default defer: veth, threaded NAPI, nftables)"
    )
    tt.add_argument(
        "--load-share",
        action="store_true",
        help="measure at the share of the dut's measured capacity that the target load is of the model's capacity (default: at the target load itself)",
    )
    tt.add_argument("--rounds", type=int, default=None, metavar="N", help="rounds of current then tuned, 1 to 20 (default 3; 2 with --quick)")
    tt.add_argument("--repetitions", type=int, default=None, metavar="N", help="runs per setting and round, 1 to 20 (default 3; 1 with --quick)")
    tt.add_argument("--quick", action="store_true", help="2 rounds of 1 run of 0.5 s each (a smoke test, about half a minute)")
    tt.add_argument("--plot", metavar="FILE", help="also draw predicted vs measured change per metric (PNG or SVG by suffix)")
    dials(tt)
    tt.set_defaults(func=_later("cmd_testbed_tune_check"))
    tq = tbs.add_parser("probe", help="measure the interference the dut CPU suffers with nothing to forward (tick, the rest), as root")
    tq.add_argument("--duration", metavar="D", help="how long, 100ms to 600s (default 10s)")
    tq.add_argument("--plot", metavar="FILE", help="also draw the gaps (PNG or SVG by suffix)")
    tq.add_argument("--json", action="store_true", help="print the result as one JSON object (nothing else on stdout)")
    tq.add_argument("-o", "--output", metavar="FILE", help="also write the JSON result to FILE")
    tq.set_defaults(func=_later("cmd_testbed_probe"))
    tp = tbs.add_parser("plot", help="draw measured vs predicted from a saved validate result")
    tp.add_argument("result", metavar="RESULT.json", help="the JSON of `pktsim testbed validate --json` (or -o)")
    tp.add_argument("-o", "--output", metavar="FILE", required=True, help="PNG or SVG by suffix")
    tp.set_defaults(func=_later("cmd_testbed_plot"))
    td = tbs.add_parser(
        "teardown",
        help="remove what a killed run left behind (namespaces, processes, temporary directories); refuses while a run is live (exit 1)",
    )
    td.add_argument("--force", action="store_true", help="stop a live run first (SIGTERM: it tears down itself; SIGKILL after 10 s)")
    td.set_defaults(func=_later("cmd_testbed_teardown"))

    ih = sub.add_parser("import-host", help="write a scenario from this machine's (or saved) ethtool, sysctl, lscpu and /proc/interrupts output")
    ih.add_argument(
        "--from",
        dest="from_dir",
        metavar="DIR",
        help="saved outputs: ethtool-i.txt, ethtool-g.txt, ethtool-l.txt, ethtool-c.txt, ethtool.txt, sysctl.txt, lscpu.txt, interrupts.txt "
        "(any may be missing)",
    )
    ih.add_argument("--iface", metavar="NAME", help="the interface (default: the one the saved outputs name, or the first one that is not lo)")
    ih.add_argument("-o", "--output", metavar="HOST.toml", help="write the scenario here (default: print it)")
    ih.set_defaults(func=_later("cmd_import_host"))

    s = sub.add_parser("schema", help="print the JSON Schema of the scenario format")
    s.add_argument("--profile", action="store_true", help="the cost-profile format instead")
    s.add_argument("-o", "--output", metavar="FILE", help="write the schema to FILE (default: print it)")
    s.set_defaults(func=_later("cmd_schema"))

    ti = sub.add_parser("trace-info", help="a pcap or pcapng trace at a glance: packets, duration, rate, sizes, flows")
    ti.add_argument("file", metavar="FILE", help="the trace (pcap or pcapng)")
    ti.add_argument("--json", action="store_true", help="print JSON")
    ti.set_defaults(func=_later("cmd_trace_info"))

    p = sub.add_parser("profiles", help="list the bundled cost profiles, or print one")
    p.add_argument("name", nargs="?", help="a bundled profile to print (default: list them)")
    p.set_defaults(func=_later("cmd_profiles"))
    add_examples(sub, _later("cmd_examples"))
    add_observe(sub, _later("cmd_observe"))
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
    ap = build_parser(only=command_of(sys.argv[1:] if argv is None else argv))
    args = ap.parse_args(argv)
    if not getattr(args, "func", None):
        ap.print_help()
        return EXIT_USAGE
    real_stdout = sys.stdout
    sys.stdout = _GuardedStdout(real_stdout)
    try:
        if any(getattr(args, d, None) for d in OUTPUT_OPTIONS):
            from .commands.common import check_outputs

            check_outputs(args, OUTPUT_OPTIONS)
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
