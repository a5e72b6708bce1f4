"""``DIR/tune.json`` as ``pktsim testbed tune-check`` reads it: checked key by key (what it
cannot do is :class:`Refused`, naming the file, the key path, the value and what was
expected), and the metrics it names (:data:`METRICS`: each key of ``pktsim run --json``
with its testbed counterpart)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..tune.goals import ALIASES  # `pktsim tune`'s short names
from . import runner
from .errors import TestbedError


class Refused(TestbedError):
    """tune.json or the command line asks for what tune-check cannot do (exit 2, as a usage error)."""


# ------------------------------------------------------------------------------ tune.json


def _show(v) -> str:
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad(file: Path, key: str, value, expected: str) -> Refused:
    return Refused(f"{file}: {key} = {_show(value)}: expected {expected}")


def _missing(file: Path, key: str, expected: str) -> Refused:
    return Refused(f"{file}: {key} is missing: expected {expected}")


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def lookup(obj: dict, dotted: str, missing=None):
    """``obj["latency_ns"]["p99"]`` for ``"latency_ns.p99"`` (the whole key first: some
    keys of a run's JSON contain no dot but a path does); ``missing`` when absent."""
    if dotted in obj:
        return obj[dotted]
    cur = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return missing
        cur = cur[part]
    return cur


def load(directory: str | Path) -> dict:
    """``DIR/tune.json``, checked: every key tune-check uses, with its type and range.
    Raises :class:`Refused` naming the file, the key path, the value and what was expected."""
    d = Path(directory)
    f = d / "tune.json"
    if not d.is_dir():
        raise Refused(f"{d}: not a directory; expected the directory `pktsim tune ... -o DIR` wrote (with DIR/tune.json)")
    try:
        text = f.read_text()
    except FileNotFoundError:
        raise Refused(f"{f}: no such file; expected the tune.json `pktsim tune ... -o {d}` writes") from None
    except (OSError, UnicodeDecodeError) as e:
        raise Refused(f"{f}: cannot read it ({getattr(e, 'strerror', None) or e}); expected the tune.json of `pktsim tune -o`") from None
    try:
        t = json.loads(text)
    except ValueError as e:
        raise Refused(f"{f}: not JSON ({e}); expected the tune.json of `pktsim tune -o`") from None
    if not isinstance(t, dict):
        raise Refused(f"{f}: the top level is {type(t).__name__}; expected a JSON object (the tune.json of `pktsim tune -o`)")

    def need(key: str, ok, expected: str, obj=None, path=None):
        obj = t if obj is None else obj
        path = path or key
        if key not in obj:
            raise _missing(f, path, expected)
        if not ok(obj[key]):
            raise _bad(f, path, obj[key], expected)
        return obj[key]

    need("scenario", lambda v: isinstance(v, str) and v, "the path of the scenario the tune ran (a text)")
    if t.get("load_pps") is None and "load_pps" in t and isinstance(t.get("current"), dict) and isinstance(t["current"].get("predicted"), dict):
        t["load_pps"] = t["current"]["predicted"].get("offered_pps")  # the tune ran at the scenario's own rate
    need("load_pps", lambda v: _num(v) and v > 0, "the target load in packets per second, a number above 0")
    if "sets" in t:
        need("sets", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), 'a list of "KEY=VALUE" texts')
    objectives = need("objectives", lambda v: isinstance(v, list) and v, "a non-empty list of {metric, direction}")
    for i, o in enumerate(objectives):
        p = f"objectives[{i}]"
        if not isinstance(o, dict):
            raise _bad(f, p, o, 'an object {"metric": ..., "direction": "minimize" | "maximize"}')
        o["metric"] = _metric(
            f, need("metric", lambda v: isinstance(v, str), "a metric key of `pktsim run --json`, e.g. cpu_utilization", o, f"{p}.metric"), f"{p}.metric"
        )
        need("direction", lambda v: v in ("minimize", "maximize"), '"minimize" or "maximize"', o, f"{p}.direction")
    constraints = need("constraints", lambda v: isinstance(v, list), "a list of {metric, op, bound} (may be empty)") if "constraints" in t else []
    t.setdefault("constraints", constraints)
    for i, c in enumerate(constraints):
        p = f"constraints[{i}]"
        if not isinstance(c, dict):
            raise _bad(f, p, c, 'an object {"metric": ..., "op": "<=", "bound": ...}')
        c["metric"] = _metric(
            f, need("metric", lambda v: isinstance(v, str), "a metric key of `pktsim run --json`, e.g. latency_ns.p99", c, f"{p}.metric"), f"{p}.metric"
        )
        need("op", lambda v: v in OPS, " or ".join(f'"{o}"' for o in OPS), c, f"{p}.op")
        need("bound", _num, "a finite number in the metric's base unit (ns, pps, a fraction)", c, f"{p}.bound")
    metrics = [o["metric"] for o in objectives] + [c["metric"] for c in constraints]
    if "recommended" in t and t["recommended"] is None:
        raise Refused(f"{f}: recommended = null: the tune found no configuration that meets its constraints; nothing to check")
    for side in ("current", "recommended"):
        s = need(side, lambda v: isinstance(v, dict), "an object {sets, predicted}")
        sets = need("sets", lambda v: isinstance(v, dict), 'an object {"KEY": "VALUE", ...} of `pktsim run --set` texts', s, f"{side}.sets")
        for k, v in sets.items():
            if not (isinstance(v, str) or _num(v) or isinstance(v, bool)):
                raise _bad(f, f"{side}.sets.{k}", v, 'a value as `pktsim run --set` takes it, e.g. "50us" or "2"')
            sets[k] = _text(v)
        pred = need("predicted", lambda v: isinstance(v, dict), "the `pktsim run --json` object at load_pps", s, f"{side}.predicted")
        for m in metrics:
            for key in METRICS[m].needs:
                v = lookup(pred, key, _ABSENT)
                if v is _ABSENT:
                    raise _missing(f, f"{side}.predicted.{key}", f"a number (the model's {key} at load_pps, for {m})")
                if not _num(v):
                    raise _bad(f, f"{side}.predicted.{key}", v, f"a finite number (the model's {key} at load_pps)")
    t["_file"] = str(f)
    return t


