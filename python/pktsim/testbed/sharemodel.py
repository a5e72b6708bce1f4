"""The model half of the ``share`` path (:mod:`.share` measures): the calibration from
the runs with the stack and the reader each alone on the dut CPU, the calibrated scenario's
keys, the simulator's figures for the shared CPU, and the rows that hold them against the
measurements."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import sim
from ..fitting import linear
from ..reproduce.rows import row, summary
from ..scenario import Scenario
from . import runner, validate
from .errors import TestbedError

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "veth-udp-receiver.toml"
SOURCE = "testbed"
BATCH = 64
# Calibration runs whose reader missed more than this are left out.
CAL_LOSS = 0.02
# Livelock onset: the offered rate at which the reader first misses this share.
ONSET_LOSS = 0.05


def busy_interrupt_ns(q: dict, baseline: float, receive: str) -> list[float]:
    """What an interrupt costs beyond what eBPF brackets when it finds the dut CPU running,
    in each run of ``q`` (the stack alone there, and ``pktsim-tb spin`` keeping it busy):
    what the spinner lost beyond its baseline, less the stack's own time (NET_RX softirqs
    and the IPI handlers; the NAPI thread's time on the CPU), over the interrupts (the RPS
    IPIs; the thread's wake-ups)."""
    out = []
    for r in q["runs"]:
        sp, c = r.get("spin"), r["counts"]
        if not sp:
            continue
        taken = sp["taken_ns"] - baseline * sp["window_ns"]
        if receive == "threaded":
            tasks = (c.get("oncpu") or {}).get("tasks") or []
            own, n = (tasks[1]["ns"] if len(tasks) > 1 else 0), c["napi_wakeups"]
        else:
            own, n = c["net_rx"].get("ns", 0) + (c["ipi"] or {}).get("ns", 0), (c["ipi"] or {}).get("count", 0)
        if n:
            out.append(max(0.0, taken - own) / n)
    return out


def _fit(points: list[dict], y_key: str, regressors: dict) -> dict:
    """Least squares of ``y_key`` on ``regressors`` ({name: point -> value}) with every cost
    non-negative and the first (the per-frame cost) kept (:func:`pktsim.fitting.linear.costs`).
    Noisy quick runs once gave the plain fit a per-frame cost of -815 ns beside a large
    per-poll one."""
    names = list(regressors)
    A = np.array([[regressors[n](p) for n in names] for p in points], dtype=float)
    return linear.costs(A, [p[y_key] for p in points], names, kept=names[:1])


