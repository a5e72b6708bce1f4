"""The knobs ``pktsim tune`` turns, declared once: each with the scenario keys it sets, the
values the kernel (or the driver, or the application) accepts at its own granularity, when
each key matters, and the commands that apply a choice to a Linux host.

A knob is named as on the command line (``--knobs nic.itr,nic.napi``); one of its keys may
be named alone (``--knobs nic.itr.interval``: only that key is tuned, the others keep the
scenario's values) and its values narrowed (``nic.itr.interval=10us:200us`` or
``host.budget=100,300,600``; every value must be one the kernel accepts).

Values are texts as ``pktsim run --set KEY=VALUE`` takes them, so a recommendation is
always applied as it is: ``rx-usecs`` in even microseconds from 2 to 1022 (ixgbe rounds odd
ones down, 1 means adaptive), ring sizes in powers of two from 64 to 4096, ``netdev_budget``
and the busy-poll sysctls in their own units.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from .. import schema_info
from ..values import numeric_value

Cond = Callable[[Mapping[str, str], dict], bool]


@dataclass(frozen=True)
class Param:
    """One scenario key a knob sets."""

    key: str
    values: tuple  # legal value texts, in order (ordered: smallest first)
    ordered: bool = True
    # Whether the key matters, given the other keys' values in the candidate (texts, with
    # the scenario's values for keys not tuned) and the scenario's data.
    when: Cond | None = None
    # The kernel's (or the driver's) name for it: the core's declaration (``x-linux``)
    # unless a knob says how it sets a key that has none.
    linux: str = ""

    def __post_init__(self):
        if not self.linux:
            object.__setattr__(self, "linux", schema_info.linux(self.key))
        # Only values in the key's declared range (the core would refuse the others).
        lo, hi = schema_info.bounds(self.key)
        if lo is not None or hi is not None:
            keep = tuple(v for v in self.values if not v.isdigit() or ((lo is None or int(v) >= lo) and (hi is None or int(v) <= hi)))
            object.__setattr__(self, "values", keep)

    def active(self, chosen: Mapping[str, str], data: dict) -> bool:
        return self.when is None or self.when(chosen, data)


@dataclass(frozen=True)
class Knob:
    name: str
    summary: str
    params: tuple
    # "" when the knob applies to the scenario, else why it does not.
    applies: Callable[[dict], str]
    # The commands that apply values (key -> text, every key of the knob) to a host.
    commands: Callable[[Mapping[str, str], dict], list]


def get_path(data: dict, key: str):
    """``data["a"]["b"]`` for ``"a.b"``, or None when absent."""
    node = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def value_text(data: dict, key: str) -> str:
    """The scenario's value of ``key`` as ``--set`` text."""
    v = get_path(data, key)
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


@functools.lru_cache(maxsize=4096)
def number(key: str, text: str) -> float | None:
    """A value text in base units (seconds, pps, ...), or None for a name. (Cached: a tune
    compares the same few texts some 300,000 times.)"""
    if text in ("true", "false"):
        return 1.0 if text == "true" else 0.0
    return numeric_value(key, text)


def same(key: str, a: str, b: str) -> bool:
    """Whether two value texts of ``key`` are the same setting ("50us" and "50000ns")."""
    if a == b:
        return True
    x, y = number(key, a), number(key, b)
    return x is not None and y is not None and abs(x - y) <= 1e-12 * max(abs(x), abs(y), 1e-300)


def _us(text: str, key: str) -> int:
    """A time value in whole microseconds (for sysctls and ethtool)."""
    return int(round((number(key, text) or 0.0) * 1e6))


def _ns(text: str, key: str) -> int:
    return int(round((number(key, text) or 0.0) * 1e9))


def _io(data: dict) -> str:
    return (data.get("host") or {}).get("io", schema_info.tagged("host.io").default)


def _read_by(key: str) -> Callable[[dict], str]:
    """A knob's ``applies``: whether the scenario's I/O mode reads ``key`` (as the scenario
    format declares it, :mod:`pktsim.schema_info`)."""

    def check(data: dict) -> str:
        io = _io(data)
        readers = schema_info.tagged("host.io").readers(key)
        return "" if io in readers else f"host.io = {io!r}: it matters only with host.io = " + " or ".join(repr(m) for m in readers)

    return check


