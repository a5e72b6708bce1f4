"""What a fit is fitted to: a table of measurements, one row per measured configuration.

Each column is either a scenario key (``traffic.rate``, ``nic.itr.interval``: the
configuration the row was measured at, written as ``--set`` takes it, with units) or a
measured result (``cpu_per_frame``, ``latency_ns.p50``, ``irq_per_s``: what pktsim is
fitted to reproduce). A result is written with its unit (``1.2us``, ``45%``, ``1.2Mpps``,
``78kHz``) or as a plain number in its base unit (ns for times, pps, 1/s, a fraction).
A cell left empty is a result not measured in that row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import schema_info
from ..model import parse_quantity


class DataError(ValueError):
    """The measurements cannot be fitted to: names the file, the row or column, the value
    and what was expected."""


@dataclass(frozen=True)
class Metric:
    """A result a fit can take: how to read a measured value and where to find pktsim's."""

    name: str
    unit: str  # the base unit, as printed ("ns", "pps", "1/s", "" for a fraction or count)
    kind: str | None  # parse_quantity's kind for a value with a unit (None: plain numbers only)
    value: Callable[[Mapping[str, Any]], float | None]
    doc: str
    scale: float = 1.0  # parse_quantity's base unit -> this metric's (ps -> ns: 1e-3)


def handled_pps(r: Mapping[str, Any]) -> float:
    """Frames per second the host took in and finished: forwarded or consumed (XDP_DROP,
    an application), over the measurement window."""
    window_s = r["offered_packets"] / r["offered_pps"] if r.get("offered_pps") else 0.0
    done = r.get("forwarded_packets", 0) + r.get("consumed_packets", 0)
    return done / window_s if window_s > 0 else 0.0


def cpu_per_frame_ns(r: Mapping[str, Any]) -> float | None:
    """The cores' busy time per frame handled (ns), as ``perf stat`` or mpstat over a
    measured rate gives it: every core's busy time, less the time the core was taken by
    interference (other work, not the frames')."""
    pps = handled_pps(r)
    if pps <= 0:
        return None
    cores = len(r.get("cpu_per_core") or [1])
    busy = r["cpu_utilization"] - (r.get("cpu_by_activity") or {}).get("interference", 0.0)
    return busy * cores * 1e9 / pps


def wakeups_per_packet(r: Mapping[str, Any]) -> float | None:
    """NAPI threads' (and a sleeping reader's) wake-ups per frame handled, over the window."""
    wakeups = (r.get("io") or {}).get("wakeups")
    window_s = r["offered_packets"] / r["offered_pps"] if r.get("offered_pps") else 0.0
    frames = handled_pps(r) * window_s
    return wakeups / frames if wakeups is not None and frames > 0 else None


def _path(key: str) -> Callable[[Mapping[str, Any]], float | None]:
    parts = key.split(".")

    def get(r: Mapping[str, Any]) -> float | None:
        node: Any = r
        for p in parts:
            if not isinstance(node, Mapping) or p not in node:
                return None
            node = node[p]
        return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None

    return get


_TIME = ("ns", "duration", 1e-3)
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("cpu_per_frame", "ns", "duration", cpu_per_frame_ns, "busy CPU time of all cores per frame handled", 1e-3),
        *(
            Metric(f"latency_ns.{q}", *_TIME[:2], _path(f"latency_ns.{q}"), f"latency, {q}", _TIME[2])
            for q in ("p25", "p50", "p75", "p90", "p99", "p999", "mean", "min", "max")
        ),
        Metric("throughput_pps", "pps", "packetrate", _path("throughput_pps"), "frames forwarded per second"),
        Metric("handled_pps", "pps", "packetrate", handled_pps, "frames forwarded or consumed per second"),
        Metric("loss_ratio", "", "percent", _path("loss_ratio"), "share of the offered frames lost"),
        Metric("cpu_utilization", "", "percent", _path("cpu_utilization"), "busy share of all cores' time"),
        Metric("irq_per_s", "1/s", "frequency", _path("irq_per_s"), "interrupts per second"),
        Metric("irqs_per_packet", "", None, _path("irqs_per_packet"), "interrupts per frame"),
        Metric("polls_per_packet", "", None, _path("polls_per_packet"), "NAPI polls per frame"),
        Metric("wakeups_per_packet", "", None, wakeups_per_packet, "wake-ups of the NAPI threads (or a sleeping reader) per frame"),
        Metric("softirqs_per_packet", "", None, _path("softirqs_per_packet"), "NET_RX softirqs per frame"),
        Metric("packets_per_poll", "", None, _path("packets_per_poll.mean"), "frames per NAPI poll"),
    )
}


def metric(name: str) -> Metric | None:
    """The metric a column names (``latency_ns_p50`` is ``latency_ns.p50``)."""
    if name in METRICS:
        return METRICS[name]
    for m in METRICS.values():
        if m.name.replace(".", "_") == name:
            return m
    return None