def calibrate(v: dict, sw: dict) -> dict:
    """The model's costs and sizes for one variant, from its calibration runs only: the
    stack's from the runs with the reader on the load CPU, the reader's from the runs with
    the stack there; a wake-up of the reader on its own CPU is the wake probe's switch."""
    inv = lambda k: lambda p: 1.0 / p[k] if p.get(k) else 0.0  # noqa: E731
    # The stack's time per frame on the dut CPU: its NET_RX softirqs (eBPF), or its NAPI
    # thread's time there (sched_switch).
    y = "stack_ns_per_packet"
    stack_pts = [p for p in v["stack_calibration"] if p.get(y) and p["loss_ratio"] <= CAL_LOSS]
    reader_pts = [p for p in v["reader_calibration"] if p["reader_ns_per_packet"] and p["loss_ratio"] <= CAL_LOSS]
    if len(stack_pts) < 2 or len(reader_pts) < 2:
        runs = lambda key: ", ".join(f"{q['offered_pps'] / 1e3:.1f} kpps: {100 * q['loss_ratio']:.1f}% missed" for q in v[key]) or "none"  # noqa: E731
        raise TestbedError(
            f"{v['receive']}: fewer than two calibration runs of the stack or the reader missed at most {100 * CAL_LOSS:.0f}% of their frames"
            f" (the stack's: {runs('stack_calibration')}; the reader's: {runs('reader_calibration')}): nothing to calibrate from;"
            " other work on the machine's two CPUs takes frames from the runs: run again on a quieter machine"
        )
    stack = {"t_proc_ns": lambda p: 1.0, "t_poll_ns": inv("packets_per_poll")}
    if v["receive"] == "threaded":
        stack["t_wakeup_ns"] = inv("packets_per_wakeup")
    if len(stack_pts) < len(stack):  # two loads fix two costs
        stack.pop("t_wakeup_ns" if "t_wakeup_ns" in stack else "t_poll_ns")
    # The reader on a timer: its wake-ups (a timer's, out of an idle CPU) are not the
    # shared CPU's (the stack wakes it on a busy one), so only its costs per frame and
    # per call carry over.
    reader = {"t_packet_ns": lambda p: 1.0, "t_call_ns": inv("reader_packets_per_call"), "t_timer_wakeup_ns": inv("reader_packets_per_wakeup")}
    if len(reader_pts) < len(reader):  # two runs fix two costs: a call's goes with a wake-up's
        reader.pop("t_call_ns")
    cal = dict.fromkeys(("t_poll_ns", "t_wakeup_ns", "t_call_ns", "t_timer_wakeup_ns", "t_irq_ns"), 0.0)
    cal.update({**_fit(stack_pts, y, stack), **_fit(reader_pts, "reader_ns_per_packet", reader)})
    wake = sw.get("wake") or {}
    cal["t_app_wakeup_ns"] = float(wake.get("switch_ns") or 740.0)
    # A wake-up across CPUs with the dut CPU busy (the wake probe's awake pass, its short
    # gaps), less the switch: what an interrupt from the load CPU (the RPS IPI, the NAPI
    # thread's wake-up) takes to reach the dut CPU.
    awake = [g["wake_latency_awake_ns"] for g in wake.get("gaps") or [] if g.get("gap_ns", 0) <= 100_000 and g.get("wake_latency_awake_ns")]
    cal["irq_delay_ns"] = max(0.0, float(np.median(awake)) - cal["t_app_wakeup_ns"]) if awake else 0.0
    # What an interrupt that finds the CPU running costs beyond that (a vCPU's exit).
    busy = [x for q in v.get("busy_calibration") or [] for x in busy_interrupt_ns(q, v.get("spin_baseline", 0.0), v["receive"])]
    cal["t_irq_busy_ns"] = float(np.mean(busy)) if busy else 0.0
    # The RPS IPI's mean time: its handler, as eBPF brackets it (call_function_single).
    ipis = [r["counts"]["ipi"] for p in stack_pts for r in p["runs"] if (r["counts"].get("ipi") or {}).get("count")]
    ns, count = sum(i["ns"] for i in ipis), sum(i["count"] for i in ipis)
    cal["t_irq_ns"] = ns / count if v["receive"] == "softirq" and count else 0.0
    held = v.get("held") or {}
    # The probes sent before the snapshot of its memory (frames drained after it came later).
    held_frames = held.get("frames_sent_before") or held.get("frames")
    cal["truesize_bytes"] = held["rmem_alloc_bytes"] / held_frames if held_frames else None
    cal["rcvbuf_bytes"] = held.get("rcvbuf_bytes") or reader_pts[0]["reader"].get("rcvbuf_bytes")
    cal["stack_from_pps"] = [p["offered_pps"] for p in stack_pts]
    cal["reader_from_pps"] = [p["offered_pps"] for p in reader_pts]
    cal["sysctls"] = sw["sysctls"]
    cal["irq_time_accounting"] = sw.get("irq_time_accounting")
    cal["base_slice_ns"] = sw.get("base_slice_ns")
    cal["hz"] = sw.get("hz")
    return cal


