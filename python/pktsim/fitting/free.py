"""The keys a fit may move (``--free host.t_irq,host.t_poll=0ns:2us``): each a quantity of
the scenario, read in a unit the optimiser works in (ns for times, the base unit
otherwise), with its range and its starting value (the scenario's)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import schema_info
from ..model import parse_quantity
from ..tune.knobs import get_path
from .data import DataError

# parse_quantity's kind -> (factor from its base unit to the fit's, the suffix a value is
# written with). Times move in ns, so that a step of the optimiser is a readable number.
KINDS = {
    "duration": (1e-3, "ns"),
    "frequency": (1.0, "Hz"),
    "packetrate": (1.0, "pps"),
    "bitrate": (1.0, "bit/s"),
    "cycles": (1.0, "cycles"),
    "cycles_per_byte": (1.0, "cycles/B"),
}


@dataclass(frozen=True)
class Free:
    """One key the fit moves: values in ``unit`` (``kind``'s base unit x ``scale``)."""

    key: str
    kind: str | None  # None: a plain number
    unit: str
    lo: float
    hi: float
    start: float

    def text(self, v: float, digits: int = 6) -> str:
        """The value as ``--set`` takes it (``digits`` significant)."""
        r = float(f"{v:.{digits}g}")
        num = f"{r:.{digits}g}" if r == 0 or not 1e-3 <= abs(r) < 1e15 else f"{r:f}".rstrip("0").rstrip(".")
        return f"{num}{self.unit}" if self.kind else num

    @property
    def typical(self) -> float:
        """A size for the optimiser's first steps: the start, else a tenth of a bounded
        range, else 100 of the unit (100 ns for a time that starts at 0)."""
        if self.start:
            return abs(self.start)
        if math.isfinite(self.hi) and math.isfinite(self.lo):
            return (self.hi - self.lo) / 10
        return 100.0


def _number(key: str, text: str, where: str) -> tuple[str | None, float]:
    """(kind, value in the fit's unit) of a quantity's text."""
    try:
        return None, float(text)
    except ValueError:
        pass
    for kind, (scale, _) in KINDS.items():
        try:
            return kind, parse_quantity(kind, text) * scale
        except ValueError:
            continue
    raise DataError(f"{where}: {text!r} is not a quantity of {key}; expected a value such as 250ns, 3.3GHz or 1.2Mpps")


def parse(spec: str, data: dict, option: str = "--free") -> Free:
    """``KEY`` or ``KEY=LO:HI`` (with units) against the scenario's data."""
    key, _, rng = (s.strip() for s in spec.partition("="))
    node = schema_info.node(key)
    if node is None:
        raise DataError(f"{option} {key}: not a scenario key; expected a cost or setting such as host.t_irq, host.t_poll or cpu.freq")
    if node.get("type") == "integer" or (isinstance(node.get("type"), list) and "integer" in node["type"]):
        raise DataError(f"{option} {key}: a whole-number key; a fit moves continuous quantities (times, rates, frequencies): sweep or tune {key} instead")
    current = get_path(data, key)
    if isinstance(current, bool) or (current is not None and not isinstance(current, (str, int, float))):
        raise DataError(f"{option} {key}: not a quantity ({current!r}); expected a time, rate or frequency key")
    if current is None:
        raise DataError(f"{option} {key}: the scenario does not set it (and it has no default); give it a value in the scenario first")
    kind, start = _number(key, str(current), f"{option} {key}")
    scale, _ = KINDS.get(kind, (1.0, ""))
    unit = KINDS[kind][1] if kind else ""
    lo, hi = 0.0, math.inf
    mn, mx = node.get("minimum"), node.get("maximum")
    if isinstance(mn, (int, float)):
        lo = float(mn)
    if isinstance(mx, (int, float)):
        hi = float(mx)
    if rng:
        a, sep, b = rng.partition(":")
        if not sep:
            raise DataError(f"{option} {spec}: expected KEY or KEY=LO:HI (e.g. host.t_irq=0ns:5us)")
        lo = _bound(key, a, kind, scale, spec, option, lo)
        hi = _bound(key, b, kind, scale, spec, option, hi)
        if not lo < hi:
            raise DataError(f"{option} {spec}: the range is empty; expected LO below HI")
    start = min(max(start, lo), hi)
    return Free(key, kind, unit, lo, hi, start)


def _bound(key: str, text: str, kind: str | None, scale: float, spec: str, option: str, default: float) -> float:
    text = text.strip()
    if not text:
        return default
    try:
        v = float(text)
    except ValueError:
        if kind is None:
            raise DataError(f"{option} {spec}: {text!r}: expected a plain number for {key}") from None
        try:
            v = parse_quantity(kind, text) * scale
        except ValueError as e:
            raise DataError(f"{option} {spec}: {text!r}: {e}") from None
    if not math.isfinite(v) or v < 0:
        raise DataError(f"{option} {spec}: {text!r}: expected a finite value of at least 0")
    return v
