"""The analytical cycles-per-packet model of 000 (Eq. 1-3), computed by the Rust core."""

from __future__ import annotations

import json
from typing import Any, Mapping

from . import _core
from .scenario import Scenario, as_scenario

GROUPS = ("RX", "alloc", "prerouting", "routing", "postrouting", "free", "TX", "other")


class Prediction(dict):
    """The model's result: a dict with the JSON contract's keys, plus helpers."""

    def groups(self):
        """Cycles per packet by group as a pandas DataFrame (group, cycles, share)."""
        import pandas as pd

        c = self["cycles_by_group"]
        total = self["c_total_cycles"]
        return pd.DataFrame(
            {"group": list(GROUPS), "cycles": [c[g] for g in GROUPS], "share": [c[g] / total for g in GROUPS]}
        )


def predict(scenario: "Scenario | str | Mapping[str, Any]", sets=None) -> Prediction:
    """Analytical prediction for a scenario (a :class:`Scenario`, a TOML path or a dict)."""
    sc = as_scenario(scenario, sets)
    out = json.loads(_core.predict(sc.text, sc.format, sc.origin, sc.base_dir, list(sc.sets)))
    # Only the cycle groups are the model's; keep them in 000's order.
    out["cycles_by_group"] = {g: out["cycles_by_group"][g] for g in GROUPS}
    return Prediction(out)


def from_measurement(rate_pps: float, frequency_hz: float, cpu_load: float | None = None, active_cycles_per_s: float | None = None) -> dict:
    """000 Eq. 3: ``C_total = f * CPU_load / R`` (or ``C_active / R``)."""
    return json.loads(_core.from_measurement(rate_pps, frequency_hz, cpu_load, active_cycles_per_s))


def parse_quantity(kind: str, text: str) -> float:
    """Parse ``"1.67Mpps"``, ``"3.3GHz"``, ``"100%"``... into base units (pps, Hz, fraction)."""
    return _core.parse_quantity(kind, text)