def sets(cal: dict, receive: str) -> dict:
    """The calibrated scenario's ``--set`` keys for a variant."""
    sc = cal["sysctls"]
    out = {
        "host.t_proc": f"{cal['t_proc_ns']:.1f}ns",
        "host.t_poll": f"{cal['t_poll_ns']:.1f}ns",
        "host.t_irq": f"{cal['t_irq_ns']:.1f}ns",
        "host.t_irq_busy": f"{cal.get('t_irq_busy_ns', 0.0):.1f}ns",
        "host.netdev_budget": sc.get("netdev_budget", 300),
        "host.netdev_budget_usecs": f"{sc.get('netdev_budget_usecs', 2000)}us",
        "app.t_packet": f"{cal['t_packet_ns']:.1f}ns",
        "app.t_call": f"{cal['t_call_ns']:.1f}ns",
        "app.t_wakeup": f"{cal['t_app_wakeup_ns']:.1f}ns",
        "app.batch": BATCH,
    }
    if cal.get("base_slice_ns"):
        out["cpu.sched.base_slice"] = f"{cal['base_slice_ns']}ns"
    if cal.get("hz"):
        out["host.hz"] = int(cal["hz"])
    if cal.get("irq_time_accounting") is not None:
        out["cpu.sched.irq_time_accounting"] = bool(cal["irq_time_accounting"])
    if cal.get("rcvbuf_bytes"):
        out["socket.rcvbuf"] = f"{int(cal['rcvbuf_bytes'])}B"
    if cal.get("truesize_bytes"):
        out["socket.truesize"] = f"{cal['truesize_bytes']:.0f}B"
    if receive == "threaded":
        # veth's NAPI in its thread: the generator's send schedules it (no interrupt), its
        # ring is VETH_RING_SIZE, its weight NAPI_POLL_WEIGHT; SCHED_OTHER, nice 0.
        out.update(
            {
                "nic.napi.threaded": True,
                "host.thread.policy": "other",
                "host.thread.t_wakeup": f"{cal.get('t_wakeup_ns', 0.0):.1f}ns",
                "host.thread.wake_latency": f"{cal.get('irq_delay_ns', 0.0):.1f}ns",
                "host.t_irq": "0ns",
                "nic.rx_ring": 256,
                "host.weight": 64,
            }
        )
    else:
        out.update(
            {
                "nic.rx_ring": sc.get("netdev_max_backlog", 1000),
                "host.weight": sc.get("dev_weight", 64),
                "nic.irq_delay": f"{cal.get('irq_delay_ns', 0.0):.1f}ns",
            }
        )
    return out


def simulate(cal: dict, receive: str, rate_pps: float, extra: dict | None = None, duration_s: float = 1.0) -> dict:
    """The simulator's figures for the shared CPU at ``rate_pps``, as the testbed reports them."""
    keys = {**sets(cal, receive), "traffic.rate": f"{rate_pps:.3f}pps", "measure.duration": f"{duration_s:g}s", **(extra or {})}
    r = sim.run(Scenario.load(SCENARIO).with_sets(keys))
    window_s = duration_s
    ctx = r["cpu_by_context"]
    return {
        "offered_pps": r["offered_pps"],
        "read_pps": r["consumed_packets"] / window_s,
        "rcvbuf_errors_pps": r["drops"]["rcvbuf_errors"] / window_s,
        "backlog_drops_pps": r["drops"]["rx_ring_full"] / window_s,
        "loss_ratio": r["loss_ratio"],
        "latency_ns": {q: r["latency_ns"][q] for q in runner.PERCENTILES},
        "cpu": {k: ctx.get(k, 0.0) for k in ("softirq", "ksoftirqd", "napi_threads", "app", "hardirq")} | {"busy": r["cpu_utilization"]},
    }


def onset(points: list[tuple[float, float]]) -> float | None:
    """The offered rate at which the reader first misses :data:`ONSET_LOSS` of it, linearly
    between the last point that missed less and the first that missed more ((offered,
    read) pairs; None if none missed that much)."""
    pts = sorted(points)
    prev = None
    for off, read in pts:
        miss = 1 - read / off if off else 0.0
        if miss > ONSET_LOSS:
            if prev is None:
                return off
            (o0, m0) = prev
            return o0 + (off - o0) * (ONSET_LOSS - m0) / (miss - m0) if miss > m0 else off
        prev = (off, miss)
    return None


