"""``pktsim testbed tune-check DIR``: apply what ``pktsim tune`` recommends to the kernel
and measure whether it improves what the model said it would.

1. :func:`load` reads and checks ``DIR/tune.json`` (the target load, the objectives and
   constraints, the recommended and the current sets with the model's predictions).
2. :func:`plan` maps the sets that differ between current and recommended onto the
   testbed's dut for the chosen path (:data:`KNOBS`): the ingress veth's
   ``napi_defer_hard_irqs`` and ``gro_flush_timeout`` (sysfs), the global sysctls
   ``net.core.netdev_budget``, ``netdev_budget_usecs`` and ``gro_normal_batch``, and on
   ``--path afxdp`` the forwarder's batch size. A key the path cannot apply is refused
   (:class:`Refused`, exit 2) with what the path can apply.
3. :func:`measure` measures the dut at the target load, current and tuned alternating
   (current, tuned, current, tuned, ...) for a few rounds, each a ``runner.repeat``; every
   knob gets back the value it had before on every way out (the sysctls are also written
   into the testbed's lock record, so that the next run restores them after a SIGKILL).
4. :func:`compare` holds the measured improvement of each objective and constraint
   metric against the predicted one: ``improvement = (tuned - current) / current``
   (signed), ``ratio = measured / predicted improvement``; the goal is the measured
   improvement within 25% of the predicted one (``0.75 <= ratio <= 1.25``).

Metrics (:data:`METRICS`) are keys of the ``pktsim run --json`` object, each with its
testbed counterpart. ``cpu_utilization`` is the dut CPU's share spent by the NAPI thread
(and the forwarder on ``afxdp``); the model's counterpart leaves out
``cpu_by_activity.interference`` (time the CPU spent elsewhere, which the thread's
runtime does not contain). veth has no interrupts: ``irq_per_s`` is held against the NAPI
thread's wake-ups per second.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..reproduce.rows import row, summary
from ..tune.knobs import Param, param
from . import runner
from .errors import TestbedError

SOURCE = "testbed"
GOAL = 0.25  # the measured improvement within this share of the predicted one
PATHS = ("stack", "defer", "afxdp")
ROUNDS = (3, 2)  # (full, quick) rounds of current + tuned
# Measured below this share of the dut's capacity: a load above it is refused (see --load-share).
MAX_SHARE = 0.98


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
# `pktsim tune`'s short names.
ALIASES = {
    "cpu": "cpu_cores",
    "latency": "latency_ns.p99",
    "p50": "latency_ns.p50",
    "p99": "latency_ns.p99",
    "p999": "latency_ns.p999",
    "loss": "loss_ratio",
    "throughput": "throughput_pps",
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


# ------------------------------------------------------------------------------ knobs


@dataclass(frozen=True)
class DutKnob:
    """A knob's key as the testbed's dut applies it. ``param`` is the key's
    :class:`pktsim.tune.knobs.Param`: the scenario key and its Linux name (the file, sysctl
    or option written), the tune's own Param where a knob declares the key, one of its own
    here for a key no knob turns or the forwarder's option; ``where`` is
    ``sysfs`` (a file of the dut's ingress veth), ``sysctl`` (a global one under /proc/sys),
    ``forwarder`` (the AF_XDP forwarder's option) or ``fixed``; ``parse`` turns the set's
    text into the integer written (raises ValueError with what was expected)."""

    param: Param
    where: str
    parse: object
    doc: str

    @property
    def key(self) -> str:
        return self.param.key

    @property
    def name(self) -> str:
        """The file, sysctl or option: the key's Linux name."""
        return self.param.linux


def _int(lo: int, hi: int):
    def parse(text: str) -> int:
        try:
            v = int(str(text).strip().replace("_", ""))
        except ValueError:
            raise ValueError(f"a whole number from {lo} to {hi}") from None
        if not lo <= v <= hi:
            raise ValueError(f"a whole number from {lo} to {hi}")
        return v

    return parse


def _duration(unit_ps: int, hi_ps: int, what: str):
    def parse(text: str) -> int:
        from ..model import parse_quantity

        try:
            ps = parse_quantity("duration", str(text))
        except ValueError:
            raise ValueError(f'a time with its unit, e.g. "50us" ({what})') from None
        if not 0 <= ps <= hi_ps:
            raise ValueError(f"a time from 0 to {hi_ps / 1e12:g} s ({what})")
        return int(round(ps / unit_ps))

    return parse


def _threaded(text: str) -> int:
    if str(text).strip().lower() in ("true", "1"):
        return 1
    raise ValueError("true: the path's NAPI is always threaded (its kernel thread is the one measured)")


_NAPI = (
    DutKnob(param("nic.napi.defer_hard_irqs"), "sysfs", _int(0, 2**31 - 1), "/sys/class/net/tb-dut0/napi_defer_hard_irqs"),
    DutKnob(param("nic.napi.gro_flush_timeout"), "sysfs", _duration(1000, 10**12, "written in ns"), "/sys/class/net/tb-dut0/gro_flush_timeout"),
    DutKnob(Param("nic.napi.threaded", (), linux="threaded"), "fixed", _threaded, "always on (/sys/class/net/tb-dut0/threaded = 1)"),
    DutKnob(param("host.budget"), "sysctl", _int(1, 2**31 - 1), "sysctl net.core.netdev_budget (global; threaded NAPI does not use it)"),
    DutKnob(
        param("host.budget_time"),
        "sysctl",
        _duration(10**6, 10**12, "written in whole us"),
        "sysctl net.core.netdev_budget_usecs (global; threaded NAPI does not use it)",
    ),
    DutKnob(Param("host.gro_normal_batch", (), linux="net.core.gro_normal_batch"), "sysctl", _int(1, 2**31 - 1), "sysctl net.core.gro_normal_batch (global)"),
)
KNOBS = {
    "stack": {k.key: k for k in _NAPI},
    "defer": {k.key: k for k in _NAPI},
    "afxdp": {k.key: k for k in _NAPI}
    | {
        "host.af_xdp.batch": DutKnob(
            Param("host.af_xdp.batch", (), linux="--batch"), "forwarder", _int(1, 256), "pktsim-tb xskfwd --batch (frames per batch, 1 to 256)"
        )
    },
}
# Why a key that is not applicable is not, where there is more to say than "no such knob".
NOT_ON_VETH = {
    "nic.rx_ring": "veth's ring is fixed (VETH_RING_SIZE = 256 entries)",
    "nic.tx_ring": "veth has no tx ring to size",
    "nic.itr": "veth has no interrupt moderation (no interrupts)",
    "nic.napi.irq_suspend_timeout": "it acts only with epoll busy polling, which the path does not run",
    "host.weight": "veth's NAPI weight is fixed (NAPI_POLL_WEIGHT = 64)",
    "host.af_xdp": "only --path afxdp runs an AF_XDP forwarder",
}
AFXDP_BATCH = 64  # the model's default host.af_xdp.batch: the forwarder's batch when the sets do not give one


@dataclass
class Change:
    key: str
    knob: DutKnob
    current: int | None  # None: as the dut has it before the run
    tuned: int | None
    current_text: str | None
    tuned_text: str | None


def plan(tune: dict, path: str) -> list[Change]:
    """The knobs to turn between current and tuned (keys whose values differ), each
    checked; raises :class:`Refused` for a key the path cannot apply, naming it and
    listing what the path can."""
    if path not in KNOBS:
        raise Refused(f"--path {path}: expected one of {', '.join(KNOBS)}")
    knobs = KNOBS[path]
    cur, rec = tune["current"]["sets"], tune["recommended"]["sets"]
    f = tune.get("_file", "tune.json")
    out = []
    for key in sorted(set(cur) | set(rec), key=lambda k: (list(rec) + list(cur)).index(k)):
        a, b = cur.get(key), rec.get(key)
        if a == b:
            continue  # the same in both: nothing to apply
        knob = knobs.get(key)
        if knob is None:
            why = next((w for p, w in NOT_ON_VETH.items() if key == p or key.startswith(p + ".")), None)
            raise Refused(
                f"{f}: {key} = {_show(a)} (current), {_show(b)} (recommended): the {path} path cannot apply it"
                + (f" ({why})" if why else "")
                + f"; it can apply {', '.join(knobs)}"
            )
        vals = []
        for side, text in (("current", a), ("recommended", b)):
            if text is None:
                vals.append(None)
                continue
            try:
                vals.append(knob.parse(text))
            except ValueError as e:
                raise _bad(Path(f), f"{side}.sets.{key}", text, f"{e} ({knob.doc})") from None
        out.append(Change(key, knob, vals[0], vals[1], a, b))
    return out


def batch_of(changes: list[Change], side: str, tune: dict) -> int:
    """The AF_XDP forwarder's batch size for one side (its set, else the model's default)."""
    for c in changes:
        if c.key == "host.af_xdp.batch":
            v = c.current if side == "current" else c.tuned
            if v is not None:
                return v
    v = tune[side]["sets"].get("host.af_xdp.batch")
    return KNOBS["afxdp"]["host.af_xdp.batch"].parse(v) if v is not None else AFXDP_BATCH


# ------------------------------------------------------------------------------ applying


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_knob(knob: DutKnob) -> int | None:
    """The knob's value on the testbed now (None for the forwarder's, which has none)."""
    from .topology import DUT, DUT_IN, _sh

    if knob.where == "sysfs":
        return int(_sh("cat", f"/sys/class/net/{DUT_IN}/{knob.name}", ns=DUT).strip())
    if knob.where == "sysctl":
        try:
            return int(_sysctl_path(knob.name).read_text().split()[0])
        except (OSError, ValueError, IndexError) as e:
            raise TestbedError(f"cannot read sysctl {knob.name}: {e}") from None
    return None


def write_knob(knob: DutKnob, value: int) -> None:
    from .topology import DUT, DUT_IN, _sh

    if knob.where == "sysfs":
        _sh("sh", "-c", f"echo {int(value)} > /sys/class/net/{DUT_IN}/{knob.name}", ns=DUT)
    elif knob.where == "sysctl":
        try:
            _sysctl_path(knob.name).write_text(f"{int(value)}\n")
        except OSError as e:
            raise TestbedError(f"cannot set sysctl {knob.name} = {value}: {e.strerror or e}") from None


class Applied:
    """The knobs of a check on the testbed: :meth:`set` puts one side's values in place,
    :meth:`restore` (always called, with signals held) the values found before."""

    def __init__(self, topo, changes: list[Change]):
        self.topo = topo
        self.changes = [c for c in changes if c.knob.where in ("sysfs", "sysctl")]
        self.before = {c.key: read_knob(c.knob) for c in self.changes}
        sysctls = {c.knob.name: self.before[c.key] for c in self.changes if c.knob.where == "sysctl"}
        if sysctls and getattr(topo, "_lock", None) is not None:
            # A run killed before it restores them: the next run's reap() writes them back.
            topo._lock.write(sysctls=sysctls)

    def set(self, side: str) -> None:
        for c in self.changes:
            v = c.current if side == "current" else c.tuned
            write_knob(c.knob, self.before[c.key] if v is None else v)

    def restore(self) -> None:
        from .topology import _signals_held

        with _signals_held():
            for c in self.changes:
                try:
                    write_knob(c.knob, self.before[c.key])
                except TestbedError:
                    pass
            if getattr(self.topo, "_lock", None) is not None and any(c.knob.where == "sysctl" for c in self.changes):
                self.topo._lock.write(sysctls={})


# ------------------------------------------------------------------------------ measuring


def model_capacity(tune: dict) -> float:
    """The model's saturation rate (pps) for the tune's scenario and base sets with the
    current sets: the throughput when offered five times the target load."""
    from .. import sim
    from ..scenario import Scenario

    try:
        sc = Scenario.load(tune["scenario"], [tuple(s.split("=", 1)) for s in tune.get("sets", [])])
        sc = sc.with_sets({**tune["current"]["sets"], "traffic.rate": f"{5 * tune['load_pps']:.3f}pps"})
    except (OSError, ValueError) as e:
        raise Refused(f"{tune.get('_file', 'tune.json')}: scenario = {_show(tune['scenario'])}: cannot run it for --load-share ({e})") from None
    return float(sim.run(sc)["throughput_pps"])


def measure(topo, path: str, tune: dict, changes: list[Change], rounds: int, duration_s: float, reps: int, load_share: bool = False, progress=None) -> dict:
    """Capacity, then ``rounds`` x (current, tuned) at the target load; every knob back to
    its value before on every way out."""
    from . import afxdp

    applied = Applied(topo, changes)
    try:
        applied.set("current")
        batches = {s: batch_of(changes, s, tune) for s in ("current", "tuned")} if path == "afxdp" else {}
        cap = _capacity(topo, path, batches.get("current"))
        cap_pps = cap["forwarded_pps"]
        model_cap = model_capacity(tune) if load_share else None
        rate = tune["load_pps"] / model_cap * cap_pps if load_share else tune["load_pps"]
        if rate > MAX_SHARE * cap_pps:
            how = (
                (
                    f"{tune['load_pps'] / 1e3:.1f} kpps is {100 * tune['load_pps'] / model_cap:.0f}% of the model's capacity "
                    f"{model_cap / 1e3:.1f} kpps, {rate / 1e3:.1f} kpps here"
                )
                if load_share
                else f"the target load {tune['load_pps'] / 1e3:.1f} kpps"
            )
            raise Refused(
                f"{how}: above {100 * MAX_SHARE:.0f}% of the dut's measured capacity {cap_pps / 1e3:.1f} kpps (current settings); "
                + ("" if load_share else "--load-share measures at the same share of the dut's capacity as the target is of the model's")
            )
        plan_ = [(k, side) for k in range(rounds) for side in ("current", "tuned")]
        out = {"current": [], "tuned": []}
        for i, (k, side) in enumerate(plan_):
            if progress:
                progress(i, len(plan_), f"round {k + 1} of {rounds}: {side}, {rate / 1e3:.1f} kpps")
            applied.set(side)
            run_id = 1000 + 10 * i
            if path == "afxdp":
                with afxdp.forwarder(topo, batches[side], "sleep", reps * (duration_s + 3) + 10, loops=topo.xdp_loops) as fwd:
                    runs = [runner.measure(topo, rate, duration_s, run_id=run_id + j, app_pid=fwd.pid) for j in range(reps)]
                r = runner.summarize(runs, rate, duration_s)
                r["forwarder"] = fwd.result
            else:
                r = runner.repeat(topo, rate, duration_s, reps, run_id=run_id)
            r["round"] = k
            out[side].append(r)
    finally:
        applied.restore()
    return {
        "capacity_pps": cap_pps,
        "capacity_probe": cap,
        "model_capacity_pps": model_cap,
        "load_share": load_share,
        "rate_pps": rate,
        "before": applied.before,
        "batches": batches,
        **out,
    }


def _capacity(topo, path: str, batch: int | None) -> dict:
    if path != "afxdp":
        return runner.capacity(topo)
    from . import afxdp

    with afxdp.forwarder(topo, batch, "sleep", 20, loops=topo.xdp_loops) as fwd:
        runner.measure(topo, None, runner.WARMUP_S, run_id=998, app_pid=fwd.pid)
        return runner.measure(topo, None, 1.0, run_id=999, app_pid=fwd.pid)


# ------------------------------------------------------------------------------ comparing

# Two-sided 95% Student t quantiles by degrees of freedom (for more than 30, 1.96 is close enough).
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    25: 2.060,
    30: 2.042,
}


def t95(df: int) -> float:
    keys = [k for k in _T95 if k <= df]
    return _T95[max(keys)] if df <= 30 else 1.96


def stats(values: list[float]) -> dict:
    """Mean, the 95% confidence interval's half-width (None for one value), min and max."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "ci95": None, "min": None, "max": None, "n": 0}
    mean = statistics.fmean(vals)
    ci = t95(len(vals) - 1) * statistics.stdev(vals) / math.sqrt(len(vals)) if len(vals) > 1 else None
    return {"mean": mean, "ci95": ci, "min": min(vals), "max": max(vals), "n": len(vals)}


def improvement(current: float | None, tuned: float | None) -> float | None:
    """(tuned - current) / current, signed (None where current is 0 or either is missing)."""
    if current is None or tuned is None or current == 0:
        return None
    return (tuned - current) / current


def compare_metric(metric: str, m: Metric, pred_cur: dict, pred_tun: dict, cur: list[dict], tun: list[dict]) -> dict:
    """One metric: predicted and measured, current and tuned, and the improvements; the
    measured improvement is the ratio of the means less 1, its interval from the paired
    rounds' improvements."""
    pc, pt = m.predicted(pred_cur), m.predicted(pred_tun)
    mc = stats([m.measured(p) for p in cur])
    mt = stats([m.measured(p) for p in tun])
    paired = [improvement(m.measured(a), m.measured(b)) for a, b in zip(cur, tun)]
    pi = improvement(pc, pt)
    mi = improvement(mc["mean"], mt["mean"])
    mis = stats(paired)
    ratio = mi / pi if mi is not None and pi not in (None, 0) else None
    return {
        "metric": metric,
        "label": m.label,
        "unit": m.unit,
        "scale": m.scale,
        "predicted_current": pc,
        "predicted_tuned": pt,
        "predicted_improvement": pi,
        "measured_current": mc,
        "measured_tuned": mt,
        "measured_improvement": mi,
        "measured_improvement_ci95": mis["ci95"],
        "measured_improvement_rounds": paired,
        "ratio": ratio,
        "within_goal": None if ratio is None else abs(ratio - 1) <= GOAL,
    }


def compare(tune: dict, ms: dict) -> dict:
    """Rows (the ``reproduce`` contract: measured in ``reported``, the model in
    ``predicted``) and the per-metric comparison, with the goal."""
    cur, tun = ms["current"], ms["tuned"]
    pc, pt = tune["current"]["predicted"], tune["recommended"]["predicted"]
    roles = [(o["metric"], "objective", f"{o['direction']} {o['metric']}") for o in tune["objectives"]]
    roles += [(c["metric"], "constraint", c.get("text") or f"{c['metric']} {c['op']} {c['bound']:g}") for c in tune["constraints"]]
    seen = set()
    metrics, rows = [], []
    for name, role, text in roles + [(k, "context", "") for k in CONTEXT]:
        if name in seen:
            continue
        seen.add(name)
        m = METRICS.get(name) if role != "context" else CONTEXT[name]
        try:
            c = compare_metric(name, m, pc, pt, cur, tun)
        except (KeyError, TypeError, ZeroDivisionError):
            continue  # a context figure the prediction does not carry
        c.update(role=role, text=text)
        for side, key in (("current", "predicted_current_ci95"), ("recommended", "predicted_tuned_ci95")):
            ci = (tune[side].get("ci95") or {}).get(name)  # the tune's interval over its replications
            c[key] = ci if _num(ci) else None
        if role == "constraint":
            con = next(x for x in tune["constraints"] if x["metric"] == name)
            got = c["measured_tuned"]["mean"]
            c["bound"] = con["bound"]
            c["holds_measured"] = None if got is None else OPS[con["op"]](got, con["bound"])
        metrics.append(c)
        s = c["scale"]
        fit = {"kind": "derived", "derived_from": "the model's cpu_utilization, less interference, over its throughput"} if name == "cpu_per_frame" else {}
        rows.append(row(f"{c['label']}, current", _sc(c["measured_current"]["mean"], s), _sc(c["predicted_current"], s), c["unit"], SOURCE, **fit))
        rows.append(row(f"{c['label']}, tuned", _sc(c["measured_tuned"]["mean"], s), _sc(c["predicted_tuned"], s), c["unit"], SOURCE, **fit))
        rows.append(
            row(
                f"{c['label']}, improvement (tuned vs current)",
                _sc(c["measured_improvement"], 100),
                _sc(c["predicted_improvement"], 100),
                "%",
                SOURCE,
                kind="derived",
                derived_from="(tuned - current) / current of the two rows above",
                role=role,
                ratio=c["ratio"],
                within_goal=c["within_goal"],
            )
        )
    goal = [c for c in metrics if c["role"] == "objective"]
    return {
        "rows": rows,
        "summary": summary(rows),
        "metrics": metrics,
        "goal": {
            "text": f"measured improvement within {100 * GOAL:.0f}% of the predicted one (0.75 <= measured / predicted <= 1.25)",
            "met": bool(goal) and all(c["within_goal"] for c in goal),
            "objectives": {c["metric"]: c["within_goal"] for c in goal},
        },
        "constraints_hold_measured": all(c.get("holds_measured") is not False for c in metrics if c["role"] == "constraint"),
    }


# Frames per send batch above which the generator offered bursts: on a quiet machine it
# sends 1.01 at 30% load and up to 1.36 at 90% (docs/validation-defer.json).
BURSTY_FRAMES_PER_SEND = 1.5


def offered_traffic(ms: dict) -> dict:
    """How the offered traffic looked across every run of the check: the generator's frames
    per send batch (about 1 on time; more when it ran late and caught up in bursts, which
    the kernel batches without deferral while the model's source keeps a constant rate),
    its longest lateness and the foreign load (CPUs); ``disturbed`` when other tasks used
    more than ``runner.FOREIGN_WARN`` of a CPU or the sends came in bursts."""
    runs = [x for side in ("current", "tuned") for p in ms[side] for x in p.get("runs", [])]
    fpb = [x["generator_frames_per_batch"] for x in runs if x.get("generator_frames_per_batch")]
    late = [x["generator_max_late_ns"] for x in runs if x.get("generator_max_late_ns") is not None]
    foreign = [x["foreign_cpu"] for x in runs if x.get("foreign_cpu") is not None]
    out = {
        "frames_per_send_batch": statistics.fmean(fpb) if fpb else None,
        "max_late_ns": max(late) if late else None,
        "foreign_cpu": statistics.fmean(foreign) if foreign else None,
    }
    out["disturbed"] = (out["foreign_cpu"] or 0.0) > runner.FOREIGN_WARN or (out["frames_per_send_batch"] or 0.0) > BURSTY_FRAMES_PER_SEND
    return out


def _sc(v, s):
    return None if v is None else v * s


def run(
    directory: str,
    path: str,
    rules: int,
    routes: int,
    quick: bool,
    duration_s: float | None,
    reps: int | None,
    rounds: int | None,
    load_share: bool = False,
    progress=None,
) -> dict:
    """The whole check: load and plan (refused before anything is built), build the
    path's topology, measure, compare."""
    from . import paths, validate

    tune = load(directory)
    changes = plan(tune, path)
    rounds = ROUNDS[quick] if rounds is None else rounds
    if not 1 <= rounds <= 20:
        raise Refused(f"--rounds {rounds}: expected from 1 to 20 rounds of current and tuned")
    try:  # every bound checked before anything is built
        duration_s, reps = validate.plan(quick, duration_s, reps)
        runner.check(tune["load_pps"] if not load_share else None, duration_s, reps)
        topo = paths.topology(path, rules, routes, None)
    except Refused:
        raise
    except TestbedError as e:
        raise Refused(str(e)) from None
    with topo:
        ms = measure(topo, path, tune, changes, rounds, duration_s, reps, load_share=load_share, progress=progress)
    setup = {"path": path, "duration_s": duration_s, "repetitions": reps, "rounds": rounds, "quick": quick, "load_share": load_share}
    setup.update(loops=topo.xdp_loops) if path == "afxdp" else setup.update(rules=rules, routes=routes)
    return {
        "paper": "testbed",
        "path": path,
        "title": f"pktsim tune's recommendation applied to the kernel ({path} path)",
        "tune": {k: tune.get(k) for k in ("scenario", "sets", "load_pps", "objectives", "constraints", "knobs")} | {"file": tune["_file"]},
        "changes": [
            {
                "key": c.key,
                "where": c.knob.where,
                "name": c.knob.name,
                "current": c.current_text,
                "tuned": c.tuned_text,
                "current_value": c.current,
                "tuned_value": c.tuned,
                "before_run": ms["before"].get(c.key),
            }
            for c in changes
        ],
        **compare(tune, ms),
        "offered_traffic": offered_traffic(ms),
        "setup": setup,
        "machine": validate.machine(),
        "measurements": ms,
    }


# ------------------------------------------------------------------------------ text and figure


def fmt(v, scale=1.0, digits=3) -> str:
    if v is None:
        return "-"
    x = v * scale
    return f"{x:.{digits}g}" if abs(x) < 10**digits else f"{x:.0f}"


def text(res: dict) -> str:
    """The comparison as a table: one line per metric."""
    from ..textio import table

    out = []
    for c in res["metrics"]:
        s = c["scale"]

        def meas(st, s=s):
            if st["mean"] is None:
                return "-"
            return fmt(st["mean"], s) + (f" +-{fmt(st['ci95'], s, 2)}" if st["ci95"] is not None else "")

        pct = lambda v: "-" if v is None else f"{100 * v:+.1f}%"  # noqa: E731
        mi = pct(c["measured_improvement"]) + (f" +-{100 * c['measured_improvement_ci95']:.1f}" if c["measured_improvement_ci95"] is not None else "")
        goal = "" if c["role"] != "objective" or c["within_goal"] is None else ("yes" if c["within_goal"] else "NO")
        if c["role"] == "constraint" and c.get("holds_measured") is not None:
            goal = "holds" if c["holds_measured"] else "VIOLATED"
        out.append(
            [
                f"{c['label']} [{c['unit']}]" if c["unit"] else c["label"],
                c["role"],
                fmt(c["predicted_current"], s),
                fmt(c["predicted_tuned"], s),
                pct(c["predicted_improvement"]),
                meas(c["measured_current"]),
                meas(c["measured_tuned"]),
                mi,
                "-" if c["ratio"] is None else f"{c['ratio']:.2f}",
                goal,
            ]
        )
    head = ["metric", "role", "pred current", "pred tuned", "pred change", "meas current", "meas tuned", "meas change", "meas/pred", "goal"]
    return table(out, head, "llrrrrrrrl")


def plot(res: dict, path: str | Path) -> None:
    """One panel per metric: predicted and measured (the mean over the rounds, with its 95%
    interval), current and tuned, in the metric's unit; each panel's title gives the two
    changes and measured / predicted."""
    from ..plots import _plt, _save

    plt = _plt()
    ms = res["metrics"]
    ncol = min(3, len(ms))
    nrow = -(-len(ms) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow + 0.6), squeeze=False)
    w = 0.38
    for ax, c in zip(axes.flat, ms):
        s = c["scale"]
        pred = [_sc(c["predicted_current"], s), _sc(c["predicted_tuned"], s)]
        meas = [_sc(c["measured_current"]["mean"], s), _sc(c["measured_tuned"]["mean"], s)]
        err = [_sc(c[k]["ci95"], s) or 0 for k in ("measured_current", "measured_tuned")]
        ax.bar([-w / 2, 1 - w / 2], [v or 0 for v in pred], w, color="C1", label="predicted (tune.json)")
        ax.bar([w / 2, 1 + w / 2], [v or 0 for v in meas], w, yerr=err, capsize=4, color="C0", label="measured (95% interval over rounds)")
        ax.set_xticks([0, 1])
        ax.set_xticklabels(["current", "tuned"])
        ax.set_ylabel(f"{c['label']} [{c['unit']}]" if c["unit"] else c["label"], fontsize=8)
        pct = lambda v: "-" if v is None else f"{100 * v:+.0f}%"  # noqa: E731
        ratio = "" if c["ratio"] is None else f" ({c['ratio'] + 0.0:.2f}x)"
        ax.set_title(f"{c['role']}: change pred {pct(c['predicted_improvement'])}, meas {pct(c['measured_improvement'])}{ratio}", fontsize=8)
        if c.get("bound") is not None:
            ax.axhline(c["bound"] * s, ls="--", color="C3", lw=1, label="constraint bound")
            ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(ms) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    t, m = res["tune"], res["measurements"]
    goal = "met" if res["goal"]["met"] else "NOT met"
    fig.suptitle(
        f"tune-check, {res['path']} path, measured at {m['rate_pps'] / 1e3:.1f} kpps (target {t['load_pps'] / 1e3:.1f} kpps): "
        f"goal (measured change within 25% of the predicted) {goal}",
        fontsize=9,
    )
    _save(fig, path)