def is_scenario_key(key: str) -> bool:
    return schema_info.node(key) is not None


@dataclass
class Measured:
    """A table of measurements, checked: each row's configuration (``x``: the scenario
    keys' texts) and measured results (``y``: metric name -> value in the metric's base
    unit, or None where not measured)."""

    source: str
    x_keys: list[str]
    metrics: list[Metric]
    x: list[list[tuple[str, str]]]
    y: list[list[float | None]]

    def __len__(self) -> int:
        return len(self.x)

    def describe(self, i: int) -> str:
        """Row ``i``'s configuration, as ``traffic.rate=250kpps, nic.itr.interval=50us``."""
        return ", ".join(f"{k}={v}" for k, v in self.x[i]) or f"row {i + 1}"


def _measured_value(m: Metric, text: Any, where: str) -> float | None:
    if text is None or (isinstance(text, float) and math.isnan(text)) or (isinstance(text, str) and not text.strip()):
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        v = float(text)
    else:
        s = str(text).strip()
        try:
            v = float(s)
        except ValueError:
            if m.kind is None:
                raise DataError(f"{where}: {s!r}: expected a plain number ({m.doc})") from None
            try:
                v = parse_quantity(m.kind, s) * m.scale
            except ValueError as e:
                unit = f" with a unit or in {m.unit}" if m.unit else ""
                raise DataError(f"{where}: {s!r}: expected {m.doc}{unit} ({e})") from None
    if not math.isfinite(v):
        raise DataError(f"{where}: {text!r}: expected a finite number ({m.doc})")
    return v


def read(data: Any, x: Sequence[str] | None = None, y: Sequence[str] | None = None, source: str | None = None) -> Measured:
    """The measurements of ``data`` (a CSV path, a pandas DataFrame or a list of dicts):
    ``x`` the scenario keys that vary between rows (default: every column that is a
    scenario key), ``y`` the results to fit (default: every column that is one). A column
    that is neither is refused, naming it."""
    import pandas as pd

    if isinstance(data, (str, Path)):
        source = source or str(data)
        p = Path(data)
        if not p.is_file():
            raise DataError(f"{data}: no such file; expected a CSV of measurements (columns: scenario keys and results)")
        try:
            df = pd.read_csv(p, dtype=str, keep_default_na=False, skipinitialspace=True, comment="#")
        except (OSError, ValueError, UnicodeDecodeError) as e:
            raise DataError(f"{data}: cannot read it as CSV ({e})") from None
    elif isinstance(data, pd.DataFrame):
        df, source = data, source or "<DataFrame>"
    else:
        df, source = pd.DataFrame(list(data)), source or "<rows>"
    cols = [str(c).strip() for c in df.columns]
    df.columns = cols
    if df.empty:
        raise DataError(f"{source}: no rows; expected one row per measured configuration")
    names = ", ".join(METRICS)
    for c in cols:
        if not is_scenario_key(c) and metric(c) is None:
            raise DataError(f"{source}: column {c!r} is neither a scenario key (e.g. traffic.rate) nor a result pktsim fits ({names})")
    x_keys = list(x) if x is not None else [c for c in cols if metric(c) is None]
    for k in x_keys:
        if k not in cols:
            raise DataError(f"--x {k}: no such column in {source}; its columns are {', '.join(cols)}")
        if not is_scenario_key(k):
            raise DataError(f"--x {k}: not a scenario key; expected a key such as traffic.rate")
    y_names = list(y) if y is not None else [c for c in cols if metric(c) is not None]
    for k in y_names:
        if metric(k) is None:
            raise DataError(f"--y {k}: not a result pktsim fits; expected one of {names}")
        if k not in cols:
            raise DataError(f"--y {k}: no such column in {source}; its columns are {', '.join(cols)}")
    if not y_names:
        raise DataError(f"{source}: no measured result to fit; expected a column such as cpu_per_frame or latency_ns.p50 ({names})")
    metrics = [metric(k) for k in y_names]
    rows_x, rows_y = [], []
    for i, rec in enumerate(df.to_dict("records")):
        where = f"{source}, row {i + 1}"
        xs = []
        for k in x_keys:
            v = rec[k]
            text = "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).strip()
            if not text:
                raise DataError(f"{where}: {k} is empty; expected the value the row was measured at")
            xs.append((k, text))
        rows_x.append(xs)
        rows_y.append([_measured_value(m, rec[c], f"{where}, {c}") for m, c in zip(metrics, y_names)])
    for j, m in enumerate(metrics):
        if all(r[j] is None for r in rows_y):
            raise DataError(f"{source}: column {y_names[j]} has no value; expected {m.doc} in at least one row")
    return Measured(source, x_keys, metrics, rows_x, rows_y)
