"""Hold pktsim's model of the veth / threaded-NAPI path against the real kernel.

1. Measure: the dut's capacity (an overload probe), then a load sweep (fractions of it).
2. Calibrate the model from three loads below overload (the lowest and those nearest
   45% and 90%). The NAPI thread's CPU time per frame is
   ``t_proc + t_poll x polls per frame + t_wakeup x wake-ups per frame``, and every load
   gives all four figures exactly (schedstat runtime, napi:napi_poll count, voluntary
   context switches), so three loads fix the three costs. The wake-up latency is then
   fitted so that the simulated latency median at the lowest load equals the measured
   one (it absorbs the generator's send path and the time stamp at dut egress).
3. Predict every measured point with the simulator (io = "threaded-napi", ring 256,
   weight 64, CBR at the measured offered rate) and the saturation rate, and print
   measured (``reported``) vs ``predicted`` with the error, like ``pktsim reproduce``.

The scheduler tick, timers and the hypervisor on the dut CPU enter the model as
``[cpu.interference]`` when the validation ran a probe (``paths.run`` does; p99 and p99.9
are then predicted), the dut CPU's halt as its ``[cpu.idle]`` refill (:mod:`.wake`), and
each load's source is the generator as it measured itself: paced, with its stalls
(``[[traffic.stalls]]``, :func:`stall_sets`); with a wake probe, the calibrated cost
of a wake-up is split into the thread's switch in and its way to sleep, during which a
new frame costs no wake-up (:func:`split_wakeup`). What it still leaves out are cache
effects that change the per-frame cost with load.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np

from .. import sim
from ..fitting import linear
from ..reproduce.rows import row, summary
from ..scenario import Scenario
from . import runner
from .topology import Topology

TITLE = "Linux forwarding over veth with threaded NAPI, measured on this machine"
SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "veth-threaded-napi.toml"
SOURCE = "testbed"


def us(ns: float | None) -> float | None:
    """Nanoseconds as microseconds (None for a quantile that was not measured)."""
    return ns / 1e3 if ns else None


def machine() -> dict:
    info = {"kernel": platform.release(), "cpus": os.cpu_count(), "python": platform.python_version()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and "cpu_model" not in info:
                info["cpu_model"] = line.split(":", 1)[1].strip()
            if line.startswith("cpu MHz") and "cpu_mhz" not in info:
                info["cpu_mhz"] = float(line.split(":", 1)[1])
            if line.startswith("hypervisor") or (line.startswith("flags") and " hypervisor" in line):
                info["virtualized"] = True
    except OSError:
        pass
    return info


PARAMS = ("t_proc_ns", "t_poll_ns", "t_wakeup_ns")


def halt_refill_ns(p: dict, halt: dict | None) -> float:
    """The refill a wake-up at load ``p`` pays after the halt a wake probe measured: the
    dut CPU's mean idle time per wake-up, ``(1 - utilization) / wake-ups per second``,
    on the ramp ``refill x min(idle, refill_time) / refill_time`` (0 without a probe)."""
    if not halt or not p.get("packets_per_wakeup") or not p.get("forwarded_pps"):
        return 0.0
    idle_ns = max(0.0, 1.0 - p.get("dut_utilization", 1.0)) * 1e9 * p["packets_per_wakeup"] / p["forwarded_pps"]
    T = halt["refill_time_ns"]
    return halt["refill_ns"] * (min(idle_ns, T) / T if T > 0 else 1.0)


def calibrate(points: list[dict], names: tuple[str, ...] | None = None, halt: dict | None = None) -> dict:
    """t_proc, t_poll and t_wakeup (ns) from measured loads.

    The NAPI thread's CPU time per forwarded frame is
    ``t_proc + t_poll x polls per frame + t_wakeup x wake-ups per frame``; each load gives
    all four figures exactly (runtime, perf's napi:napi_poll count, voluntary switches),
    so three loads fix the three costs (without poll counts, or with ``names`` the two
    of t_proc and t_wakeup, two loads fix t_proc and t_wakeup and t_poll is 0). The
    per-poll and per-wake-up costs are at least 0 (:func:`pktsim.fitting.linear.costs`,
    the project's one linear fit). With ``halt`` (a wake probe's, :mod:`.wake`) each
    load's measured cost first loses the halt's refill per frame, which the model adds
    by itself (:func:`halt_refill_ns`)."""
    use_polls = all(p.get("packets_per_poll") for p in points) and (names is None or "t_poll_ns" in names)
    names = names or (PARAMS if use_polls else ("t_proc_ns", "t_wakeup_ns"))
    rows = []
    for p in points:
        r = {"t_proc_ns": 1.0, "t_wakeup_ns": 1 / p["packets_per_wakeup"]}
        if use_polls:
            r["t_poll_ns"] = 1 / p["packets_per_poll"]
        rows.append(r)
    y = np.array([p["dut_ns_per_packet"] - halt_refill_ns(p, halt) / p["packets_per_wakeup"] for p in points])
    A = np.array([[r[n] for n in names] for r in rows])
    fit = dict.fromkeys(PARAMS, 0.0)
    fit.update(linear.costs(A, y, names, kept=("t_proc_ns",), free=("t_proc_ns",)))
    if fit["t_proc_ns"] <= 0:
        raise runner.TestbedError(f"calibration gave t_proc = {fit['t_proc_ns']:.0f} ns: the measurements are too noisy; rerun with a longer --duration")
    fit["from_loads"] = [p["load"] for p in points]
    fit["poll_counts"] = use_polls
    return fit


def scenario(
    cal: dict,
    rate_pps: float,
    wake_latency_ns: float,
    duration_s: float = 1.0,
    sets: dict | None = None,
    path: Path = SCENARIO,
    per_frame_key: str = "host.t_proc",
) -> Scenario:
    """The path's scenario at ``rate_pps`` with the calibrated costs (``per_frame_key``
    takes t_proc: the stack's per-frame time, or XDP's t_driver) and ``sets`` on top."""
    sc = Scenario.load(path)
    return sc.with_sets(
        {
            "traffic.rate": f"{rate_pps:.3f}pps",
            per_frame_key: f"{cal['t_proc_ns']:.1f}ns",
            "host.t_poll": f"{cal['t_poll_ns']:.1f}ns",
            **thread_sets(cal),
            "host.thread.wake_latency": f"{max(0.0, wake_latency_ns):.1f}ns",
            # A deferral timer's expiry, where a deferral point calibrated it (the defer path).
            **({"host.t_timer": f"{cal['t_timer_ns']:.1f}ns"} if "t_timer_ns" in cal else {}),
            "measure.duration": f"{duration_s:g}s",
            **(sets or {}),
        }
    )


def thread_sets(cal: dict) -> dict:
    """The NAPI thread's wake-up costs: with a split (:func:`split_wakeup`), the switch in
    at the wake-up and the rest on its way to sleep, else all at the wake-up."""
    if "t_sleep_ns" in cal:
        return {"host.thread.t_wakeup": f"{cal['t_switch_ns']:.1f}ns", "host.thread.t_sleep": f"{cal['t_sleep_ns']:.1f}ns"}
    return {"host.thread.t_wakeup": f"{cal['t_wakeup_ns']:.1f}ns"}


def split_wakeup(cal: dict, sw: dict) -> None:
    """The calibrated cost of a wake-up is the thread's switch in (the wake probe's same-CPU
    switch: a derived figure) and its way to sleep (the rest): a frame that comes while it
    is on that way keeps it awake (``host.thread.t_sleep``). Nothing without a probe."""
    if not sw.get("wake"):
        return
    switch = min(float(sw["wake"]["switch_ns"]), cal["t_wakeup_ns"])
    cal["t_switch_ns"] = switch
    cal["t_sleep_ns"] = cal["t_wakeup_ns"] - switch


def machine_sets(sw: dict) -> dict:
    """What the probes a validation ran measured of the dut CPU, as the model's keys: its
    ``[cpu.interference]`` (:mod:`.tails`) and its idle states' halt (:mod:`.wake`);
    nothing for a probe that did not run."""
    from . import tails, wake

    return {**(tails.sets(sw["probe"]) if sw.get("probe") else {}), **(wake.sets(sw["wake"]) if sw.get("wake") else {})}


def stall_sets(p: dict) -> dict:
    """The input the dut got at point ``p``: the generator's measured stalls (the times its
    pacing loop was away from the clock), by kind, as the model's ``[[traffic.stalls]]``
    (none when the point has no record of them)."""
    kinds = p.get("stalls") or (runner.stalls([p]) if p.get("generator_stalls") else None)
    out = [{"rate": f"{k['rate_hz']:.3f}Hz", "length": [f"{q:.0f}ns" for q in k["length_ns"]]} for k in kinds or [] if k["rate_hz"] > 0 and k["length_ns"]]
    return {"traffic.stalls": out} if out else {}


def halt(sw: dict) -> dict | None:
    """The halt a validation's wake probe measured (None without one)."""
    return sw["wake"]["halt"] if sw.get("wake") else None


