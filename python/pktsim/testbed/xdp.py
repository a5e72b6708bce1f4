"""The ``xdp`` path: native XDP forwarding between the dut's two veths.

An XDP program (``pktsim-tb xdp``, assembled in Rust and attached through a BPF link) on
the dut's ingress veth redirects every frame through a devmap to the egress veth: veth's
NAPI thread converts each queued skb to an xdp_buff, runs the program, bulk-queues the
frame and, at the end of the poll, ``xdp_do_flush`` hands the bulk to the egress veth,
which puts it in the sink veth's ring (the sink's veth carries XDP_PASS so that it has a
NAPI to receive into; its thread runs on the load CPU). No skb is built on the dut, no
netfilter hook runs: the program's cost dial is an empty loop of ``--loops`` turns.

1. Measure the capacity (overload probe) and a sweep of loads, as the stack path does.
2. Calibrate on three loads below saturation (the lowest and those nearest 45% and 90%;
   ``validate.calibrate``): the NAPI thread's CPU per frame is ``t_frame + t_poll x polls
   per frame + t_wakeup x wake-ups per frame``. Then, at the lowest load, the wake-up
   latency from the frames per wake-up (a thread that takes longer to run finds more
   frames) and the egress delay from the latency median: a frame leaves the dut into the
   sink veth's ring and is time-stamped only when the sink's NAPI thread, on the other
   CPU, has woken and taken it (the model's dut ends at the ring; the delay is added to
   every predicted percentile). The poll's cost is its own: each poll ends in ``xdp_do_flush``, whose
   ``veth_xdp_xmit`` wakes the sink veth's NAPI thread on the other CPU, and veth polls
   more often than it wakes (it polls again for frames that came during a poll's end), so
   two loads, which can fix only a per-frame and a per-wake-up cost, leave CPU per frame
   off by 20-30% at mid load (measured; see VALIDATION.md). With fewer than three loads
   below saturation, two are used and t_poll is 0.
3. Predict every other load and the saturation rate with the simulator's native XDP
   (``host.io = "xdp"``, redirect, threaded NAPI, ring 256).
"""

from __future__ import annotations

from pathlib import Path

from ..reproduce.rows import row, summary
from . import runner, validate
from .topology import Topology

NAME = "xdp"
TITLE = "Native XDP redirect between veths with threaded NAPI, measured on this machine"
SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "veth-xdp-redirect.toml"
SOURCE = "testbed"
# The XDP program's cost dial: turns of its empty loop per frame. With none the dut
# forwards faster than the generator (sharing its CPU with the sink) can offer.
DEFAULT_LOOPS = 15000
FIT = ("t_proc_ns", "t_wakeup_ns")  # with only two loads below saturation
KW = {"path": SCENARIO, "per_frame_key": "host.xdp.t_driver"}


# A quick sweep's loads stay below saturation (10% to 90% of the capacity: 10, 30, 50, 70,
# 90%): with one short run each, a stall of the machine (a hypervisor running another guest
# for tens of milliseconds) overflows the 256-frame ring even at low load, and two such
# losses among three loads below saturation left nothing to calibrate from. The saturation
# row comes from the overload probe either way.
QUICK_SPAN = (0.1, 0.9)


def measure(topo: Topology, quick: bool, duration_s: float, reps: int, progress=None) -> dict:
    lo, hi = QUICK_SPAN if quick else (0.1, 1.2)
    points = validate.QUICK_LOADS if quick else 10
    return runner.sweep(topo, lo, hi, points, duration_s, reps, progress=progress)


def compare(sw: dict) -> dict:
    pts = sorted(sw["points"], key=lambda p: p["load"])
    usable = [p for p in pts if p["packets_per_wakeup"] and p["dut_ns_per_packet"] and p["loss_ratio"] < 0.02]
    if len(usable) < 2:
        raise runner.TestbedError("fewer than two loads below saturation forwarded anything: nothing to calibrate from")
    cal_points = validate.calibration_points(usable)
    # The whole wake-up at the wake-up: split as on the stack path (the switch in at the
    # wake-up, the rest on the thread's way to sleep) it put this path's CPU per frame 26-44%
    # and its frames per wake-up 29-40% high at 22-47% load (VALIDATION.md, xdp).
    cal = validate.calibrate_with_probes(cal_points, sw, names=None if len(cal_points) > 2 else FIT, split=False)
    lo = cal_points[0]
    kw = {**KW, "sets": validate.machine_sets(sw)}
    at = lambda p: {**kw, "sets": {**kw["sets"], **validate.stall_sets(p)}}  # noqa: E731
    cal["wake_latency_ns"] = validate.fit_wake_latency_from_batching(cal, lo, **at(lo))
    cal["egress_delay_ns"] = lo["latency_ns"]["p50"] - validate.simulate(cal, lo["offered_pps"], cal["wake_latency_ns"], **at(lo))["latency_ns"]["p50"]
    rows, preds = [], []
    for p in pts:
        m = validate.shift_latency(validate.simulate(cal, p["offered_pps"], cal["wake_latency_ns"], **at(p)), cal["egress_delay_ns"])
        preds.append(validate.prediction(p, m))
        tag = f"{100 * p['load']:.0f}% load ({p['offered_pps'] / 1e3:.1f} kpps)"
        fit = {"fitted": True} if any(p is c for c in cal_points) else {}
        rows.append(row(f"dut CPU per frame, {tag}", p["dut_ns_per_packet"], m["ns_per_packet"], "ns", SOURCE, **fit))
        rows.append(
            row(f"frames per wake-up, {tag}", p["packets_per_wakeup"], m["packets_per_wakeup"], "frames", SOURCE, **({"fitted": True} if p is lo else {}))
        )
        rows.append(row(f"frames per poll, {tag}", p["packets_per_poll"], m["packets_per_poll"]["mean"], "frames", SOURCE))
        rows.append(row(f"forwarded, {tag}", p["forwarded_pps"] / 1e3, m["throughput_pps"] / 1e3, "kpps", SOURCE))
        rows.append(row(f"loss, {tag}", 100 * p["loss_ratio"], 100 * m["loss_ratio"], "%", SOURCE))
        rows.append(
            row(f"latency p50, {tag}", validate.us(p["latency_ns"]["p50"]), m["latency_ns"]["p50"] / 1e3, "us", SOURCE, **({"fitted": True} if p is lo else {}))
        )
        rows.extend(validate.tail_rows(p, m, tag, cal["interference"]))
    probe = sw["capacity_probe"]
    sat = validate.shift_latency(validate.simulate(cal, probe["offered_pps"], cal["wake_latency_ns"], **at(probe)), cal["egress_delay_ns"])
    preds.append(validate.prediction(probe, sat))
    rows.append(row("saturation rate (overload probe)", sw["capacity_pps"] / 1e3, sat["throughput_pps"] / 1e3, "kpps", SOURCE))
    rows.append(row("dut CPU per frame at saturation", probe["dut_ns_per_packet"], sat["ns_per_packet"], "ns", SOURCE))
    return {"rows": rows, "summary": summary(rows), "calibration": cal, "predictions": preds}


def describe(res: dict) -> str:
    c = res["calibration"]
    return (
        f"calibrated at {', '.join(f'{100 * x:.0f}%' for x in c['from_loads'])} load: per frame (t_driver) {c['t_proc_ns']:.0f} ns, "
        f"t_poll {c['t_poll_ns']:.0f} ns, t_wakeup {c['t_wakeup_ns']:.0f} ns, wake latency {c['wake_latency_ns'] / 1e3:.1f} us, "
        f"egress delay {c['egress_delay_ns'] / 1e3:.1f} us"
    )
