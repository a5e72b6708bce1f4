"""The ``defer`` path: the veth / threaded-NAPI path with hard-IRQ deferral dialled.

``napi_defer_hard_irqs`` and ``gro_flush_timeout`` (``/sys/class/net/DEV/``) apply to
veth's NAPI: after a poll that took fewer frames than its weight, ``napi_complete_done``
arms the deferral timer and tells veth_poll to leave the ring's notifications masked; the
generator's sends then do not wake the NAPI thread, the timer does (``napi_watchdog``),
``gro_flush_timeout`` later. An empty timer poll uses up one of the
``napi_defer_hard_irqs`` deferrals; a poll with frames restores them.

1. Measure the capacity (overload probe) and, with deferral off, the three loads the
   ``stack`` path calibrates on (the lowest, 45% and 90%).
2. Calibrate the model on those (``validate.calibrate``: t_proc, t_poll, t_wakeup; then
   the wake-up latency from the lowest load's median), exactly as the stack path does.
3. Measure the dial: ``gro_flush_timeout`` 0 (off), 20, 50, 100, 200 us with
   ``napi_defer_hard_irqs`` 2 at 30%, 60% and 90% load.
4. Fit what the deferral timer costs each time a poll arms it (``host.t_timer``: its
   arming and the expiry that follows, the hrtimer's interrupt and ``napi_watchdog``; on a
   KVM guest their exits to the hypervisor) on one dialled point, CPU per frame at 50 us and the lowest dialled load, and predict every other point
   with the simulator's veth deferral (``[nic.napi] defer_hard_irqs``,
   ``gro_flush_timeout``): CPU per frame, frames per poll, polls and wake-ups per frame,
   p50 (p99 as a tail row).
"""

from __future__ import annotations

from ..reproduce.rows import row, summary
from . import runner, validate
from .topology import Topology

NAME = "defer"
TITLE = "Linux forwarding over veth with threaded NAPI and hard-IRQ deferral, measured on this machine"
SOURCE = "testbed"
DEFER_HARD_IRQS = 2
TIMEOUTS_US = (0, 20, 50, 100, 200)
LOADS = (0.3, 0.6, 0.9)
QUICK_TIMEOUTS_US = (0, 50, 200)
QUICK_LOADS = (0.3, 0.7)
CAL_LOADS = (0.1, 0.45, 0.9)
# The dialled point the deferral timer's cost is fitted on: its CPU per frame, at this
# gro_flush_timeout (us) and the lowest dialled load.
TIMER_FIT_US = 50


def measure(topo: Topology, quick: bool, duration_s: float, reps: int, progress=None) -> dict:
    cap = runner.capacity(topo)
    cap_pps = cap["forwarded_pps"]
    timeouts = QUICK_TIMEOUTS_US if quick else TIMEOUTS_US
    loads = QUICK_LOADS if quick else LOADS
    plan = [(f, 0, True) for f in CAL_LOADS] + [(f, t, False) for f in loads for t in timeouts]
    points = []
    for i, (f, t_us, cal) in enumerate(plan):
        if progress:
            progress(i, len(plan), f"{100 * f:.0f}% load: {f * cap_pps / 1e3:.1f} kpps, " + (f"gro_flush_timeout {t_us} us" if t_us else "deferral off"))
        defer = DEFER_HARD_IRQS if t_us else 0
        topo.set_deferral(defer, int(t_us * 1000))
        r = runner.repeat(topo, f * cap_pps, duration_s, reps, run_id=10 * (i + 1))
        r.update(load=f, defer_hard_irqs=defer, gro_flush_timeout_ns=int(t_us * 1000), calibration=cal)
        points.append(r)
    topo.set_deferral(0, 0)
    return {"capacity_pps": cap_pps, "capacity_probe": cap, "points": points}


def _sets(p: dict) -> dict:
    return {"nic.napi.defer_hard_irqs": str(p["defer_hard_irqs"]), "nic.napi.gro_flush_timeout": f"{p['gro_flush_timeout_ns']}ns"}