def calibrate_with_probes(points: list[dict], sw: dict, names: tuple[str, ...] | None = None, split: bool = True) -> dict:
    """:func:`calibrate` with what the validation's probes measured: the halt's refill taken
    out first, the wake-up split (:func:`split_wakeup`; ``split`` False keeps it whole, all
    paid at the wake-up), and whether the interference and the halt entered
    the model."""
    cal = calibrate(points, names, halt=halt(sw))
    if split:
        split_wakeup(cal, sw)
    cal["interference"] = bool(sw.get("probe"))
    cal["halt"] = halt(sw)
    return cal


def tail_rows(p: dict, m: dict, tag: str, predicted: bool) -> list[dict]:
    """p99 and p99.9 of a point: predicted rows with the interference a probe measured,
    else ``tail`` rows (reported with their error, not expected to match)."""
    extra = {} if predicted else {"tail": True}
    out = []
    for q, name in (("p99", "p99"), ("p999", "p99.9")):
        got = p["latency_ns"].get(q)
        out.append(row(f"latency {name}, {tag}", got / 1e3 if got else None, m["latency_ns"][q] / 1e3, "us", SOURCE, **extra))
    return out


def simulate(cal: dict, rate_pps: float, wake_latency_ns: float, **kw) -> dict:
    """The simulator's figures at ``rate_pps`` (``kw``: :func:`scenario`'s), with CPU per
    frame and frames per wake-up as the testbed measures them."""
    r = sim.run(scenario(cal, rate_pps, wake_latency_ns, **kw))
    fwd = r["forwarded_packets"]
    # The dut's own work: interference is not the NAPI thread's (it is time the CPU was
    # elsewhere, which the measured thread runtime mostly does not contain).
    own = r["cpu_utilization"] - r["cpu_by_activity"].get("interference", 0.0)
    r["ns_per_packet"] = own * 1e9 / r["throughput_pps"] if r["throughput_pps"] else None
    # veth's threaded NAPI reports "wakeups", a device's NAPI thread "thread_wakeups".
    wakeups = r["io"]["wakeups"] if "wakeups" in r["io"] else r["io"]["thread_wakeups"]
    r["packets_per_wakeup"] = fwd / wakeups if wakeups else None
    return r