_ABSENT = object()


def _text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else f"{v:g}"


def _metric(f: Path, m: str, path: str) -> str:
    m = ALIASES.get(m, m)
    if m not in METRICS:
        raise _bad(f, path, m, f"a metric the testbed measures: {', '.join(METRICS)} (or {', '.join(ALIASES)})")
    return m


OPS = {"<=": lambda a, b: a <= b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b, ">": lambda a, b: a > b}


# ------------------------------------------------------------------------------ metrics


@dataclass(frozen=True)
class Metric:
    """A metric of ``pktsim run --json`` and its testbed counterpart: ``label`` and
    ``unit`` for the table, ``scale`` from the base unit to it, ``needs`` (keys of the
    run's JSON the prediction reads), ``predicted(run)`` and ``measured(point)`` in base
    units (None where not measured)."""

    label: str
    unit: str
    scale: float
    needs: tuple
    predicted: object
    measured: object


def _own_cpu(r: dict) -> float:
    """The dut CPU's share the model's packet work used: ``cpu_utilization`` less the
    time the CPU spent elsewhere (``cpu_by_activity.interference``)."""
    return r["cpu_utilization"] - (lookup(r, "cpu_by_activity.interference") or 0.0)


def _own_cores(r: dict) -> float:
    """``cpu_cores`` (the sum of ``cpu_per_core``) less the interference of every core."""
    per_core = r.get("cpu_per_core")
    if isinstance(per_core, list) and per_core:
        return float(sum(per_core)) - len(per_core) * (lookup(r, "cpu_by_activity.interference") or 0.0)
    return _own_cpu(r)


def _inv(x):
    return 1 / x if x else None


def _wakeups(r: dict) -> float | None:
    """Wake-ups of the NAPI thread per forwarded frame in a run's JSON (veth's threaded NAPI
    reports ``io.wakeups``, a device's NAPI thread ``io.thread_wakeups``)."""
    io = r.get("io") or {}
    w = io.get("wakeups", io.get("thread_wakeups"))
    fwd = r.get("forwarded_packets")
    return w / fwd if w is not None and fwd else None


METRICS = {
    "cpu_utilization": Metric("dut CPU share", "%", 100, ("cpu_utilization",), _own_cpu, lambda p: p["dut_utilization"]),
    # `pktsim tune`'s derived figures: the cores' worth of CPU, and that CPU per offered packet.
    "cpu_cores": Metric("dut CPU", "cores", 1, ("cpu_utilization",), _own_cores, lambda p: p["dut_utilization"]),
    "cpu_ns_per_packet": Metric(
        "dut CPU per offered frame",
        "us",
        1e-3,
        ("cpu_utilization", "offered_pps"),
        lambda r: _own_cores(r) * 1e9 / r["offered_pps"] if r["offered_pps"] else None,
        lambda p: p["dut_utilization"] * 1e9 / p["offered_pps"] if p["offered_pps"] else None,
    ),
    "throughput_pps": Metric("forwarded", "kpps", 1e-3, ("throughput_pps",), lambda r: r["throughput_pps"], lambda p: p["forwarded_pps"]),
    "loss_ratio": Metric("loss", "%", 100, ("loss_ratio",), lambda r: r["loss_ratio"], lambda p: p["loss_ratio"]),
    **{
        f"latency_ns.{q}": Metric(
            f"latency {q.replace('p999', 'p99.9')}",
            "us",
            1e-3,
            (f"latency_ns.{q}",),
            (lambda pct: lambda r: lookup(r, f"latency_ns.{pct}"))(q),
            (lambda pct: lambda p: p["latency_ns"][pct])(q),
        )
        for q in runner.PERCENTILES
    },
    "polls_per_packet": Metric("polls per frame", "", 1, ("polls_per_packet",), lambda r: r["polls_per_packet"], lambda p: _inv(p["packets_per_poll"])),
    "packets_per_poll.mean": Metric(
        "frames per poll", "frames", 1, ("packets_per_poll.mean",), lambda r: lookup(r, "packets_per_poll.mean"), lambda p: p["packets_per_poll"]
    ),
    "irq_per_s": Metric(
        "NAPI thread wake-ups per second (veth: no IRQ)",
        "k/s",
        1e-3,
        ("forwarded_packets", "throughput_pps"),
        lambda r: _wakeups(r) * r["throughput_pps"] if _wakeups(r) is not None else None,
        lambda p: p["forwarded_pps"] / p["packets_per_wakeup"] if p["packets_per_wakeup"] else None,
    ),
}


# Shown for every check, after the objectives and constraints: what the dial does to the
# dut's work (``derived``: from the run's cpu_utilization and throughput, and its counts).
CONTEXT = {
    "cpu_per_frame": Metric(
        "dut CPU per frame",
        "us",
        1e-3,
        ("cpu_utilization", "throughput_pps"),
        lambda r: _own_cpu(r) * 1e9 / r["throughput_pps"] if r["throughput_pps"] else None,
        lambda p: p["dut_ns_per_packet"],
    ),
    "wakeups_per_frame": Metric("wake-ups per frame", "", 1, (), _wakeups, lambda p: _inv(p["packets_per_wakeup"])),
    "packets_per_poll.mean": METRICS["packets_per_poll.mean"],
}
