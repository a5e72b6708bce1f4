"""``pktsim observe``: a host's operating point, read-only, with where each figure came from."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UsageError
from ..textio import fit_lines, json_text, si, table
from .common import _quantity, _write_file


def _up_interfaces() -> list[str]:
    out = []
    for p in sorted(Path("/sys/class/net").iterdir()):
        try:
            up = (p / "operstate").read_text().strip() in ("up", "unknown")
        except OSError:
            up = False
        if p.name != "lo" and up:
            out.append(p.name)
    return out


def cmd_observe(args) -> int:
    from ..observe import ObserveError, observe

    duration = _quantity("duration", "--duration", args.duration) / 1e12
    interval = _quantity("duration", "--interval", args.interval) / 1e12 if args.interval else None
    ifaces = args.iface or _up_interfaces()

    def say(message: str) -> None:
        print(f"pktsim observe: {message}", file=sys.stderr, flush=True)

    model = None
    if args.model:
        from ..scenario import Scenario

        model = Scenario.load(args.model)  # checked before the window
    try:
        # (The window opens once the knobs are read and perf counts: a script that drives
        # the host's load can wait for this line.)
        opened = lambda: say(f"watching {', '.join(ifaces)} for {duration:g} s")  # noqa: E731
        op = observe(ifaces, duration, interval, progress=say if interval else None, opened=opened)
    except ObserveError as e:
        raise UsageError(str(e)) from None
    if model is not None:
        from ..observe import compare
        from ..reproduce.rows import summary

        op["model"] = {"scenario": args.model, **compare(op, model)}
        op["model"]["summary"] = summary(op["model"]["rows"])
    if args.output:
        _write_file("-o", args.output, json_text(op) + "\n")
    if args.json:
        print(json_text(op))
        return 0
    print(f"pktsim observe: {', '.join(ifaces)} over {op['window_s']:.2f} s (read-only)")
    src = op["sources"]
    rows = []

    def add(name, value, text):
        if value is not None:
            rows.append([name, text, src.get(name, "")])

    add("offered_pps", op["offered_pps"], si(op["offered_pps"], "pps"))
    add("received_pps", op["received_pps"], si(op["received_pps"], "pps"))
    add("transmitted_pps", op["transmitted_pps"], si(op["transmitted_pps"], "pps"))
    add("loss_ratio", op["loss_ratio"], f"{100 * op['loss_ratio']:.3f}%")
    for k, v in op["drops"].items():
        rows.append([f"drops.{k}", f"{v:,.1f} /s", src.get(f"drops.{k}", "")])
    add("irq_per_s", op.get("irq_per_s"), f"{op.get('irq_per_s') or 0:,.0f} /s")
    add("irqs_per_packet", op.get("irqs_per_packet"), f"{op.get('irqs_per_packet') or 0:.3f}")
    add("softirqs_per_s", op.get("softirqs_per_s"), f"{op.get('softirqs_per_s') or 0:,.0f} /s")
    add("softirqs_per_packet", op.get("softirqs_per_packet"), f"{op.get('softirqs_per_packet') or 0:.3f}")
    add("time_squeeze", op.get("time_squeeze"), f"{op.get('time_squeeze') or 0:,} in the window")
    add("softirq_ns_per_packet", op.get("softirq_ns_per_packet"), f"{(op.get('softirq_ns_per_packet') or 0) / 1e3:.2f} us")
    add("polls_per_s", op.get("polls_per_s"), f"{op.get('polls_per_s') or 0:,.0f} /s, {(op.get('packets_per_poll') or {}).get('mean') or 0:.2f} frames a poll")
    add("wakeups_per_packet", op.get("wakeups_per_packet"), f"{op.get('wakeups_per_packet') or 0:.3f} ({op.get('wakeups_per_s') or 0:,.0f} /s)")
    add(
        "napi_thread_ns_per_packet",
        op.get("napi_thread_ns_per_packet"),
        f"{(op.get('napi_thread_ns_per_packet') or 0) / 1e3:.2f} us ({100 * (op.get('napi_thread_cpu') or 0):.1f}% of a CPU)",
    )
    add("cpu_ns_per_packet", op.get("cpu_ns_per_packet"), f"{(op.get('cpu_ns_per_packet') or 0) / 1e3:.2f} us")
    for i, entry in op["interfaces"].items():
        lost = {k: v for k, v in (entry.get("lost_per_s") or {}).items() if v}
        if lost:
            rows.append([f"{i} lost (ethtool -S)", ", ".join(f"{k} {v:,.1f}/s" for k, v in sorted(lost.items())), "the driver's counters of lost frames"])
    if "cpu_by_context" in op:
        ctx = op["cpu_by_context"]
        rows.append(["cpu_by_context", ", ".join(f"{k} {100 * v:.1f}%" for k, v in ctx.items()), src.get("cpu_by_context", "")])
        rows.append(["cpu_per_core", ", ".join(f"{100 * v:.0f}%" for v in op["cpu_per_core"]), "/proc/stat: busy share of each CPU"])
    print(table(rows, ["figure", "value", "from"], "lrl"))
    for i, knobs in (op.get("knobs") or {}).items():
        if knobs:
            print(fit_lines(f"knobs of {i}: " + ", ".join(f"{k}={v['value']}" for k, v in knobs.items())))
    ov = op["overhead"]
    print(
        fit_lines(
            f"overhead: {ov['cpu_s'] * 1e3:.1f} ms of CPU ({100 * ov['share_of_one_cpu']:.2f}% of one CPU over the window): "
            f"{ov['setup_cpu_s'] * 1e3:.0f} ms once (the knobs, the first snapshot), {100 * ov['watching_share_of_one_cpu']:.2f}% of one CPU while watching"
        )
    )
    for m in op["missing"]:
        print(fit_lines(f"missing: {m}"))
    if model is not None and not op["model"]["rows"]:
        print(f"\nno traffic in the window: {args.model} is not run")
    elif model is not None:
        from .common import _print_rows

        print()
        print(f"observed vs pktsim ({args.model} at the observed {si(op['offered_pps'], 'pps')}):")
        if op["model"]["knobs"]:
            print(fit_lines("with the observed knobs: " + ", ".join(op["model"]["knobs"])))
        for k in op["model"]["knobs_left_out"]:
            print(fit_lines(f"knob not applied: {k}"))
        _print_rows(op["model"], "observed vs pktsim")
    if args.output:
        print(f"wrote {args.output}")
    return 0
