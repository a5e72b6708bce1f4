"""``pktsim testbed``: run, validate, probe, plot, tune-check and teardown on the namespaces
testbed (root), and how their results are printed."""

from __future__ import annotations

import json
import sys

from ..errors import UsageError
from ..testbed.errors import TestbedError
from ..textio import atomic_write, json_text, table
from .common import _print_rows, _quantity, _write_file


def _tb_duration(args) -> float | None:
    """--duration in seconds (None when not given)."""
    return _quantity("duration", "--duration", args.duration) / 1e12 if args.duration else None


def cmd_testbed_run(args) -> int:
    from ..testbed import runner
    from ..testbed.topology import Topology

    duration = _tb_duration(args)
    if duration is None:
        duration = 3.0
    if args.rate and args.sweep:
        raise UsageError("testbed run: give --rate or --sweep, not both")
    if args.points is not None and not args.sweep:
        raise UsageError(f"--points {args.points}: the number of loads of a --sweep; give --sweep too, or leave --points out")
    if args.points is None:
        args.points = 8
    if args.perf_record and not args.rate:
        raise UsageError(f"--perf-record {args.perf_record}: profiles a run at one rate; give --rate too (not --sweep)")
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
            res = runner.repeat(topo, rate, duration, args.repetitions, perf_record=args.perf_record)
    res["setup"] = {"routes": args.routes, "rules": args.rules, "duration_s": duration, "repetitions": args.repetitions}
    if _emit_tb(args, res):
        return 0
    points = res["points"] if args.sweep else [res]
    if args.sweep:
        print(f"pktsim testbed: dut capacity {res['capacity_pps'] / 1e3:.1f} kpps ({args.rules} nftables rules, {args.routes} routes)")
    print(_format_tb(points))
    if args.perf_record:
        pr = res["perf_record"]
        freq = f"{pr['cpu_hz'] / 1e9:.3f}GHz" if pr.get("cpu_hz") else "F"
        print(
            f"wrote {pr['file']}: {pr['samples']:,} samples of the dut CPU every {pr['period_ns'] / 1e3:g} us of its time, "
            f"{pr['forwarded']:,} frames forwarded meanwhile: pktsim calibrate {pr['file']} --rate {rate / 1e3:g}kpps --frames {pr['forwarded']} --freq {freq}"
        )
    return 0


def _emit_tb(args, res: dict, plot: str | None = None) -> bool:
    """A testbed result to -o, to --plot (with the named function of pktsim.testbed.plots)
    and, with --json, to stdout; True when the JSON was printed (nothing else is)."""
    if args.output:
        atomic_write(args.output, json_text(res) + "\n")
    if plot and args.plot:
        from ..testbed import plots

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
    from ..testbed import paths
    from ..testbed.validate import plan

    duration = _tb_duration(args)
    try:
        plan(args.quick, duration, args.repetitions)
        paths.topology(args.path, args.rules, args.routes, args.loops)  # checks the dials; builds nothing
    except TestbedError as e:
        raise UsageError(str(e)) from None
    if args.loops is not None and args.path not in paths.LOOPED:
        raise UsageError(f"--loops {args.loops}: only --path xdp and --path afxdp have an XDP program's cost loop")
    if args.plot and args.path == "observe":
        raise UsageError(f"--plot {args.plot}: --path observe compares readings, it has no model curve to draw")
    if args.scenario_out and args.path not in ("stack", "defer"):
        raise UsageError(f"--scenario-out {args.scenario_out}: only --path stack and --path defer calibrate a scenario (the veth threaded-NAPI model)")
    res = paths.run(args.path, args.rules, args.routes, args.loops, args.quick, duration, args.repetitions, progress=None if args.json else _tb_progress)
    if args.scenario_out:
        from ..testbed.validate import scenario_file_text

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
    if args.path == "observe":
        print("  a row holds when observe's reading is within its tolerance of the testbed's count (rates 1%, per frame 5%, CPU 10%).")
    elif res["calibration"].get("interference"):
        print("  'fitted' rows were used for the calibration; p99 and p99.9 are predicted with the interference the probe measured on the dut CPU.")
    else:
        print("  'fitted' rows were used for the calibration; 'tail' rows (p99) include scheduler-tick and timer delays the model leaves out.")
    return 0


def cmd_testbed_probe(args) -> int:
    from ..testbed import tails

    duration = _tb_duration(args)
    if duration is None:
        duration = 10.0
    try:
        tails.check_duration(duration)
    except TestbedError as e:
        raise UsageError(str(e)) from None
    res = tails.probe(duration, wake=True)
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
    if res.get("wake"):
        from ..testbed import wake

        print("\n".join(wake.describe(res["wake"])))
    return 0


def cmd_testbed_plot(args) -> int:
    from ..testbed.plots import testbed_validation
    from ..textio import InputFileError, read_input_text

    try:
        res = json.loads(read_input_text(args.result, "validate result"))
        # (The share path's measurements are by variant.)
        res["measurements"]["variants" if res.get("path") == "share" else "points"], res["predictions"], res["calibration"]
    except InputFileError as e:
        raise UsageError(str(e)) from None
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"{args.result}: expected the JSON of `pktsim testbed validate --json` (or -o)") from None
    testbed_validation(res, args.output)
    print(f"wrote {args.output}")
    return 0


def cmd_testbed_tune_check(args) -> int:
    from ..testbed import tunecheck

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
    from ..testbed.leftovers import LockBusy, teardown_all
    from ..testbed.topology import require_root

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
