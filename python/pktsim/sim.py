"""Simulation from Python: ``run`` one scenario.

The engine is the Rust core; this module carries a scenario to it and shapes what comes
back into a dict. Grids of runs (``sweep``) are in :mod:`pktsim.experiments`, which builds
on this module (never the other way round).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from . import _core
from .scenario import Scenario, _normalise_sets, as_scenario
from .values import expand_values, flatten

__all__ = ["RunResult", "run", "run_text", "expand_values", "flatten"]


class RunResult(dict):
    """One run's result: a dict with the ``pktsim run --json`` keys."""

    def flat(self) -> dict:
        """One level of keys: ``latency_ns.p99`` becomes ``latency_ns_p99``; lists are dropped."""
        return flatten(self)


def run(scenario: "Scenario | str | Mapping[str, Any]", sets=None) -> RunResult:
    """Simulate a scenario (a :class:`Scenario`, a TOML path or a dict)."""
    sc = as_scenario(scenario, sets)
    return run_text(sc.text, sc.format, sc.origin, sc.base_dir, sc.sets)


def run_text(text: str, fmt: str, origin: str, base_dir: str, sets=()) -> RunResult:
    """Simulate scenario text (``fmt`` "toml" or "json") with overrides (``["a.b=1"]``,
    ``[("a.b", 1)]`` or ``{"a.b": 1}``, applied as :meth:`Scenario.with_sets` applies them);
    relative profile paths are read from ``base_dir``, errors name ``origin``.

    The core parses and validates the text once, here, and an invalid scenario raises
    :class:`~pktsim.errors.ScenarioError` as :func:`run` would. A sweep's points take this
    path so that each one is parsed by the run alone, not first into a :class:`Scenario`."""
    return RunResult(json.loads(_core.run(text, fmt, origin, base_dir, _normalise_sets(sets))))
