"""The sets of a tune as knobs of the testbed's dut: which keys a path can apply and how
(:data:`KNOBS`, a :class:`DutKnob` each), the changes between current and tuned
(:func:`plan`), and putting them in place and back (:class:`Applied`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..schema_info import bounds
from ..tune.knobs import Param, param
from .errors import TestbedError
from .tunefile import Refused, _bad, _show


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
    DutKnob(param("nic.napi.defer_hard_irqs"), "sysfs", _int(*bounds("nic.napi.defer_hard_irqs")), "/sys/class/net/tb-dut0/napi_defer_hard_irqs"),
    DutKnob(param("nic.napi.gro_flush_timeout"), "sysfs", _duration(1000, 10**12, "written in ns"), "/sys/class/net/tb-dut0/gro_flush_timeout"),
    DutKnob(Param("nic.napi.threaded", ()), "fixed", _threaded, "always on (/sys/class/net/tb-dut0/threaded = 1)"),
    DutKnob(param("host.budget"), "sysctl", _int(*bounds("host.budget")), "sysctl net.core.netdev_budget (global; threaded NAPI does not use it)"),
    DutKnob(
        param("host.budget_time"),
        "sysctl",
        _duration(10**6, 10**12, "written in whole us"),
        "sysctl net.core.netdev_budget_usecs (global; threaded NAPI does not use it)",
    ),
    DutKnob(Param("host.gro_normal_batch", ()), "sysctl", _int(*bounds("host.gro_normal_batch")), "sysctl net.core.gro_normal_batch (global)"),
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