def _has_app(data: dict) -> str:
    if "app" not in data:
        return "the scenario has no [app] (an application reading a socket) for busy polling to serve"
    # Where the core takes busy polling for this scenario's I/O mode.
    err = schema_info.refused_with(data, _busy_key(data), "50us")
    return "" if err is None else f"host.io = {_io(data)!r}: {err.expected}"


def _always(data: dict) -> str:
    return ""


def _chosen(chosen: Mapping[str, str], data: dict, key: str) -> str:
    return chosen[key] if key in chosen else value_text(data, key)


# ----- the knobs -------------------------------------------------------------------------

# rx-usecs as ixgbe takes it (even microseconds, 1 meaning adaptive), up to the largest
# static interval the core takes.
RX_USECS = tuple(f"{n}us" for n in range(2, schema_info.largest("nic.itr.interval", "us", (("nic.itr.mode", "static"),)) + 1, 2))


def _itr_reads(key: str) -> Cond:
    """Whether the candidate's moderation policy reads ``key``."""
    return lambda c, d: schema_info.tagged("nic.itr.mode").reads(_chosen(c, d, "nic.itr.mode"), key)


def _itr_modes(data: dict) -> tuple:
    """The moderation policies to try: each one whose keys the tune chooses (the interval)
    or the scenario gives (a device's DIM table)."""
    itr = schema_info.tagged("nic.itr.mode")
    chosen = {"interval"}
    return tuple(a.name for a in itr.alternatives.values() if all(k in chosen or get_path(data, f"nic.itr.{k}") for k in a.required))


def _itr_commands(v: Mapping[str, str], data: dict) -> list:
    mode = v.get("nic.itr.mode", value_text(data, "nic.itr.mode"))
    if mode == "off":
        return ["ethtool -C $DEV adaptive-rx off rx-usecs 0"]
    if mode == "static":
        return [f"ethtool -C $DEV adaptive-rx off rx-usecs {_us(v['nic.itr.interval'], 'nic.itr.interval')}"]
    if mode == "dynamic":
        return ["ethtool -C $DEV rx-usecs 1   # ixgbe: 1 selects its adaptive ITR"]
    profile = v.get("nic.itr.profile") or value_text(data, "nic.itr.profile")
    out = ["ethtool -C $DEV adaptive-rx on"]
    if profile.startswith("mlx5"):
        out.append(f"ethtool --set-priv-flags $DEV rx_cqe_moder {'on' if profile == 'mlx5-cqe' else 'off'}")
    return out


def _defer_on(chosen: Mapping[str, str], data: dict) -> bool:
    return _chosen(chosen, data, "nic.napi.defer_hard_irqs") not in ("", "0")


def _suspend_matters(chosen: Mapping[str, str], data: dict) -> bool:
    return "app" in data and _defer_on(chosen, data) and _chosen(chosen, data, "socket.prefer_busy_poll") == "true"


def _napi_commands(v: Mapping[str, str], data: dict) -> list:
    defer = v.get("nic.napi.defer_hard_irqs", "0")
    gro = _ns(v.get("nic.napi.gro_flush_timeout", "0ps"), "nic.napi.gro_flush_timeout") if defer != "0" else 0
    out = [f"echo {defer} > /sys/class/net/$DEV/napi_defer_hard_irqs", f"echo {gro} > /sys/class/net/$DEV/gro_flush_timeout"]
    if "nic.napi.irq_suspend_timeout" in v:
        ns = _ns(v["nic.napi.irq_suspend_timeout"], "nic.napi.irq_suspend_timeout")
        out.append(
            "ynl --family netdev --do napi-set --json "
            f'\'{{"id": $NAPI_ID, "defer-hard-irqs": {defer}, "gro-flush-timeout": {gro}, "irq-suspend-timeout": {ns}}}\'   # per NAPI, Linux >= 6.13'
        )
    return out


def _busy_key(data: dict) -> str:
    return "socket.busy_read" if (data.get("app") or {}).get("wait") == "recvmsg" else "socket.busy_poll"


def _busy_on(chosen: Mapping[str, str], data: dict) -> bool:
    key = _busy_key(data)
    return (number(key, _chosen(chosen, data, key)) or 0.0) > 0.0