def fit_wake_latency(cal: dict, lo: dict, **kw) -> float:
    """Wake-up latency (ns) that makes the simulated median at the lowest load the measured one."""
    target = lo["latency_ns"]["p50"]
    wl = max(0.0, target - cal["t_wakeup_ns"] - cal["t_poll_ns"] - cal["t_proc_ns"])
    for _ in range(4):
        got = simulate(cal, lo["offered_pps"], wl, **kw)["latency_ns"]["p50"]
        wl = max(0.0, wl + target - got)
    return wl


def fit_wake_latency_from_batching(cal: dict, lo: dict, **kw) -> float:
    """Wake-up latency (ns) that makes the simulated frames per wake-up at the lowest load
    the measured ones: the longer the thread takes to run, the more frames it finds
    (bisection; frames per wake-up grow with the latency)."""
    target = lo["packets_per_wakeup"]
    a, b = 0.0, 200_000.0
    for _ in range(14):
        mid = (a + b) / 2
        got = simulate(cal, lo["offered_pps"], mid, **kw)["packets_per_wakeup"] or 0.0
        a, b = (mid, b) if got < target else (a, mid)
    return (a + b) / 2


def shift_latency(m: dict, offset_ns: float) -> dict:
    """``m`` with ``offset_ns`` added to every latency percentile (a fixed delay after the
    dut that the model does not simulate)."""
    m["latency_ns"] = {q: (v + offset_ns if isinstance(v, (int, float)) and q != "count" else v) for q, v in m["latency_ns"].items()}
    return m


