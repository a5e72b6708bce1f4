"""Simulation from Python: ``run`` one scenario.

The engine is the Rust core; this module carries a scenario to it and shapes what comes
back into a dict. Grids of runs (``sweep``) are in :mod:`pktsim.experiments`, which builds
on this module (never the other way round).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from . import _core
from .scenario import Scenario, as_scenario
from .values import expand_values, flatten

__all__ = ["RunResult", "run", "expand_values", "flatten"]


class RunResult(dict):
    """One run's result: a dict with the ``pktsim run --json`` keys."""

    def flat(self) -> dict:
        """One level of keys: ``latency_ns.p99`` becomes ``latency_ns_p99``; lists are dropped."""
        return flatten(self)


def run(scenario: "Scenario | str | Mapping[str, Any]", sets=None) -> RunResult:
    """Simulate a scenario (a :class:`Scenario`, a TOML path or a dict)."""
    sc = as_scenario(scenario, sets)
    return RunResult(json.loads(_core.run(sc.text, sc.format, sc.origin, sc.base_dir, list(sc.sets))))