def _busy_commands(v: Mapping[str, str], data: dict) -> list:
    key = _busy_key(data)
    us = _us(v.get(key, "0ps"), key)
    sysctl = "net.core.busy_read" if key == "socket.busy_read" else "net.core.busy_poll"
    out = [f"sysctl -w {sysctl}={us}"]
    if us:
        prefer = v.get("socket.prefer_busy_poll", value_text(data, "socket.prefer_busy_poll"))
        budget = v.get("socket.busy_poll_budget", value_text(data, "socket.busy_poll_budget"))
        if key == "socket.busy_poll":
            out.append(
                f"# in the application, on its epoll fd: ioctl(epfd, EPIOCSPARAMS, {{.busy_poll_usecs = {us}, "
                f".busy_poll_budget = {budget}, .prefer_busy_poll = {1 if prefer == 'true' else 0}}})"
            )
        else:
            out.append(
                f"# in the application, on its socket: setsockopt SO_BUSY_POLL {us}, SO_BUSY_POLL_BUDGET {budget}, "
                f"SO_PREFER_BUSY_POLL {1 if prefer == 'true' else 0}"
            )
    return out


def _busy_params(data: dict) -> tuple:
    key = _busy_key(data)
    return (
        Param(key, ("0ps",) + tuple(f"{n}us" for n in (5, 10, 20, 30, 50, 75, 100, 150, 200, 300))),
        Param("socket.prefer_busy_poll", ("false", "true"), ordered=False, when=_busy_on),
        Param("socket.busy_poll_budget", ("8", "16", "32", "64"), when=_busy_on),
    )


_POW2 = tuple(str(1 << n) for n in range(6, 13))
# The DIM tables of mlx5 devices, between which its private flag rx_cqe_moder switches.
_MLX5 = tuple(p for p in schema_info.values("nic.itr.profile") if p.startswith("mlx5"))


def _knobs(data: dict) -> dict:
    """Every knob, its values shaped by the scenario (the device's DIM profiles, the
    application's wait)."""
    knobs = [
        Knob(
            "nic.itr",
            "interrupt moderation: off, static rx-usecs, the driver's adaptive ITR, DIM",
            (
                Param("nic.itr.mode", _itr_modes(data), ordered=False, linux="adaptive-rx / rx-usecs 0|1"),
                Param("nic.itr.interval", RX_USECS, when=_itr_reads("nic.itr.interval")),
                Param(
                    "nic.itr.profile",
                    _MLX5,
                    ordered=False,
                    when=lambda c, d: _itr_reads("nic.itr.profile")(c, d) and str(get_path(d, "nic.itr.profile") or "") in _MLX5,
                ),
            ),
            _read_by("nic.itr"),
            _itr_commands,
        ),
        Knob(
            "nic.napi",
            "hard-IRQ deferral (napi_defer_hard_irqs, gro_flush_timeout) and IRQ suspension",
            (
                Param("nic.napi.defer_hard_irqs", ("0", "1", "2", "3", "4", "5", "8", "10", "20", "50", "100")),
                Param(
                    "nic.napi.gro_flush_timeout",
                    tuple(f"{n}us" for n in (1, 2, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 60, 75, 100, 125, 150, 200, 250, 300, 400, 500, 750, 1000)),
                    when=_defer_on,
                ),
                Param(
                    "nic.napi.irq_suspend_timeout",
                    ("0ps", "100us", "200us", "500us", "1ms", "2ms", "5ms", "10ms"),
                    when=_suspend_matters,
                ),
            ),
            _read_by("nic.napi.defer_hard_irqs"),
            _napi_commands,
        ),
        Knob("socket.busy_poll", "busy polling by the application's socket", _busy_params(data), _has_app, _busy_commands),
        Knob(
            "host.budget",
            "net_rx_action's budget (net.core.netdev_budget, netdev_budget_usecs)",
            (
                Param("host.budget", ("50", "64", "100", "128", "200", "300", "400", "600", "800", "1000", "2000")),
                Param("host.budget_time", ("1000us", "2000us", "4000us", "8000us")),
            ),
            _read_by("host.budget"),
            lambda v, d: [
                f"sysctl -w net.core.netdev_budget={v.get('host.budget', value_text(d, 'host.budget'))}",
                f"sysctl -w net.core.netdev_budget_usecs={_us(v.get('host.budget_time', value_text(d, 'host.budget_time')), 'host.budget_time')}",
            ],
        ),
        Knob(
            "nic.rx_ring",
            "rx descriptors per ring (ethtool -G rx)",
            (Param("nic.rx_ring", _POW2),),
            _always,
            lambda v, d: [f"ethtool -G $DEV rx {v['nic.rx_ring']}"],
        ),
        Knob(
            "nic.tx_ring",
            "tx descriptors per ring (ethtool -G tx)",
            (Param("nic.tx_ring", _POW2),),
            _always,
            lambda v, d: [f"ethtool -G $DEV tx {v['nic.tx_ring']}"],
        ),
        Knob(
            "host.af_xdp.batch",
            "frames the AF_XDP application takes per batch",
            (Param("host.af_xdp.batch", tuple(str(1 << n) for n in range(0, 9)), linux="the application's batch size"),),
            _read_by("host.af_xdp.batch"),
            lambda v, d: [f"# in the AF_XDP application: take up to {v['host.af_xdp.batch']} frames per batch (and per busy poll)"],
        ),
        Knob(
            "cpu.cores",
            "queues and the cores that serve them (ethtool -L combined)",
            (Param("cpu.cores", ("1", "2", "3", "4", "6", "8", "12", "16", "24", "32", "48", "64")),),
            _always,
            lambda v, d: [f"ethtool -L $DEV combined {v['cpu.cores']}", "# and one core per queue: /proc/irq/N/smp_affinity_list, or irqbalance"],
        ),
    ]
    return {k.name: k for k in knobs}


