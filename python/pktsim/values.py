"""Plain values around a run: the values a sweep key takes, and a result as one flat row.

``expand_values`` turns what a user writes after ``--values`` (a range with units, a comma
list, or a Python list) into the texts each point sets; ``flatten`` turns a nested ``run``
result into the columns of a sweep table. Both are used by ``sim`` (one run) and by
``experiments`` (grids of runs), and import nothing of either.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from . import _core
from .model import parse_quantity

# typing is only needed by type checkers (annotations are not evaluated): not imported at
# run time, so that the command starts without it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Kinds tried, in order, when a sweep range is written with units.
_RANGE_KINDS = ("packetrate", "bitrate", "percent", "duration", "frequency", "bytes", "cycles")
_NUM_UNIT = re.compile(r"^\s*([+-]?[0-9_]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(.*?)\s*$")


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict:
    """One level of keys: ``{"latency_ns": {"p99": x}}`` becomes ``{"latency_ns_p99": x}``;
    lists (per-core, per-ring, time series) are dropped. (The Rust extension does it: every sweep
    row and every long-table row goes through here. Nested mappings of any kind are
    flattened, lists and tuples of any kind dropped, keys written as ``f"{prefix}{key}"``.)"""
    return _core.flatten(d, prefix)


def expand_values(spec: str | Sequence[Any], key: str = "") -> list[str]:
    """``"0.1Mpps:2.4Mpps:0.1Mpps"`` -> ``["0.1Mpps", "0.2Mpps", ..., "2.4Mpps"]``;
    ``"1,2,4"`` -> ``["1", "2", "4"]``; a list (or a numpy array) is taken as it is:
    strings stay, plain numbers of a quantity ``key`` are written in its base unit
    (``expand_values(np.linspace(1e6, 2e6, 3), "traffic.rate")`` ->
    ``["1000000pps", "1500000pps", "2000000pps"]``), other values as JSON.

    A range's START, STOP and STEP are quantities of one kind (rate, duration, percent...)
    and the points are written in START's unit; a bad range raises ``ValueError`` saying
    what was expected."""
    if not isinstance(spec, str):
        from .parse import _value_text

        if not hasattr(spec, "__iter__"):
            spec = [spec]
        return [_value_text(v, key) for v in spec]
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
    if not all(math.isfinite(x) for x in (start, stop, step)):
        raise ValueError(f"{spec!r}: START, STOP and STEP must be finite numbers")
    if not step > 0 or stop < start:
        raise ValueError(f"{spec!r}: expected STEP > 0 and STOP >= START")
    count = (stop - start) / step + 1
    if not count <= 100_000:
        shown = f"{count:.3g}" if math.isfinite(count) else "more than 1e308"
        raise ValueError(f"{spec!r}: {shown} points is too many (at most 100,000)")
    n = int(round(count - 1)) + 1
    out = []
    for i in range(n):
        v = (start + i * step) / scale
        text = f"{round(v, 12):g}"
        out.append(f"{text}{unit}")
    return out


def _try(kind: str, text: str):
    """``parse_quantity(kind, text)``, or None when the text is not of that kind."""
    try:
        return parse_quantity(kind, text)
    except ValueError:
        return None


# parse_quantity's kind for each quantity type of the schema (see parse.BASE_UNITS).
_KIND_OF_TYPE = {
    "OfferedRate": "packetrate",
    "BitRate": "bitrate",
    "Bytes": "bytes",
    "Cycles": "cycles",
    "Duration": "duration",
    "TimeSpan": "duration",
    "Frequency": "frequency",
}


def numeric_value(key: str, label: Any) -> float | None:
    """A swept value as a number in base units: pps, bit/s, bytes, seconds, Hz, cycles, or
    the plain number of a count (``cpu.cores = "4"`` -> 4.0). None when the label is not a
    number (an enum such as ``host.strategy.kind``), or an offered rate not written in pps
    (its packet rate depends on the frame size and the link; see
    :func:`pktsim.experiments.grid`)."""
    from .parse import unit_kind

    text = str(label).strip()
    kind = unit_kind(key)
    if kind in _KIND_OF_TYPE:
        v = _try(_KIND_OF_TYPE[kind], text)
        if v is not None and kind in ("Duration", "TimeSpan"):
            v = v / 1e12  # parse_quantity gives picoseconds
        elif v is None and kind != "OfferedRate":
            try:
                v = float(text)  # a bare number some keys take as is
            except ValueError:
                return None
        return v
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) or math.isinf(v) else None
