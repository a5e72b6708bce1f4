"""The ``observe`` path: ``pktsim observe`` inside the dut, held against the testbed's own
counters while the testbed drives it.

observe runs as a user would run it on a host (``ip netns exec`` into the dut's namespace,
``--iface tb-dut0``, nothing else said): it finds the interface's NAPI thread by the name
the kernel gives it, its polls through perf, the CPUs that handle it, over a window that
opens before the testbed's generator starts and closes after its sink has drained, so
that both count the same frames. The testbed counts the run from outside, as it does for
every path: the frames that entered the dut, its thread's CPU time and wake-ups
(``/proc/PID/schedstat`` and ``status`` of the thread it placed) and its polls (``perf stat
-C`` on the dut CPU). Three ways the dut
receives, in one topology: the kernel's forwarding (threaded NAPI, nftables), the same with
hard-IRQ deferral (``napi_defer_hard_irqs`` 2, ``gro_flush_timeout`` 50 us), and native XDP
redirect; two loads each (quick: one), below every path's capacity on this machine.

Each figure is a ``relation`` row (reported: the testbed's count; predicted: what observe
read), holding when observe is within the tolerance the issue sets for it: frames 1%,
wake-ups and polls per frame 5%, CPU per frame 10%.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from ..reproduce.rows import row, summary
from . import runner, xdp
from .topology import DUT, DUT_IN, TestbedError, Topology

NAME = "observe"
TITLE = "pktsim observe inside the dut, held against the testbed's own counters"
SOURCE = "testbed"
VARIANTS = ("stack", "defer", "xdp")
DEFER = (2, 50_000)  # napi_defer_hard_irqs, gro_flush_timeout (ns)
RATES_PPS = (30e3, 80e3)
QUICK_RATES_PPS = (40e3,)
# observe's window opens this long before the testbed's run starts (its interpreter, the
# knobs it reads and perf's first interval come first) and closes this long after the run
# (the sink's drain, perf's stop and the counters) would have ended.
LEAD_S = 1.5
TRAIL_S = 2.0
TOLERANCE = {"rate": 0.01, "per_frame": 0.05, "cpu": 0.10}


def _observe(window_s: float, out: dict) -> None:
    argv = ["ip", "netns", "exec", DUT, sys.executable, "-m", "pktsim", "observe", "--iface", DUT_IN, "--duration", f"{window_s}s", "--json"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=window_s + 60)
    if p.returncode != 0:
        out["error"] = p.stderr.strip()[-300:] or f"exit {p.returncode}"
        return
    try:
        out["op"] = json.loads(p.stdout)
    except ValueError:
        out["error"] = f"observe printed no JSON: {p.stdout[:200]!r}"


def one(topo: Topology, rate_pps: float, duration_s: float) -> dict:
    """A testbed run of ``duration_s`` at ``rate_pps``, inside observe's window."""
    got: dict = {}
    obs = threading.Thread(target=_observe, args=(LEAD_S + duration_s + TRAIL_S, got), daemon=True)
    obs.start()
    try:
        time.sleep(LEAD_S)
        tb = runner.measure(topo, rate_pps, duration_s)
    finally:
        obs.join(duration_s + TRAIL_S + 90)
    if "op" not in got:
        raise TestbedError(f"pktsim observe inside {DUT} failed: {got.get('error', 'it did not finish')}")
    return {"testbed": tb, "observe": got["op"]}


def measure(topo: Topology, quick: bool, duration_s: float, reps: int, progress=None) -> dict:
    """``duration_s``: the generator's run (observe's window is LEAD_S + TRAIL_S longer)."""
    rates = QUICK_RATES_PPS if quick else RATES_PPS
    points = []
    plan = [(v, r) for v in VARIANTS for r in rates]
    for i, (variant, rate) in enumerate(plan):
        if variant == "defer":
            topo.set_deferral(*DEFER)
        elif variant == "xdp" and not topo.xdp:
            topo.set_deferral(0, 0)
            topo.attach_xdp(xdp.DEFAULT_LOOPS)
        if progress:
            progress(i, len(plan), f"{variant}: {rate / 1e3:.0f} kpps for {duration_s:g} s, observed from {LEAD_S:g} s before to {TRAIL_S:g} s after")
        for rep in range(reps):
            points.append({"variant": variant, "rate_pps": rate, "rep": rep, **one(topo, rate, duration_s)})
    return {"points": points, "duration_s": duration_s, "defer": {"napi_defer_hard_irqs": DEFER[0], "gro_flush_timeout_ns": DEFER[1]}}


def _figures(p: dict) -> list[tuple[str, float | None, float | None, str, float]]:
    """(quantity, testbed, observe, unit, tolerance) of one point: over the same frames."""
    tb, op = p["testbed"], p["observe"]
    c = tb["counts"]
    frames = op["received_pps"] * op["window_s"]
    per = lambda n: n / c["dut_rx"] if c["dut_rx"] and n else None  # noqa: E731
    return [
        ("frames received", c["dut_rx"], round(frames), "frames", TOLERANCE["rate"]),
        ("NAPI wake-ups per frame", per(c["napi_wakeups"]), op.get("wakeups_per_packet"), "wake-ups/frame", TOLERANCE["per_frame"]),
        ("NAPI polls per frame", per(c["napi_polls"]), op.get("polls_per_packet"), "polls/frame", TOLERANCE["per_frame"]),
        ("CPU per frame", _us(per(c["napi_runtime_ns"])), _us(op.get("cpu_ns_per_packet")), "us", TOLERANCE["cpu"]),
    ]


def _us(ns: float | None) -> float | None:
    return ns / 1e3 if ns else None


def compare(sw: dict) -> dict:
    rows = []
    for p in sw["points"]:
        for quantity, reported, observed, unit, tol in _figures(p):
            if reported is None or observed is None:
                continue
            err = abs(observed / reported - 1) if reported else None
            rows.append(
                row(
                    f"{p['variant']}, {p['rate_pps'] / 1e3:.0f} kpps: {quantity}",
                    reported,
                    observed,
                    unit,
                    SOURCE,
                    kind="relation",
                    holds=err is not None and err <= tol,
                    tolerance=tol,
                )
            )
    return {"rows": rows, "summary": summary(rows), "calibration": {}, "predictions": []}


def describe(res: dict) -> str:
    s = res["summary"]
    held, n = s.get("relations_held"), s.get("relations")
    return f"observe's readings within the tolerances at {held} of {n} figures (reported: the testbed's counts; predicted: observe's)"


def held(res: dict) -> bool:
    return all(r.get("holds") for r in res["rows"])
