"""Simulation from Python: ``run`` one scenario, ``sweep`` one key over values.

The engine is the Rust core; these functions carry scenarios to it and shape what comes
back into dicts and pandas DataFrames.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import _core
from .model import parse_quantity
from .scenario import Scenario, as_scenario

# Kinds tried, in order, when a sweep range is written with units.
_RANGE_KINDS = ("packetrate", "bitrate", "percent", "duration", "frequency", "bytes", "cycles")
_NUM_UNIT = re.compile(r"^\s*([+-]?[0-9_]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(.*?)\s*$")


class RunResult(dict):
    """One run's result: a dict with the ``pktsim run --json`` keys."""

    def flat(self) -> dict:
        """One level of keys: ``latency_ns.p99`` becomes ``latency_ns_p99``; lists are dropped."""
        return flatten(self)


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict:
    out: dict = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "_"))
        elif isinstance(v, (list, tuple)):
            continue
        else:
            out[key] = v
    return out


def run(scenario: "Scenario | str | Mapping[str, Any]", sets=None) -> RunResult:
    """Simulate a scenario (a :class:`Scenario`, a TOML path or a dict)."""
    sc = as_scenario(scenario, sets)
    return RunResult(json.loads(_core.run(sc.text, sc.format, sc.origin, sc.base_dir, list(sc.sets))))


def expand_values(spec: "str | Sequence[Any]") -> list[str]:
    """``"0.1Mpps:2.4Mpps:0.1Mpps"`` -> ``["0.1Mpps", "0.2Mpps", ..., "2.4Mpps"]``;
    ``"1,2,4"`` -> ``["1", "2", "4"]``; a list is taken as it is."""
    if not isinstance(spec, str):
        return [v if isinstance(v, str) else json.dumps(v) for v in spec]
    spec = spec.strip()
    if ":" not in spec:
        return [v.strip() for v in spec.split(",") if v.strip()]
    parts = [p.strip() for p in spec.split(":")]
    if len(parts) != 3:
        raise ValueError(f"{spec!r}: expected START:STOP:STEP, e.g. 0.1Mpps:2.4Mpps:0.1Mpps")
    m = _NUM_UNIT.match(parts[0])
    if not m:
        raise ValueError(f"{spec!r}: START {parts[0]!r} is not a number with a unit")
    unit = m.group(2)
    if unit:
        kind = next((k for k in _RANGE_KINDS if _try(k, parts[0]) is not None), None)
        if kind is None:
            raise ValueError(f"{spec!r}: {parts[0]!r} is not a quantity pktsim knows")
        start, stop, step = (_try(kind, p) for p in parts)
        if stop is None or step is None:
            raise ValueError(f"{spec!r}: START, STOP and STEP must be quantities of the same kind ({kind})")
        scale = _try(kind, f"1{unit}")
    else:
        try:
            start, stop, step = (float(p) for p in parts)
        except ValueError:
            raise ValueError(f"{spec!r}: START:STOP:STEP must all be numbers, or all carry units") from None
        scale = 1.0
    if not step > 0 or stop < start:
        raise ValueError(f"{spec!r}: expected STEP > 0 and STOP >= START")
    n = int(round((stop - start) / step)) + 1
    if n > 100_000:
        raise ValueError(f"{spec!r}: {n} points is too many (at most 100,000)")
    out = []
    for i in range(n):
        v = (start + i * step) / scale
        text = f"{round(v, 12):g}"
        out.append(f"{text}{unit}")
    return out


def _try(kind: str, text: str):
    try:
        return parse_quantity(kind, text)
    except ValueError:
        return None


def sweep(
    scenario: "Scenario | str | Mapping[str, Any]",
    param: "str | Mapping[str, Any] | None" = None,
    values: "str | Sequence[Any] | None" = None,
    sets=None,
    progress: "bool | Callable[[int, int, str], None]" = False,
    *,
    replications: int = 1,
    jobs: int | None = None,
    dask: str | None = None,
    output: "str | None" = None,
):
    """Run the scenario at every point of a grid: ``sweep(sc, "traffic.rate", "0.1Mpps:2Mpps:0.1Mpps")``
    or ``sweep(sc, {"traffic.rate": [...], "cpu.cores": [1, 2, 4]}, replications=5)``.

    Returns a pandas DataFrame with one row per (point, replication): the swept keys, the
    replication and its seed, then the flattened ``run`` fields (``latency_ns_p99``, ...).
    Points run on local processes (``jobs``, default all cores) or on a Dask cluster
    (``dask="tcp://host:8786"``); with ``output`` the table is written (Parquet or CSV) and an
    interrupted sweep resumes. ``df.attrs["results"]`` holds the full results."""
    from .experiments import run_grid

    if isinstance(param, Mapping):
        params = dict(param)
    elif param is not None:
        params = {param: values}
    else:
        params = {}
    return run_grid(scenario, params, replications, sets=sets, jobs=jobs, dask=dask, output=output, progress=progress)