def calibration_points(usable: list[dict]) -> list[dict]:
    """The lowest load and the ones nearest 45% and 90% of capacity: sparse frames (a
    wake-up each), short polls, and long polls (below overload)."""
    chosen = [usable[0]]
    for target in (0.45, 0.9):
        rest = [p for p in usable if all(p is not c for c in chosen)]
        if rest:
            chosen.append(min(rest, key=lambda p: abs(p["load"] - target)))
    return chosen


def compare(sw: dict) -> dict:
    """Calibrate on a measured sweep and predict each of its loads: ``{"rows"`` (the
    reproduce contract: calibration points are ``fitted``, the rest ``predicted``),
    ``"summary"`` (as ``reproduce``'s), ``"calibration"``, ``"predictions"`` (one per load, in load order,
    then the overload probe)``}``."""
    pts = sorted(sw["points"], key=lambda p: p["load"])
    usable = [p for p in pts if p["packets_per_wakeup"] and p["dut_ns_per_packet"]]
    if len(usable) < 2:
        raise runner.TestbedError("fewer than two loads forwarded anything: nothing to calibrate from")
    cal_points = calibration_points(usable)
    lo = cal_points[0]
    cal = calibrate_with_probes(cal_points, sw)
    sets = machine_sets(sw)
    cal["wake_latency_ns"] = fit_wake_latency(cal, lo, sets={**sets, **stall_sets(lo)})
    rows, preds = [], []
    for p in pts:
        fitted = any(p is c for c in cal_points)
        m = simulate(cal, p["offered_pps"], cal["wake_latency_ns"], sets={**sets, **stall_sets(p)})
        preds.append(prediction(p, m))
        tag = f"{100 * p['load']:.0f}% load ({p['offered_pps'] / 1e3:.1f} kpps)"
        extra = {"fitted": True} if fitted else {}
        rows.append(row(f"dut CPU per frame, {tag}", p["dut_ns_per_packet"], m["ns_per_packet"], "ns", SOURCE, **extra))
        rows.append(row(f"frames per wake-up, {tag}", p["packets_per_wakeup"], m["packets_per_wakeup"], "frames", SOURCE))
        rows.append(row(f"frames per poll, {tag}", p["packets_per_poll"], m["packets_per_poll"]["mean"], "frames", SOURCE))
        rows.append(row(f"forwarded, {tag}", p["forwarded_pps"] / 1e3, m["throughput_pps"] / 1e3, "kpps", SOURCE))
        rows.append(row(f"loss, {tag}", 100 * p["loss_ratio"], 100 * m["loss_ratio"], "%", SOURCE))
        rows.append(
            row(
                f"latency p50, {tag}",
                p["latency_ns"]["p50"] / 1e3 if p["latency_ns"]["p50"] else None,
                m["latency_ns"]["p50"] / 1e3,
                "us",
                SOURCE,
                **({"fitted": True} if p is lo else {}),
            )
        )
        rows.extend(tail_rows(p, m, tag, bool(sw.get("probe"))))
    probe = sw["capacity_probe"]
    sat = simulate(cal, probe["offered_pps"], cal["wake_latency_ns"], sets={**sets, **stall_sets(probe)})
    preds.append(prediction(probe, sat))
    rows.append(row("saturation rate (overload probe)", sw["capacity_pps"] / 1e3, sat["throughput_pps"] / 1e3, "kpps", SOURCE))
    rows.append(row("dut CPU per frame at saturation", probe["dut_ns_per_packet"], sat["ns_per_packet"], "ns", SOURCE))
    return {"rows": rows, "summary": summary(rows), "calibration": cal, "predictions": preds}


def prediction(p: dict, m: dict) -> dict:
    """A simulated point in the shape of a measured one."""
    return {
        "load": p.get("load"),
        "offered_pps": p["offered_pps"],
        "dut_ns_per_packet": m["ns_per_packet"],
        "forwarded_pps": m["throughput_pps"],
        "loss_ratio": m["loss_ratio"],
        "packets_per_wakeup": m["packets_per_wakeup"],
        "packets_per_poll": m["packets_per_poll"]["mean"],
        "latency_ns": {q: m["latency_ns"][q] for q in ("p50", "p90", "p99", "p999")},
    }


def plan(quick: bool, duration_s: float | None, reps: int | None) -> tuple[float, int]:
    """Seconds per run and runs per load (checked)."""
    # `is None`, not `or`: a given 0 is an error, not the default.
    duration_s = (0.5 if quick else 3.0) if duration_s is None else duration_s
    reps = (1 if quick else 3) if reps is None else reps
    runner.check(None, duration_s, reps)
    return duration_s, reps


