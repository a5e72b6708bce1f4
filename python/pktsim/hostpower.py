"""``pktsim import-host``'s reading of a core's power management: its idle states and
governor (cpuidle) and its clock policy (cpufreq), from ``grep .`` of their sysfs files
(``PATH:VALUE`` lines). :mod:`pktsim.hostimport` registers the parsers."""

from __future__ import annotations

import re
from typing import Protocol


class Host(Protocol):
    """What the parsers write into (:class:`pktsim.hostimport.Host`)."""

    notes: list[str]

    def set(self, section: str, key: str, toml: str, source: str) -> None: ...

    def get(self, section: str, key: str) -> str | None: ...


def _int(v: str) -> int | None:
    """A whole number as a tool prints it, or None (also :mod:`pktsim.hostimport`'s)."""
    m = re.match(r"^(\d+)$", v.strip())
    return int(m.group(1)) if m else None


# Where cpuidle shows a core's states and governor (Documentation/admin-guide/pm/cpuidle.rst),
# and the haltpoll governor's parameters (Documentation/virt/guest-halt-polling.rst).
CPUIDLE_GLOBS = (
    "/sys/devices/system/cpu/cpuidle/current_driver",
    "/sys/devices/system/cpu/cpuidle/current_governor",
    "/sys/devices/system/cpu/cpu0/cpuidle/state*/name",
    "/sys/devices/system/cpu/cpu0/cpuidle/state*/latency",
    "/sys/devices/system/cpu/cpu0/cpuidle/state*/residency",
    "/sys/devices/system/cpu/cpu0/cpuidle/state*/disable",
    "/sys/module/haltpoll/parameters/guest_halt_poll_ns",
    "/sys/module/haltpoll/parameters/guest_halt_poll_grow",
    "/sys/module/haltpoll/parameters/guest_halt_poll_grow_start",
    "/sys/module/haltpoll/parameters/guest_halt_poll_shrink",
)
# Where cpufreq shows a core's clock policy (Documentation/admin-guide/pm/cpufreq.rst).
CPUFREQ_GLOBS = (
    "/sys/devices/system/cpu/cpu0/cpufreq/scaling_driver",
    "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
    "/sys/devices/system/cpu/cpu0/cpufreq/scaling_min_freq",
    "/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq",
)
# States that flush the core's L1 and L2 (C3 and deeper on Intel): their exit refills them.
FLUSHING_STATE = re.compile(r"^C([3-9]|10)", re.I)


