"""Two scenarios side by side: model and simulate both, and the differences B - A.

``pktsim.compare(a, b)`` returns what ``pktsim compare A B --json`` prints::

    {"a": {"name": ..., "origin": ...}, "b": {...},
     "rows": [{"quantity": "throughput (simulated)", "a": x, "b": y,
               "diff": y - x, "rel_diff": (y - x) / x, "unit": "pps"}, ...]}

``config_diff`` comes first: the scenario keys whose values differ, ``[{"key", "a", "b"}]``
(None where a side leaves the key to its default), so a difference in the figures can be
traced to the configuration that caused it. ``diff`` is None when either side lacks the figure; ``rel_diff`` is None also when A's
value is (nearly) 0. The rows, in order: offered load, simulated and analytical
throughput, loss, latency percentiles, CPU (total, doing packet work, by activity and by context: the parts either side has), IRQs,
polls, packets per poll, cycles per packet by group, C_total and R_max (000 Eq. 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model import GROUPS, predict
from .scenario import Scenario, as_scenario
from .sim import run


def compare(a: Scenario | str | Mapping[str, Any], b: Scenario | str | Mapping[str, Any], sets=None) -> dict:
    """Model and simulate two scenarios (each a :class:`Scenario`, a TOML path or a dict,
    with ``sets`` applied to both); rows of the figures people compare, with B - A."""
    a, b = as_scenario(a, sets), as_scenario(b, sets)
    pa, pb = predict(a), predict(b)
    ra, rb = run(a), run(b)
    rows = []

    def add(quantity, va, vb, unit):
        d = None if va is None or vb is None else vb - va
        rel = None if d is None or abs(va) < 1e-6 else d / va
        rows.append({"quantity": quantity, "a": va, "b": vb, "diff": d, "rel_diff": rel, "unit": unit})

    add("offered", ra["offered_pps"], rb["offered_pps"], "pps")
    add("throughput (simulated)", ra["throughput_pps"], rb["throughput_pps"], "pps")
    add("throughput (analytical)", pa["predicted_pps"], pb["predicted_pps"], "pps")
    add("loss", ra["loss_ratio"], rb["loss_ratio"], "fraction")
    for k in ("p50", "p90", "p99", "p999", "max", "mean"):
        add(f"latency {k}", ra["latency_ns"][k], rb["latency_ns"][k], "ns")
    add("CPU utilisation", ra["cpu_utilization"], rb["cpu_utilization"], "fraction")
    add("CPU doing packet work", ra["cpu_useful"], rb["cpu_useful"], "fraction")
    # The CPU's split by activity and by context (hard IRQ, softirq, ksoftirqd, NAPI
    # threads, application): a part neither side has (0 in both) is left out.
    for k in sorted(set(ra["cpu_by_activity"]) | set(rb["cpu_by_activity"])):
        va, vb = ra["cpu_by_activity"].get(k), rb["cpu_by_activity"].get(k)
        if va or vb:
            add(f"CPU {k}", va, vb, "fraction")
    ca, cb = ra.get("cpu_by_context", {}), rb.get("cpu_by_context", {})
    for k in sorted(set(ca) | set(cb)):
        if ca.get(k) or cb.get(k):
            add(f"CPU in {k}", ca.get(k), cb.get(k), "fraction")
    add("IRQs", ra["irq_per_s"], rb["irq_per_s"], "1/s")
    add("polls per packet", ra["polls_per_packet"], rb["polls_per_packet"], "polls/packet")
    add("packets per poll", ra["packets_per_poll"]["mean"], rb["packets_per_poll"]["mean"], "packets")
    if "cycles_by_group" in pa and "cycles_by_group" in pb:
        for g in GROUPS:
            add(f"C_{g}", pa["cycles_by_group"][g], pb["cycles_by_group"][g], "cycles/packet")
        add("C_total", pa["c_total_cycles"], pb["c_total_cycles"], "cycles/packet")
        add("R_max (Eq. 1)", pa["r_max_pps"], pb["r_max_pps"], "pps")
    else:  # a chain on either side: its capacity is its narrowest node's or link's
        add("R_max (chain: its bottleneck)", pa["r_max_pps"], pb["r_max_pps"], "pps")
    return {
        "a": {"name": ra["name"], "origin": a.origin},
        "b": {"name": rb["name"], "origin": b.origin},
        "config_diff": config_diff(a.data, b.data),
        "rows": rows,
    }


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def config_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict]:
    """Scenario keys (dotted paths) whose values differ between two scenario dicts; the
    name and description are left out."""
    fa, fb = _flatten(a), _flatten(b)
    keys = sorted(k for k in set(fa) | set(fb) if k not in ("name", "description") and fa.get(k) != fb.get(k))
    return [{"key": k, "a": fa.get(k), "b": fb.get(k)} for k in keys]