NAME = "stack"


# Loads of a quick sweep from 10% to 120% of the capacity: 10%, 38%, 65%, 92%, 120%, three
# well below saturation, so that one a stall of the machine made lose frames (a hypervisor
# running another guest for milliseconds) still leaves two to calibrate from.
QUICK_LOADS = 5


def measure(topo: Topology, quick: bool, duration_s: float, reps: int, progress=None) -> dict:
    """The capacity and 12 loads from 10% to 120% of it (``quick``: QUICK_LOADS)."""
    return runner.sweep(topo, 0.1, 1.2, QUICK_LOADS if quick else 12, duration_s, reps, progress=progress)


def describe(res: dict) -> str:
    c = res["calibration"]
    return (
        f"calibrated at {', '.join(f'{100 * x:.0f}%' for x in c['from_loads'])} load: t_proc {c['t_proc_ns']:.0f} ns, "
        f"t_poll {c['t_poll_ns']:.0f} ns, t_wakeup {c['t_wakeup_ns']:.0f} ns, wake latency {c['wake_latency_ns'] / 1e3:.1f} us"
    )


def calibrated_scenario(res: dict, load: float = 0.5) -> Scenario:
    """The model a ``stack`` or ``defer`` validation calibrated, as a scenario: the path's
    scenario with the fitted costs, the wake-up latency and the probe's interference, its
    rate ``load`` of the measured capacity, deferral off."""
    cal = res["calibration"]
    sw = res["measurements"]
    return scenario(cal, load * sw["capacity_pps"], cal["wake_latency_ns"], duration_s=1.0, sets=machine_sets(sw))


def _toml_key(k: str) -> str:
    import re

    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json_text(k)


def json_text(v) -> str:
    import json

    return json.dumps(v, ensure_ascii=False)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json_text(v)  # a JSON string is a TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items() if x is not None) + " }"
    raise TypeError(f"no TOML for {type(v).__name__}")


def toml_text(data: dict, header: str = "") -> str:
    """A normalised scenario (``Scenario.to_dict()``) as TOML: plain keys first, then one
    table per nested mapping (lists of mappings as arrays of tables); None is left out."""
    lines = [f"# {h}" if h else "#" for h in header.splitlines()] if header else []

    def emit(d: dict, prefix: str) -> None:
        plain = {
            k: v for k, v in d.items() if v is not None and not isinstance(v, dict) and not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v))
        }
        tables = {k: v for k, v in d.items() if isinstance(v, dict)}
        arrays = {k: v for k, v in d.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
        if prefix and (plain or not tables):
            lines.extend(["", f"[{prefix}]"])
        for k, v in plain.items():
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
        for k, v in tables.items():
            emit(v, f"{prefix}.{_toml_key(k)}" if prefix else _toml_key(k))
        for k, items in arrays.items():
            name = f"{prefix}.{_toml_key(k)}" if prefix else _toml_key(k)
            for x in items:
                lines.extend(["", f"[[{name}]]"])
                lines.extend(f"{_toml_key(a)} = {_toml_value(b)}" for a, b in x.items() if b is not None)

    emit(data, "")
    return "\n".join(lines) + "\n"


def scenario_file_text(res: dict) -> str:
    """:func:`calibrated_scenario` as a TOML file, headed by where it came from."""
    sc = calibrated_scenario(res)
    c = res["calibration"]
    m = res.get("machine", {})
    header = (
        f"The {res['path']} path's model as `pktsim testbed validate --path {res['path']}` calibrated it on this machine\n"
        f"({m.get('cpu_model', '?')}, Linux {m.get('kernel', '?')}): dut capacity {res['measurements']['capacity_pps'] / 1e3:.1f} kpps;\n"
        f"t_proc {c['t_proc_ns']:.0f} ns, t_poll {c['t_poll_ns']:.0f} ns, t_wakeup {c['t_wakeup_ns']:.0f} ns, wake latency {c['wake_latency_ns'] / 1e3:.1f} us"
        + ("; [cpu.interference] from the probe" if c.get("interference") else "")
        + ".\nThe rate is half the capacity, deferral off; every value is written out."
    )
    return toml_text(sc.to_dict(), header)