def compare(sw: dict) -> dict:
    rows, preds, cals = [], {}, {}
    for name, v in sw["variants"].items():
        receive = v["receive"]
        cal = calibrate(v, sw)
        cals[name] = cal
        label = f"{name}"
        for p in v["stack_calibration"]:
            if not p.get("stack_ns_per_packet"):
                continue
            tag = f"{label}, the stack alone on the dut CPU, {p['offered_pps'] / 1e3:.1f} kpps"
            fit = {"fitted": True} if p["offered_pps"] in cal["stack_from_pps"] else {}
            want = cal["t_proc_ns"]
            for k, per in (("t_poll_ns", "packets_per_poll"), ("t_wakeup_ns", "packets_per_wakeup")):
                if p.get(per) and (k == "t_poll_ns" or receive == "threaded"):
                    want += cal[k] / p[per]
            rows.append(row(f"dut CPU per frame (stack), {tag}", p["stack_ns_per_packet"], want, "ns", SOURCE, **fit))
        for p in v["reader_calibration"]:
            if not p.get("reader_ns_per_packet"):
                continue
            tag = f"{label}, the reader alone on the dut CPU, {p['offered_pps'] / 1e3:.1f} kpps, {p['reader_packets_per_call']:.1f} frames a call"
            fit = {"fitted": True} if p["offered_pps"] in cal["reader_from_pps"] else {}
            want = cal["t_packet_ns"] + cal["t_call_ns"] / p["reader_packets_per_call"] + cal["t_timer_wakeup_ns"] / p["reader_packets_per_wakeup"]
            rows.append(row(f"reader CPU per frame, {tag}", p["reader_ns_per_packet"], want, "ns", SOURCE, **fit))
        out = []
        ref = min(v["shared"], key=lambda p: abs(p["load"] - 1.0))
        stalls = validate.stall_sets(ref)
        for p in v["shared"]:
            m = simulate(cal, receive, p["offered_pps"], validate.stall_sets(p))
            m["load"] = p["load"]
            out.append(m)
            tag = f"{label}, {100 * p['load']:.0f}% ({p['offered_pps'] / 1e3:.1f} kpps)"
            rows.append(row(f"read by the reader, {tag}", p["read_pps"] / 1e3, m["read_pps"] / 1e3, "kpps", SOURCE))
            rows.append(row(f"socket overflows (RcvbufErrors), {tag}", p["rcvbuf_errors_pps"] / 1e3, m["rcvbuf_errors_pps"] / 1e3, "kpps", SOURCE))
            for k, what in (("softirq", "softirq"), ("ksoftirqd", "ksoftirqd"), ("napi_threads", "NAPI thread"), ("app", "reader")):
                if p["cpu"][k] > 0.005 or m["cpu"][k] > 0.005:
                    rows.append(row(f"dut CPU in {what}, {tag}", 100 * p["cpu"][k], 100 * m["cpu"][k], "%", SOURCE))
            rows.append(row(f"latency p50 to the read, {tag}", validate.us(p["latency_ns"]["p50"]), m["latency_ns"]["p50"] / 1e3, "us", SOURCE))
        # The model's onset on a fine grid around the measured one.
        grid = np.linspace(0.5, 1.6, 23) * v["grid_pps"]
        fine = [(r, simulate(cal, receive, r, stalls)["read_pps"]) for r in grid]
        got = onset([(p["offered_pps"], p["read_pps"]) for p in v["shared"]])
        want = onset(fine)
        rows.append(row(f"livelock onset ({100 * ONSET_LOSS:.0f}% unread), {label}", got / 1e3 if got else None, want / 1e3 if want else None, "kpps", SOURCE))
        peak = max(v["shared"], key=lambda p: p["read_pps"])
        rows.append(row(f"most read, {label}", peak["read_pps"] / 1e3, max(r for _, r in fine) / 1e3, "kpps", SOURCE))
        preds[name] = {"points": out, "fine": [{"offered_pps": r, "read_pps": x} for r, x in fine], "onset_pps": want, "measured_onset_pps": got}
    return {"rows": rows, "summary": summary(rows), "calibration": cals, "predictions": preds}


def describe(res: dict) -> str:
    parts = []
    for name, c in res["calibration"].items():
        parts.append(
            f"{name}: stack t_proc {c['t_proc_ns']:.0f} ns, t_poll {c['t_poll_ns']:.0f} ns"
            + (f", t_wakeup {c['t_wakeup_ns']:.0f} ns" if name == "threaded" else f", IPI {c['t_irq_ns']:.0f} ns")
            + f", an interrupt on a busy CPU {c.get('t_irq_busy_ns', 0.0) / 1e3:.1f} us more, {c.get('irq_delay_ns', 0.0) / 1e3:.1f} us to arrive"
            + f"; reader t_packet {c['t_packet_ns']:.0f} ns, t_call {c['t_call_ns']:.0f} ns, its wake-up (the probe's switch) {c['t_app_wakeup_ns']:.0f} ns"
        )
    return "calibrated with the stack and the reader each alone on the dut CPU: " + "; ".join(parts)
