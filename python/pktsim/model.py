"""The analytical cycles-per-packet model of 000 (Eq. 1-3), computed by the Rust core."""

from __future__ import annotations

import json
from collections.abc import Mapping

from . import _core

# typing is only needed by type checkers (annotations are not evaluated): not imported at
# run time, so that the command starts without it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .scenario import Scenario

GROUPS = ("RX", "alloc", "prerouting", "routing", "postrouting", "free", "TX", "other")


class Prediction(dict):
    """The model's result: a dict with the JSON contract's keys, plus helpers."""

    def groups(self):
        """Cycles per packet by group as a pandas DataFrame (group, cycles, share)."""
        import pandas as pd

        c = self["cycles_by_group"]
        total = self["c_total_cycles"]
        return pd.DataFrame({"group": list(GROUPS), "cycles": [c[g] for g in GROUPS], "share": [c[g] / total for g in GROUPS]})


def predict(scenario: Scenario | str | Mapping[str, Any], sets=None) -> Prediction:
    """Analytical prediction for a scenario (a :class:`Scenario`, a TOML path or a dict)
    with optional overrides (plain numbers in the key's base unit, as for :func:`pktsim.run`).

    Returns a :class:`Prediction` (a dict): ``name``; ``frequency_hz`` (Hz); ``cores``;
    ``mean_frame_bytes`` (bytes); ``c_total_cycles``, ``c_core_cycles`` (cycles per packet)
    and ``cycles_by_group`` (cycles per packet by group: RX, alloc, prerouting, routing,
    postrouting, free, TX, other); ``ns_per_packet`` (ns); ``r_max_pps``, ``r_cpu_pps``,
    ``capacity_pps``, ``line_rate_pps``, ``offered_pps``, ``predicted_pps``,
    ``dropped_pps`` (pps); ``cpu_load``, ``cpu_load_max`` (0..1); ``cpu_load_basis`` (text);
    ``irq_per_s``, ``polls_per_s``, ``wakeups_per_s`` (events per second, the model's closed
    forms below saturation) and ``frames_per_poll``;
    ``bottleneck`` ("cpu" or "link"); ``saturated`` (bool); ``frame_cost_ns`` (ns per
    frame by term: ``processing``, ``contention``, ``tx clean``, ``tx lock``);
    ``per_core`` (list: ``share`` 0..1, ``mean_frame_bytes``, ``ns_per_packet`` ns,
    ``capacity_pps``, ``forwarded_pps`` pps, ``cpu_load`` 0..1, ``idle_starts_per_s`` episodes
    per second that start on the idle core and ``idle_gap_s`` s, the mean gap before them);
    ``fib`` (the FIB model:
    ``routes``, ``flows``, ``depth_levels``, ``working_set_bytes`` bytes, ``resides_in``,
    ``stall_cycles_per_miss``, ``extra_cycles`` cycles, ``flows_fitting_l3``); ``notes``
    (list of text).

    For a chain file: ``name``, ``bottleneck_node`` (index), ``bottleneck`` (what limits it
    there: "cpu", "link" or "inbound link"), ``r_max_pps`` (the chain's loss-free capacity),
    ``offered_pps``, ``predicted_pps``, ``saturated``, ``link_rate_pps`` (each link's line
    rate in frames), ``node_names`` and ``nodes`` (each node's prediction as above)."""
    from .scenario import as_scenario  # here: units parsing (values, the CLI) needs no Scenario

    sc = as_scenario(scenario, sets)
    out = sc._resolve().predict()
    if "bottleneck_node" in out:
        # A chain: each node's prediction, the links and the bottleneck (no groups of its own).
        for n in out["nodes"]:
            n["cycles_by_group"] = {g: n["cycles_by_group"][g] for g in GROUPS}
        return Prediction(out)
    # Only the cycle groups are the model's; keep them in 000's order.
    out["cycles_by_group"] = {g: out["cycles_by_group"][g] for g in GROUPS}
    return Prediction(out)


def from_measurement(rate_pps: float, frequency_hz: float, cpu_load: float | None = None, active_cycles_per_s: float | None = None) -> dict:
    """000 Eq. 3: ``C_total = f * CPU_load / R`` (or ``C_active / R``)."""
    return json.loads(_core.from_measurement(rate_pps, frequency_hz, cpu_load, active_cycles_per_s))


def parse_quantity(kind: str, text: str) -> float:
    """Parse ``"1.67Mpps"``, ``"3.3GHz"``, ``"100%"``... into base units (pps, Hz, fraction)."""
    return _core.parse_quantity(kind, text)