# A scenario with everything a knob can apply to (an application, a device with DIM profiles).
_EVERYTHING = {"app": {}, "nic": {"itr": {"profile": "mlx5-eqe"}}}


def names() -> list:
    """Every knob's name (as for a scenario with everything: the list ``--knobs`` accepts)."""
    return list(_knobs(_EVERYTHING))


def param(key: str) -> Param:
    """The :class:`Param` a knob declares for ``key`` (as for a scenario with everything):
    the one place its Linux name is written, which the testbed's tune-check also applies.
    Raises ``KeyError`` for a key no knob sets."""
    for k in _knobs(_EVERYTHING).values():
        for p in k.params:
            if p.key == key:
                return p
    raise KeyError(key)


class KnobError(ValueError):
    pass


@dataclass(frozen=True)
class Selection:
    """The knobs a tune turns, for one scenario: each with the params tuned (and their
    values, narrowed as asked)."""

    knobs: tuple  # (Knob, ...) with params narrowed to the ones tuned

    @property
    def params(self) -> list:
        return [p for k in self.knobs for p in k.params]

    def keys(self) -> list:
        return [p.key for p in self.params]

    def active(self, chosen: Mapping[str, str], data: dict) -> dict:
        """The candidate's values of the keys that matter (in declaration order)."""
        out: dict = {}
        for p in self.params:
            if p.key in chosen and p.active({**chosen}, data):
                out[p.key] = chosen[p.key]
        return out

    def size(self, data: dict) -> int:
        """The number of distinct candidates (keys that do not matter counted once)."""
        return len(self.enumerate(data, limit=10**7))

    def enumerate(self, data: dict, limit: int) -> list:
        """Every candidate (up to ``limit``), in a fixed order."""
        cands: list = [{}]
        for p in self.params:
            nxt = []
            for c in cands:
                if p.active(c, data):
                    nxt.extend({**c, p.key: v} for v in p.values)
                else:
                    nxt.append(c)
                if len(nxt) > limit:
                    return nxt[: limit + 1]
            cands = nxt
        return cands

    def current(self, data: dict) -> dict:
        """The scenario's own values of every key tuned (the ones that matter there)."""
        chosen = {p.key: value_text(data, p.key) for p in self.params}
        return {k: v for k, v in chosen.items() if any(p.key == k and p.active(chosen, data) for p in self.params)}

    def commands(self, chosen: Mapping[str, str], data: dict, only: Sequence[str] | None = None) -> list:
        """The commands that apply ``chosen`` (the knobs in ``only``, default every one)."""
        out = []
        for k in self.knobs:
            if only is not None and k.name not in only:
                continue
            full = {p.key: value_text(data, p.key) for p in _knobs(data)[k.name].params}
            full.update({key: v for key, v in chosen.items() if key in full})
            # Keys that do not matter are written as the kernel would leave them.
            for p in _knobs(data)[k.name].params:
                if not p.active(full, data):
                    full.pop(p.key, None)
            out.extend(k.commands(full, data))
        return out


