"""What a tune optimises and must respect: objectives (``--minimize cpu``) and constraints
(``--subject-to "latency_ns.p99 <= 50us"``) over the figures of ``pktsim run --json``.

A metric is a dotted key of that object (``latency_ns.p99``, ``loss_ratio``,
``cpu_by_activity.irq``; for a chain, end to end, or a node's: ``nodes.1.latency_ns.p99``)
or a derived figure: ``cpu_cores`` (the cores' worth of CPU the
node keeps busy, the sum of ``cpu_per_core``; comparable between configurations with
different numbers of cores) and ``cpu_ns_per_packet`` (that CPU time per offered packet).
Short names: ``cpu`` = ``cpu_cores``, ``p50``/``p99``/``p999`` = ``latency_ns.pNN``,
``loss`` = ``loss_ratio``, ``throughput`` = ``throughput_pps``.

A bound is written with the metric's unit: ``50us`` for a latency (plain numbers in ns, as
the metric is), ``1Mpps`` for a rate, ``1e-4`` or ``0.01%`` for a ratio.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .. import _core

ALIASES = {
    "cpu": "cpu_cores",
    "latency": "latency_ns.p99",
    "p50": "latency_ns.p50",
    "p99": "latency_ns.p99",
    "p999": "latency_ns.p999",
    "loss": "loss_ratio",
    "throughput": "throughput_pps",
}


def _cpu_cores(r: Mapping) -> float:
    per_core = r.get("cpu_per_core")
    if isinstance(per_core, list) and per_core:
        return float(sum(per_core))
    return float(r["cpu_utilization"])


DERIVED = {
    "cpu_cores": _cpu_cores,
    "cpu_ns_per_packet": lambda r: _cpu_cores(r) * 1e9 / r["offered_pps"] if r.get("offered_pps") else math.nan,
}

UNITS = {"cpu_cores": "cores", "cpu_ns_per_packet": "ns"}


class GoalError(ValueError):
    pass


def canonical(name: str) -> str:
    return ALIASES.get(name.strip(), name.strip())


def value(result: Mapping, metric: str) -> float:
    """The metric's value in a run's result (NaN when the run has none, e.g. no latency)."""
    if metric in DERIVED:
        return float(DERIVED[metric](result))
    node = result
    for part in metric.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]  # a chain's node: nodes.1.latency_ns.p99
            continue
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(metric)
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise KeyError(metric)
    return float(node) if node is not None else math.nan


def check_metric(metric: str, sample: Mapping, what: str) -> None:
    """Raise a clear error when ``metric`` is not a number in a run's result."""
    try:
        value(sample, metric)
    except (KeyError, TypeError):
        numeric = sorted(_numeric_keys(sample)) + sorted(DERIVED)
        raise GoalError(
            f"{what}: {metric!r} is not a figure of pktsim run --json; expected one of "
            + ", ".join(numeric)
            + " (or "
            + ", ".join(f"{k} = {v}" for k, v in ALIASES.items())
            + ")"
        ) from None


def _numeric_keys(d: Mapping, prefix: str = "") -> list:
    out = []
    for k, v in d.items():
        if isinstance(v, Mapping):
            out += _numeric_keys(v, f"{prefix}{k}.")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(prefix + k)
    return out


def unit(metric: str) -> str:
    """The metric's unit, for tables and axes."""
    if metric in UNITS:
        return UNITS[metric]
    if metric.startswith("latency_ns") or metric.endswith("_ns"):
        return "ns"
    if metric.endswith("_pps"):
        return "pps"
    if metric.endswith("_bps"):
        return "bit/s"
    if metric.endswith("_per_s"):
        return "1/s"
    return ""


def parse_bound(metric: str, text: str, what: str) -> float:
    """A bound in the metric's own unit."""
    t = text.strip()
    try:
        v = float(t)
    except ValueError:
        v = None
    if v is not None:
        if not math.isfinite(v):
            raise GoalError(f"{what}: bound {text!r} for {metric}: expected a finite number")
        return v
    u = unit(metric)
    kinds = {
        "ns": ("duration", 1e-3),
        "pps": ("packetrate", 1.0),
        "bit/s": ("bitrate", 1.0),
        "1/s": ("frequency", 1.0),
        "": ("percent", 1.0),
        "cores": ("percent", 1.0),
    }
    kind, scale = kinds.get(u, ("percent", 1.0))
    try:
        return _core.parse_quantity(kind, t) * scale
    except ValueError:
        example = {"ns": "50us", "pps": "1Mpps", "bit/s": "10Gbit/s", "1/s": "10kHz"}.get(u, "1e-4 or 0.01%")
        raise GoalError(f"{what}: bound {text!r} for {metric}: expected a number in {u or 'its unit'} or a value with a unit, e.g. {example}") from None


@dataclass(frozen=True)
class Objective:
    metric: str
    direction: str  # "minimize" or "maximize"

    def as_json(self) -> dict:
        return {"metric": self.metric, "direction": self.direction}


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str
    bound: float
    text: str

    def violation(self, v: float) -> float:
        """How far ``v`` is outside the bound, relative to it: <= 0 when met (NaN: not met)."""
        if v != v:
            return math.inf
        scale = abs(self.bound) if self.bound else 1.0
        d = (v - self.bound) if self.op in ("<=", "<") else (self.bound - v)
        if self.op in ("<", ">") and d == 0:
            return 1e-12
        return d / scale

    def as_json(self) -> dict:
        return {"metric": self.metric, "op": self.op, "bound": self.bound, "text": self.text}


_CONSTRAINT = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(<=|>=|<|>)\s*(\S.*?)\s*$")


def parse_constraint(text: str) -> Constraint:
    m = _CONSTRAINT.match(text)
    if not m:
        raise GoalError(f'--subject-to {text!r}: expected METRIC OP BOUND with OP one of <=, <, >=, >, e.g. "latency_ns.p99 <= 50us"')
    metric = canonical(m.group(1))
    return Constraint(metric, m.group(2), parse_bound(metric, m.group(3), f"--subject-to {text!r}"), text.strip())


def objectives(minimize, maximize) -> list:
    out = [Objective(canonical(m), "minimize") for m in (minimize or [])]
    out += [Objective(canonical(m), "maximize") for m in (maximize or [])]
    if not out:
        raise GoalError("tune: nothing to optimise: give --minimize METRIC or --maximize METRIC (e.g. --minimize cpu)")
    seen = set()
    for o in out:
        if o.metric in seen:
            raise GoalError(f"tune: {o.metric} is an objective twice; expected each metric once")
        seen.add(o.metric)
    return out
