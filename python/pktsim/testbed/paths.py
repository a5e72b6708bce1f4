"""The paths ``pktsim testbed validate --path`` holds against the real kernel, registered
in one place. Each is a module with ``NAME``, ``TITLE``, ``measure(topo, quick,
duration_s, reps, progress)`` (the measurements), ``compare(measurements)`` (rows in the
``reproduce`` contract, summary, calibration, predictions) and ``describe(result)`` (the
calibration in one line); :data:`TOPOLOGY` says what each needs built.
"""

from __future__ import annotations

from . import afxdp, defer, observecheck, share, tails, validate, wake, xdp
from .topology import Topology

# Seconds of the interference probe each validation runs on the dut CPU before it
# measures (quick: a short one), for the model's [cpu.interference].
PROBE_S = (10.0, 2.0)

PATHS = {m.NAME: m for m in (validate, defer, xdp, afxdp, share, observecheck)}
# What each path's topology carries besides the veths and the threaded NAPI.
TOPOLOGY = {
    "stack": lambda o: {"rules": o["rules"], "routes": o["routes"]},
    "defer": lambda o: {"rules": o["rules"], "routes": o["routes"]},
    "xdp": lambda o: {"xdp": True, "xdp_loops": o["loops"] if o["loops"] is not None else xdp.DEFAULT_LOOPS},
    # No nftables or XDP redirect: the forwarder attaches its own program (loops: its dial).
    "afxdp": lambda o: {"xdp_loops": o["loops"] if o["loops"] is not None else afxdp.DEFAULT_LOOPS},
    # A local receiver: the nftables dial on the input hook; share.measure switches the
    # receive mode per variant.
    "share": lambda o: {"rules": o["rules"], "local": True, "receive": "softirq"},
    # The stack's topology; the path switches on deferral, then XDP, in place.
    "observe": lambda o: {"rules": o["rules"], "routes": o["routes"]},
}
# Paths with an XDP program whose cost loop --loops sets.
LOOPED = ("xdp", "afxdp")
# Paths whose latency tails are predicted, with the interference a probe measured.
TAILED = ("stack", "defer", "xdp")


def topology(path: str, rules: int, routes: int, loops: int | None) -> Topology:
    """The path's topology, checked, not built."""
    opts = {"rules": rules, "routes": routes, "loops": loops}
    return Topology(**TOPOLOGY[path](opts))


def run(path: str, rules: int, routes: int, loops: int | None, quick: bool, duration_s: float | None, reps: int | None, progress=None) -> dict:
    mod = PATHS[path]
    duration_s, reps = validate.plan(quick, duration_s, reps)
    topo = topology(path, rules, routes, loops)
    with topo:
        probe = tails.run_probe(PROBE_S[quick]) if path in TAILED else None
        woken = wake.run_wake() if path in TAILED else None
        sw = mod.measure(topo, quick, duration_s, reps, progress=progress)
    if probe:
        sw["probe"] = probe
    if woken:
        sw["wake"] = woken
    setup = {"path": path, "duration_s": duration_s, "repetitions": reps, "quick": quick}
    if path in LOOPED:
        setup["loops"] = topo.xdp_loops
    else:
        setup.update(rules=rules, routes=routes)
    return {
        "paper": "testbed",
        "path": path,
        "title": mod.TITLE,
        **mod.compare(sw),
        "setup": setup,
        "machine": validate.machine(),
        "measurements": sw,
    }