def parse_cpuidle(text: str, host: Host, name: str) -> None:
    """`grep .` of the cpuidle sysfs files: ``PATH:VALUE`` lines."""
    states: dict[int, dict[str, tuple[str, int]]] = {}
    params: dict[str, tuple[str, int]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        path, sep, value = line.partition(":")
        if not sep:
            continue
        value = value.strip()
        m = re.search(r"/state(\d+)/(name|latency|residency|disable)$", path)
        if m:
            states.setdefault(int(m.group(1)), {})[m.group(2)] = (value, n)
        else:
            params[path.rsplit("/", 1)[-1]] = (value, n)
    where = lambda key: f"{name}:{params[key][1]}"  # noqa: E731
    governor = params.get("current_governor", ("", 0))[0]
    driver = params.get("current_driver", ("", 0))[0]
    if governor in ("menu", "teo", "haltpoll"):
        host.set("cpu.idle", "governor", f'"{governor}"', f"cpuidle: current_governor {governor} ({where('current_governor')})")
    elif governor:
        host.notes.append(f"cpuidle governor {governor!r} ({name}): pktsim has menu, teo and haltpoll; menu is used")
    rows = []
    for k in sorted(states):
        st = states[k]
        if not all(f in st for f in ("name", "latency", "residency")):
            host.notes.append(f"{name}: state{k} lacks its name, latency or residency: left out")
            continue
        lat, res = _int(st["latency"][0]), _int(st["residency"][0])
        if lat is None or res is None:
            host.notes.append(f"{name}: state{k} latency {st['latency'][0]!r} / residency {st['residency'][0]!r}: not numbers, left out")
            continue
        nm = st["name"][0].replace('"', "'")[:32] or f"state{k}"
        row = f'{{ name = "{nm}", latency = "{lat}us", residency = "{res}us"'
        if FLUSHING_STATE.match(nm):
            row += ", flush = true"
        if st.get("disable", ("0", 0))[0] not in ("0", ""):
            row += ", disable = true"
        rows.append(row + " }")
    if rows:
        host.set("cpu.idle", "states", "[" + ", ".join(rows[:16]) + "]", f"cpuidle: {len(rows)} states of cpu0, driver {driver or 'unknown'} ({name})")
    elif driver in ("", "none"):
        host.notes.append(f"{name}: no cpuidle driver: the core halts when idle (HLT); pktsim's default states are used")
    if governor == "haltpoll":
        for key, ours in (
            ("guest_halt_poll_ns", "guest_halt_poll"),
            ("guest_halt_poll_grow_start", "guest_halt_poll_grow_start"),
        ):
            v = _int(params.get(key, ("", 0))[0])
            if v is not None:
                host.set("cpu.idle", ours, f'"{v}ns"', f"haltpoll.{key} {v} ({where(key)})")
        for key in ("guest_halt_poll_grow", "guest_halt_poll_shrink"):
            v = _int(params.get(key, ("", 0))[0])
            if v is not None and 0 <= v <= 1024:
                host.set("cpu.idle", key, str(v), f"haltpoll.{key} {v} ({where(key)})")


def parse_cpufreq(text: str, host: Host, name: str) -> None:
    """`grep .` of the cpufreq sysfs files: ``PATH:VALUE`` lines (clocks in kHz)."""
    params = {}
    for n, line in enumerate(text.splitlines(), 1):
        path, sep, value = line.partition(":")
        if sep:
            params[path.rsplit("/", 1)[-1]] = (value.strip(), n)
    get = lambda key: params.get(key, ("", 0))[0]  # noqa: E731
    where = lambda key: f"{name}:{params[key][1]}"  # noqa: E731
    governor, driver = get("scaling_governor"), get("scaling_driver")
    ours = {"schedutil": "schedutil", "powersave": "powersave" if driver == "intel_pstate" else None}.get(governor)
    if governor == "performance":
        host.notes.append(f"cpufreq governor performance ({where('scaling_governor')}): every cost at cpu.frequency")
        return
    if ours is None:
        if governor:
            host.notes.append(
                f"cpufreq governor {governor!r} of {driver or 'an unknown driver'} ({name}): pktsim has performance, "
                "intel_pstate's powersave and schedutil; the clock is taken as fixed at cpu.frequency"
            )
        return
    low, high = _int(get("scaling_min_freq")), _int(get("scaling_max_freq"))
    if not low:
        host.notes.append(f"{name}: scaling_min_freq missing: the clock is taken as fixed at cpu.frequency")
        return
    freq = host.get("cpu", "frequency")
    top_ghz = high / 1e6 if high else (float(freq.strip('"').removesuffix("GHz")) if freq and freq.endswith('GHz"') else None)
    if top_ghz is None or low / 1e6 > top_ghz:
        host.notes.append(f"{name}: scaling_min_freq {low} kHz above the clock at full load: the clock is taken as fixed")
        return
    if high:
        host.set("cpu", "frequency", f'"{high / 1e6:g}GHz"', f"cpufreq: scaling_max_freq {high} kHz, the clock at full load ({where('scaling_max_freq')})")
    host.set("cpu.freq", "governor", f'"{ours}"', f"cpufreq: scaling_governor {governor}, driver {driver or 'unknown'} ({where('scaling_governor')})")
    host.set("cpu.freq", "min", f'"{low / 1e6:g}GHz"', f"cpufreq: scaling_min_freq {low} kHz ({where('scaling_min_freq')})")
    if ours == "powersave":
        host.notes.append("intel_pstate powersave: modelled without HWP (1.25 x max x busy); with HWP the processor picks the clock itself")