def compare(sw: dict) -> dict:
    cal_pts = sorted((p for p in sw["points"] if p["calibration"]), key=lambda p: p["load"])
    usable = [p for p in cal_pts if p["packets_per_wakeup"] and p["dut_ns_per_packet"]]
    if len(usable) < 2:
        raise runner.TestbedError("fewer than two deferral-off loads forwarded anything: nothing to calibrate from")
    cal = validate.calibrate_with_probes(usable, sw)
    isets = validate.machine_sets(sw)
    cal["wake_latency_ns"] = validate.fit_wake_latency(cal, usable[0], sets={**isets, **validate.stall_sets(usable[0])})
    timer_pt = timer_point(sw["points"])
    if timer_pt is not None:
        cal["t_timer_ns"] = fit_t_timer(cal, timer_pt, sets={**isets, **validate.stall_sets(timer_pt), **_sets(timer_pt)})
        cal["t_timer_from"] = {"load": timer_pt["load"], "gro_flush_timeout_ns": timer_pt["gro_flush_timeout_ns"]}
    rows, preds = [], []
    for p in sw["points"]:
        m = validate.simulate(cal, p["offered_pps"], cal["wake_latency_ns"], sets={**isets, **validate.stall_sets(p), **_sets(p)})
        pred = validate.prediction(p, m)
        pred.update(defer_hard_irqs=p["defer_hard_irqs"], gro_flush_timeout_ns=p["gro_flush_timeout_ns"], calibration=p["calibration"])
        preds.append(pred)
        dial = f"gro_flush_timeout {p['gro_flush_timeout_ns'] / 1e3:.0f} us" if p["defer_hard_irqs"] else "deferral off"
        tag = f"{dial}, {100 * p['load']:.0f}% load ({p['offered_pps'] / 1e3:.1f} kpps)"
        fit = {"fitted": True} if p["calibration"] or p is timer_pt else {}
        polls = p["packets_per_poll"]
        rows.append(row(f"dut CPU per frame, {tag}", p["dut_ns_per_packet"], m["ns_per_packet"], "ns", SOURCE, **fit))
        if p["calibration"]:
            rows.append(
                row(
                    f"latency p50, {tag}",
                    validate.us(p["latency_ns"]["p50"]),
                    m["latency_ns"]["p50"] / 1e3,
                    "us",
                    SOURCE,
                    **({"fitted": True} if p is usable[0] else {}),
                )
            )
            continue
        rows.append(row(f"frames per poll, {tag}", polls, m["packets_per_poll"]["mean"], "frames", SOURCE))
        rows.append(
            row(
                f"polls per frame, {tag}",
                1 / polls if polls else None,
                1 / m["packets_per_poll"]["mean"] if m["packets_per_poll"]["mean"] else None,
                "",
                SOURCE,
            )
        )
        rows.append(
            row(
                f"wake-ups per frame, {tag}",
                1 / p["packets_per_wakeup"] if p["packets_per_wakeup"] else None,
                1 / m["packets_per_wakeup"] if m["packets_per_wakeup"] else None,
                "",
                SOURCE,
            )
        )
        rows.append(row(f"latency p50, {tag}", validate.us(p["latency_ns"]["p50"]), m["latency_ns"]["p50"] / 1e3, "us", SOURCE))
        rows.extend(validate.tail_rows(p, m, tag, cal["interference"]))
    return {"rows": rows, "summary": summary(rows), "calibration": cal, "predictions": preds}


def timer_point(points: list) -> dict | None:
    """The dialled point the deferral timer's cost is fitted on (:data:`TIMER_FIT_US` at
    the lowest dialled load), if it was measured and forwarded frames."""
    dialled = [p for p in points if not p["calibration"] and p["gro_flush_timeout_ns"] == TIMER_FIT_US * 1000 and p["dut_ns_per_packet"]]
    return min(dialled, key=lambda p: p["load"], default=None)


def fit_t_timer(cal: dict, p: dict, sets: dict) -> float:
    """``host.t_timer`` (ns, at least 0) at which the simulated CPU per frame at the dialled
    point ``p`` is the measured one. Each timer poll pays it once, so the CPU grows about
    linearly with it: a secant from 0 and 20 us, three steps."""
    target = p["dut_ns_per_packet"]

    def cpu(t_ns: float) -> float:
        return validate.simulate({**cal, "t_timer_ns": t_ns}, p["offered_pps"], cal["wake_latency_ns"], sets=sets)["ns_per_packet"] or 0.0

    a, fa, b, fb = 0.0, cpu(0.0), 20_000.0, cpu(20_000.0)
    for _ in range(3):
        if fb == fa:
            break
        x = max(0.0, b + (target - fb) * (b - a) / (fb - fa))
        a, fa, b, fb = b, fb, x, cpu(x)
    return b


def describe(res: dict) -> str:
    c = res["calibration"]
    return (
        f"calibrated with deferral off at {', '.join(f'{100 * x:.0f}%' for x in c['from_loads'])} load: t_proc {c['t_proc_ns']:.0f} ns, "
        f"t_poll {c['t_poll_ns']:.0f} ns, t_wakeup {c['t_wakeup_ns']:.0f} ns, wake latency {c['wake_latency_ns'] / 1e3:.1f} us; "
        + (
            f"the deferral timer {c['t_timer_ns'] / 1e3:.1f} us each time it is armed, fitted on the CPU at "
            f"{c['t_timer_from']['gro_flush_timeout_ns'] / 1e3:.0f} us and {100 * c['t_timer_from']['load']:.0f}% load; "
            if "t_timer_ns" in c
            else ""
        )
        + f"the rest of the deferral dial (napi_defer_hard_irqs {DEFER_HARD_IRQS}) is predicted"
    )
