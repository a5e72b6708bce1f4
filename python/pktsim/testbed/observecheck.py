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
import os
import select
import subprocess
import sys

from ..reproduce.rows import row, summary
from . import runner, xdp
from .topology import DUT, DUT_IN, TestbedError, Topology, die_with_parent

NAME = "observe"
TITLE = "pktsim observe inside the dut, held against the testbed's own counters"
SOURCE = "testbed"
VARIANTS = ("stack", "defer", "xdp")
DEFER = (2, 50_000)  # napi_defer_hard_irqs, gro_flush_timeout (ns)
RATES_PPS = (30e3, 80e3)
QUICK_RATES_PPS = (40e3,)
# observe's window: the run starts once it is open (observe says so on stderr), and it lasts
# the generator's run and this much more, which the run's own start (perf's, the sink's)
# and end (the sink's drain, perf's stop, the counters) take, with a margin.
EXTRA_S = 3.0
TOLERANCE = {"rate": 0.01, "per_frame": 0.05, "cpu": 0.10}


def one(topo: Topology, rate_pps: float, duration_s: float) -> dict:
    """A testbed run of ``duration_s`` at ``rate_pps``, inside observe's window (observe is
    stopped with the run if the run fails or is interrupted)."""
    window_s = duration_s + EXTRA_S
    argv = ["ip", "netns", "exec", DUT, sys.executable, "-m", "pktsim", "observe", "--iface", DUT_IN, "--duration", f"{window_s}s", "--json"]
    obs = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent(os.getpid()))
    try:
        # The run starts once observe's window is open (its interpreter, the knobs and perf
        # first: on a loaded machine they take seconds).
        ready = select.select([obs.stderr], [], [], 60)[0] and "watching" in obs.stderr.readline()
        if not ready:
            raise TestbedError(f"pktsim observe inside {DUT} did not open its window within 60 s")
        tb = runner.measure(topo, rate_pps, duration_s)
        out, err = obs.communicate(timeout=window_s + 60)
    except BaseException:
        obs.kill()
        obs.wait()
        raise
    if obs.returncode != 0:
        raise TestbedError(f"pktsim observe inside {DUT} failed (exit {obs.returncode}): {err.strip()[-300:]}")
    try:
        return {"testbed": tb, "observe": json.loads(out)}
    except ValueError:
        raise TestbedError(f"pktsim observe inside {DUT} printed no JSON: {out[:200]!r}") from None


def measure(topo: Topology, quick: bool, duration_s: float, reps: int, progress=None) -> dict:
    """``duration_s``: the generator's run (observe's window is EXTRA_S longer)."""
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
            progress(i, len(plan), f"{variant}: {rate / 1e3:.0f} kpps for {duration_s:g} s, inside observe's window of {duration_s + EXTRA_S:g} s")
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