def select(spec: Sequence[str] | None, data: dict) -> Selection:
    """The knobs ``--knobs`` names (default: every knob that applies to the scenario)."""
    every = _knobs(data)
    if not spec:
        chosen = [k for k in every.values() if not k.applies(data)]
        if not chosen:
            raise KnobError("no knob applies to this scenario")
        return Selection(tuple(chosen))
    picked: dict = {}
    for item in spec:
        name, sep, values = item.partition("=")
        name = name.strip()
        if name in every:
            if sep:
                raise KnobError(f"--knobs {item}: values narrow one key (e.g. nic.itr.interval=10us:200us), not a whole knob")
            knob, params = every[name], None
        else:
            owner = next((k for k in every.values() if any(p.key == name for p in k.params)), None)
            if owner is None:
                known = ", ".join(names())
                keys = ", ".join(p.key for k in every.values() for p in k.params)
                raise KnobError(f"--knobs {name}: unknown knob; expected one of {known}, or one of their keys ({keys})")
            knob = owner
            param = next(p for p in owner.params if p.key == name)
            if sep:
                param = replace(param, values=_narrow(param, values.strip()))
            params = [param]
        why = knob.applies(data)
        if why:
            raise KnobError(f"--knobs {name}: {knob.name} does not apply to this scenario ({why})")
        if knob.name in picked and params is not None and picked[knob.name] is not None:
            picked[knob.name] = picked[knob.name] + params
        elif knob.name in picked and (params is None or picked[knob.name] is None):
            picked[knob.name] = None
        else:
            picked[knob.name] = params
    out = []
    for name, params in picked.items():
        knob = every[name]
        if params is not None:
            for p in params:
                # A key alone: the keys it depends on keep the scenario's values; it must matter there.
                rest = {q.key: value_text(data, q.key) for q in knob.params}
                if not p.active(rest, data):
                    raise KnobError(
                        f"--knobs {p.key}: it does not matter with this scenario's values ({_why_inactive(knob, p, data)}); "
                        f"tune the whole knob ({knob.name}) or set the keys it depends on with --set"
                    )
            knob = replace(knob, params=tuple(params))
        out.append(knob)
    return Selection(tuple(out))


def _why_inactive(knob: Knob, p: Param, data: dict) -> str:
    deps = [q.key for q in knob.params if q.key != p.key]
    return ", ".join(f"{k} = {value_text(data, k)!r}" for k in deps) or "the scenario"


def _narrow(p: Param, spec: str) -> tuple:
    """``p``'s legal values narrowed by ``spec``: "LO:HI" (inclusive, with units) or a list."""
    if not spec:
        raise KnobError(f"--knobs {p.key}=: expected values after '=' (LO:HI or a list, e.g. {p.values[0]}:{p.values[-1]})")
    legal = ", ".join(p.values) if len(p.values) <= 16 else f"{p.values[0]}, {p.values[1]}, ... {p.values[-1]}"
    if ":" in spec and p.ordered:
        lo_t, _, hi_t = spec.partition(":")
        lo, hi = number(p.key, lo_t.strip()), number(p.key, hi_t.strip())
        if lo is None or hi is None:
            raise KnobError(f"--knobs {p.key}={spec}: expected LO:HI with units as the key takes them (e.g. {p.values[0]}:{p.values[-1]})")
        vals = tuple(v for v in p.values if lo - 1e-15 <= (number(p.key, v) or 0.0) <= hi + 1e-15)
        if not vals:
            raise KnobError(f"--knobs {p.key}={spec}: no legal value in that range; legal values: {legal}")
        return vals
    out = []
    for t in spec.split(","):
        t = t.strip()
        match = next((v for v in p.values if same(p.key, v, t)), None)
        if match is None:
            raise KnobError(f"--knobs {p.key}={spec}: {t!r} is not a value the kernel accepts here; legal values: {legal}")
        if match not in out:
            out.append(match)
    return tuple(sorted(out, key=p.values.index))


def describe(data: dict) -> str:
    """Every knob with its keys and legal values, and whether it applies to ``data``'s
    scenario (``pktsim tune --list-knobs``)."""
    out = []
    for k in _knobs(data).values():
        out.append(f"{k.name}: {k.summary}" + (f"  [does not apply: {k.applies(data)}]" if k.applies(data) else ""))
        for p in k.params:
            vals = ", ".join(p.values) if len(p.values) <= 16 else f"{p.values[0]}, {p.values[1]} .. {p.values[-1]} ({len(p.values)} values)"
            out.append(f"  {p.key} ({p.linux}): {vals}")
    return "\n".join(out)
