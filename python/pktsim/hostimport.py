"""``pktsim import-host``: a scenario from a real machine's ``ethtool``, ``sysctl``, ``lscpu``
and ``/proc/interrupts`` output.

Reads the live machine (running the tools on one interface) or a directory of saved
outputs, any of which may be missing:

| file | command |
|---|---|
| ``ethtool-i.txt`` | ``ethtool -i IFACE`` (driver) |
| ``ethtool-g.txt`` | ``ethtool -g IFACE`` (ring sizes) |
| ``ethtool-l.txt`` | ``ethtool -l IFACE`` (queues) |
| ``ethtool-c.txt`` | ``ethtool -c IFACE`` (interrupt coalescing) |
| ``ethtool.txt`` | ``ethtool IFACE`` (link speed) |
| ``sysctl.txt`` | ``sysctl -a`` or ``sysctl net.core kernel.osrelease`` (the release sets ``host.softirq``) |
| ``lscpu.txt`` | ``lscpu`` |
| ``interrupts.txt`` | ``cat /proc/interrupts`` |
| ``cpuidle.txt`` | ``grep .`` of the cpuidle sysfs files ``CPUIDLE_GLOBS`` names (idle states, governor) |
| ``cpufreq.txt`` | ``grep .`` of the cpufreq sysfs files ``CPUFREQ_GLOBS`` names (clock governor, lowest clock) |
| ``napi.txt`` | ``grep .`` of the interface's NAPI files ``NAPI_FILES`` names (threaded NAPI, deferral) |

Every value in the scenario says where it came from; what had to be guessed (an unknown
driver's link rate, a missing file) says so. The per-packet costs are not on the machine:
the scenario takes 000's Linux router profile, to be replaced by ``pktsim calibrate``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import schema_info
from .errors import ScenarioError
from .hostpower import CPUFREQ_GLOBS, CPUIDLE_GLOBS, _int, parse_cpufreq, parse_cpuidle
from .tomlread import tomllib

FILES = (
    "ethtool-i.txt",
    "ethtool-g.txt",
    "ethtool-l.txt",
    "ethtool-c.txt",
    "ethtool.txt",
    "sysctl.txt",
    "lscpu.txt",
    "interrupts.txt",
    "cpuidle.txt",
    "cpufreq.txt",
    "napi.txt",
)

# The interface's NAPI settings in sysfs (Documentation/ABI/testing/sysfs-class-net,
# Documentation/networking/napi.rst): a NAPI thread per queue, and hard-IRQ deferral.
NAPI_FILES = ("threaded", "napi_defer_hard_irqs", "gro_flush_timeout")
# Link rates of common drivers when `ethtool IFACE` is not at hand (their usual parts).
DRIVER_LINK = {
    "ixgbe": ("10Gbit/s", "82599 / X540 / X550: 10 GbE"),
    "i40e": ("40Gbit/s", "XL710: 40 GbE (X710 parts run at 10 GbE)"),
    "ice": ("100Gbit/s", "E810: up to 100 GbE"),
    "mlx5_core": ("100Gbit/s", "ConnectX-5/6: up to 100 GbE"),
    "virtio_net": ("10Gbit/s", "virtio has no wire; 10 Gbit/s is a placeholder"),
    "veth": ("100Gbit/s", "veth has no wire: only the frame rate matters"),
}


@dataclass
class Value:
    toml: str
    source: str


@dataclass
class Host:
    """What was read: TOML values per section, each with where it came from."""

    iface: str = "eth0"
    driver: str | None = None
    cpus: int | None = None
    sections: dict[str, dict[str, Value]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def set(self, section: str, key: str, toml: str, source: str) -> None:
        self.sections.setdefault(section, {})[key] = Value(toml, source)

    def get(self, section: str, key: str) -> str | None:
        v = self.sections.get(section, {}).get(key)
        return v.toml if v else None


def _kv(text: str, sep: str = ":") -> list[tuple[str, str, int]]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if sep in line:
            k, v = line.split(sep, 1)
            out.append((k.strip(), v.strip(), n))
    return out


def _current(text: str) -> list[tuple[str, str, int]]:
    """`key: value` lines of the 'Current hardware settings' part of `ethtool -g` / `-l`
    output, with their line numbers in the whole text."""
    i = text.find("Current hardware settings")
    first = text[:i].count("\n") if i >= 0 else 0
    return [(k, v, n + first) for k, v, n in _kv(text[i:] if i >= 0 else text)]


def parse_ethtool_i(text: str, host: Host, name: str) -> None:
    for k, v, n in _kv(text):
        if k == "driver" and v:
            host.driver = v
            host.notes.append(f"driver {v} ({name}:{n})")


def parse_ethtool_g(text: str, host: Host, name: str) -> None:
    for k, v, n in _current(text):
        if k in ("RX", "TX") and _int(v):
            host.set("nic", f"{k.lower()}_ring", str(_int(v)), f"ethtool -g: {k} {v} ({name}:{n})")


def parse_ethtool_l(text: str, host: Host, name: str) -> None:
    counts = {k: _int(v) for k, v, _ in _current(text) if _int(v) is not None}
    queues = counts.get("Combined") or counts.get("RX") or 0
    if queues:
        host.set("cpu", "cores", str(queues), f"ethtool -l: {queues} queues, one rx/tx pair per core (RSS) ({name})")


def parse_ethtool_c(text: str, host: Host, name: str) -> None:
    adaptive = re.search(r"Adaptive RX:\s*(on|off)", text)
    usecs = next(((_int(v), n) for k, v, n in _kv(text) if k == "rx-usecs" and _int(v) is not None), None)
    if adaptive and adaptive.group(1) == "on":
        driver = host.driver or ""
        if driver.startswith("mlx5"):
            # ethtool >= 5.15 prints the CQ period mode; mlx5 starts from CQEs where the
            # device can (rx_cqe_moder on), which ConnectX-4 Lx and later do.
            cqe = re.search(r"CQE mode RX:\s*(on|off)", text)
            profile = "mlx5-eqe" if cqe and cqe.group(1) == "off" else "mlx5-cqe"
            how = f"CQE mode RX: {cqe.group(1)}" if cqe else "no CQE mode line: mlx5's default where the device can, rx_cqe_moder on"
            host.set("nic.itr", "mode", '"dim"', f"ethtool -c: Adaptive RX on, {driver} runs net_dim ({name})")
            host.set("nic.itr", "profile", f'"{profile}"', f"ethtool -c: {how} ({name})")
            return
        if driver == "ice":
            host.set("nic.itr", "mode", '"dim"', f"ethtool -c: Adaptive RX on, ice runs net_dim ({name})")
            host.set("nic.itr", "profile", '"ice"', f"ethtool -c: ice's DIM table ({name})")
            return
        how = "" if driver == "ixgbe" else f" (pktsim's dynamic ITR is ixgbe's algorithm; {driver or 'this driver'}'s adaptive moderation differs)"
        host.set("nic.itr", "mode", '"dynamic"', f"ethtool -c: Adaptive RX on{how} ({name})")
        return
    if usecs is None:
        return
    us, n = usecs
    if us == 0:
        host.set("nic.itr", "mode", '"off"', f"ethtool -c: rx-usecs 0, no throttling ({name}:{n})")
    elif us == 1 and host.driver == "ixgbe":
        host.set("nic.itr", "mode", '"dynamic"', f"ethtool -c: rx-usecs 1 is ixgbe's dynamic ITR ({name}:{n})")
    elif us > (most := max_rx_usecs()):
        host.notes.append(
            f"ethtool -c: rx-usecs {us} is beyond the {most} us of the ixgbe EITR that nic.itr models: not imported, set nic.itr yourself ({name}:{n})"
        )
    else:
        host.set("nic.itr", "mode", '"static"', f"ethtool -c: rx-usecs {us} ({name}:{n})")
        host.set("nic.itr", "interval", f'"{us}us"', f"ethtool -c: rx-usecs {us} ({name}:{n})")


def parse_ethtool(text: str, host: Host, name: str) -> None:
    for k, v, n in _kv(text):
        m = re.match(r"^(\d+)\s*Mb/s$", v)
        if k == "Speed" and m:
            mbps = int(m.group(1))
            rate = f"{mbps // 1000}Gbit/s" if mbps % 1000 == 0 else f"{mbps}Mbit/s"
            host.set("link", "rate", f'"{rate}"', f"ethtool: Speed {v} ({name}:{n})")


SYSCTLS = {
    "net.core.netdev_budget": ("host", "budget", lambda v: v, "packets per net_rx_action"),
    "net.core.netdev_budget_usecs": ("host", "budget_time", lambda v: f'"{v}us"', "time limit of net_rx_action"),
}


def max_rx_usecs() -> int:
    """The longest static interval nic.itr takes (ixgbe's rx-usecs range), as the core checks it."""
    return schema_info.largest("nic.itr.interval", "us", (("nic.itr.mode", "static"),))


def max_cores() -> int:
    """The most cores (one rx ring each) the core takes."""
    return schema_info.largest("cpu.cores")


def host_io(driver: str | None) -> str:
    """The I/O mode of a driver's receive path: veth's NAPI runs in its own thread."""
    return "threaded-napi" if driver == "veth" else "napi"


def parse_sysctl(text: str, host: Host, name: str) -> None:
    for k, v, n in _kv(text, "="):
        if k in SYSCTLS and _int(v) is not None:
            section, key, fmt, what = SYSCTLS[k]
            io = host_io(host.driver)  # (the driver is read first)
            if not schema_info.io_mode(io).reads(f"{section}.{key}"):
                host.notes.append(f"sysctl {k} = {v}: a NAPI thread does not read it (io = {io}), not imported ({name}:{n})")
                continue
            host.set(section, key, fmt(v), f"sysctl {k} = {v}: {what} ({name}:{n})")
        if k == "net.core.dev_weight" and _int(v) is not None:
            host.notes.append(f"net.core.dev_weight = {v} is the backlog's (RPS) weight, not the driver's NAPI weight ({name}:{n})")
        if k == "kernel.osrelease":
            _softirq_of_release(v, host, f"{name}:{n}")


def _softirq_of_release(release: str, host: Host, where: str) -> None:
    """``host.softirq`` from the kernel's release: softirqs raised while ksoftirqd runs are
    left to it from 4.9 (4cd13c21b207) to 6.4, and in the 5.10 / 5.15 / 6.1 stable trees;
    before 4.9 and from 6.5 (d15121be7485, the revert) they run inline. The -rt trees took
    the revert into 6.1.46-rt13 and 5.15.133-rt70."""
    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", release.strip())
    if not m:
        host.notes.append(f"kernel.osrelease = {release}: not a version, host.softirq left at its default ({where})")
        return
    io = host_io(host.driver)
    if not schema_info.io_mode(io).reads("host.softirq"):
        return
    version = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    rt = re.search(r"-rt(\d+)", release)
    reverted = version >= (6, 5, 0) or (rt is not None and (version >= (6, 1, 46) and version < (6, 2) or (5, 15, 133) <= version < (5, 16)))
    if version < (4, 9, 0) or reverted:
        value, why = "inline", "softirqs run on interrupt exit even while ksoftirqd runs (before 4.9, or the 2023 revert)"
    else:
        value, why = "defer", "softirqs raised while ksoftirqd runs are left to it (4.9 - 6.4, the 5.10 / 5.15 / 6.1 stable trees)"
    host.set("host", "softirq", f'"{value}"', f"kernel.osrelease = {release.strip()}: {why} ({where})")


_SIZE = re.compile(r"^([\d.]+)\s*([KMG])(i?B)?\b", re.I)


def _kib(v: str) -> float | None:
    """A size as lscpu prints it ("32K", "1.5 MiB"), in KiB."""
    m = _SIZE.match(v.strip())
    return float(m.group(1)) * {"K": 1, "M": 1024, "G": 1024 * 1024}[m.group(2).upper()] if m else None


def _kib_text(kib: float) -> str:
    return f'"{int(round(kib))}KiB"' if kib < 1024 or kib % 1024 else f'"{int(kib // 1024)}MiB"'


def parse_lscpu(text: str, host: Host, name: str) -> None:
    fields = {k: (v, n) for k, v, n in _kv(text)}
    freq = None
    if "Model name" in fields:
        v, n = fields["Model name"]
        m = re.search(r"@\s*([\d.]+)\s*GHz", v)
        if m:
            freq = (f'"{m.group(1)}GHz"', f"lscpu: Model name {v} ({name}:{n})")
    if freq is None:
        for key in ("CPU max MHz", "CPU MHz"):
            if key in fields:
                v, n = fields[key]
                try:
                    freq = (f'"{float(v) / 1000:g}GHz"', f"lscpu: {key} {v} ({name}:{n})")
                    break
                except ValueError:
                    pass
    if freq:
        host.set("cpu", "frequency", *freq)
    if "CPU(s)" in fields and _int(fields["CPU(s)"][0]):
        host.cpus = _int(fields["CPU(s)"][0])
        host.notes.append(f"{fields['CPU(s)'][0]} CPUs ({name}:{fields['CPU(s)'][1]})")
        # sysctl_sched_base_slice: 0.70 ms x (1 + ilog2(online CPUs, at most 8)) since
        # kernel commit 2ae891b82695 (2025, also in 6.6-stable); 0.75 ms before.
        factor = 1 + (min(host.cpus, 8).bit_length() - 1)
        host.set(
            "cpu.sched",
            "base_slice",
            f'"{700 * factor}us"',
            f"the fair class's slice, 0.70 ms x (1 + log2 of min({host.cpus} CPUs, 8)) ({name}:{fields['CPU(s)'][1]})",
        )
    for key, ours in (("L1d cache", "l1d"), ("L2 cache", "l2"), ("L3 cache", "l3")):
        if key in fields:
            v, n = fields[key]
            kib = _kib(v)
            if kib:
                # lscpu >= 2.34 prints the total over all instances: the one a core has
                # (its own L1d and L2; the L3 of its socket or core complex).
                instances = re.search(r"\((\d+) instances?\)", v)
                kib /= max(1, int(instances.group(1))) if instances else 1
                host.set("cpu.caches", ours, _kib_text(kib), f"lscpu: {key} {v} ({name}:{n})")


def parse_interrupts(text: str, host: Host, name: str) -> None:
    vectors = [line for line in text.splitlines() if re.search(rf"\b{re.escape(host.iface)}[-_]", line)]
    rx = [v for v in vectors if re.search(r"(TxRx|rx|comp|input)", v, re.I)]
    if rx and host.get("cpu", "cores") is None:
        host.set("cpu", "cores", str(len(rx)), f"/proc/interrupts: {len(rx)} rx vectors of {host.iface} ({name})")
    if vectors:
        host.notes.append(f"{len(vectors)} interrupt vectors of {host.iface} in /proc/interrupts ({name})")


def parse_napi(text: str, host: Host, name: str) -> None:
    """`grep .` of /sys/class/net/IFACE/{threaded,napi_defer_hard_irqs,gro_flush_timeout}:
    ``PATH:VALUE`` lines."""
    io = host_io(host.driver)
    for n, line in enumerate(text.splitlines(), 1):
        path, sep, value = line.rpartition(":")
        knob = path.rsplit("/", 1)[-1]
        if not sep or knob not in NAPI_FILES:
            continue
        v = _int(value)
        if v is None:
            host.notes.append(f"{knob} = {value.strip()}: not a whole number, not imported ({name}:{n})")
            continue
        if knob == "threaded":
            if io == "threaded-napi":
                if v == 0:
                    host.notes.append(f"threaded = 0: veth's NAPI runs in the NET_RX softirq, where pktsim's veth path has a thread ({name}:{n})")
                continue
            key, toml, what = "threaded", "true" if v else "false", "a kernel thread per NAPI" if v else "NAPI in the NET_RX softirq"
        elif knob == "napi_defer_hard_irqs":
            key, toml, what = "defer_hard_irqs", str(v), "empty polls before the interrupt is unmasked"
        else:
            key, toml, what = "gro_flush_timeout", f'"{v}ns"', "the deferral timer"
        if schema_info.io_mode(io).reads(f"nic.napi.{key}"):
            host.set("nic.napi", key, toml, f"sysfs {knob} = {v}: {what} ({name}:{n})")


PARSERS = {
    "ethtool-i.txt": parse_ethtool_i,
    "ethtool-g.txt": parse_ethtool_g,
    "ethtool-l.txt": parse_ethtool_l,
    "ethtool-c.txt": parse_ethtool_c,
    "ethtool.txt": parse_ethtool,
    "sysctl.txt": parse_sysctl,
    "lscpu.txt": parse_lscpu,
    "interrupts.txt": parse_interrupts,
    "cpuidle.txt": parse_cpuidle,
    "cpufreq.txt": parse_cpufreq,
    "napi.txt": parse_napi,
}


def _read(path: Path) -> str:
    from .textio import InputFileError, read_input_bytes

    try:
        data = read_input_bytes(path, "saved command output")
    except InputFileError as e:
        raise ScenarioError(str(e)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{path}: byte {e.start} is not UTF-8: expected the text a command printed") from None


def from_texts(texts: dict[str, str], iface: str = "eth0", origin: str = "") -> Host:
    """Parse saved outputs (file name -> text)."""
    host = Host(iface=iface)
    # The driver first: coalescing settings mean different things per driver.
    for name in ("ethtool-i.txt",) + tuple(n for n in FILES if n != "ethtool-i.txt"):
        if name in texts:
            PARSERS[name](texts[name], host, f"{origin}{name}")
        else:
            host.notes.append(f"{name} missing: its values are pktsim's defaults")
    return host


def from_dir(directory: str | Path, iface: str | None = None) -> Host:
    d = Path(directory)
    if not d.is_dir():
        raise ScenarioError(f"--from {d}: not a directory: expected one holding {', '.join(FILES)} (any may be missing)")
    texts = {name: _read(d / name) for name in FILES if (d / name).is_file()}
    if not texts:
        raise ScenarioError(f"--from {d}: none of {', '.join(FILES)} is there")
    if iface is None:
        iface = _iface_from_texts(texts) or "eth0"
    return from_texts(texts, iface, origin=f"{d.name}/")


def _iface_from_texts(texts: dict[str, str]) -> str | None:
    for name in ("ethtool-g.txt", "ethtool-l.txt", "ethtool-c.txt"):
        m = re.search(r"parameters for (\S+?):", texts.get(name, ""))
        if m:
            return m.group(1)
    return None


def from_live(iface: str | None = None, timeout_s: float = 5.0, files: tuple[str, ...] = FILES) -> Host:
    """Run the tools on this machine (ethtool and sysctl may be missing: then defaults);
    ``files``: only what these saved files would hold."""
    if iface is None:
        iface = next((p.name for p in sorted(Path("/sys/class/net").iterdir()) if p.name != "lo"), "eth0")
    commands = {
        "ethtool-i.txt": ["ethtool", "-i", iface],
        "ethtool-g.txt": ["ethtool", "-g", iface],
        "ethtool-l.txt": ["ethtool", "-l", iface],
        "ethtool-c.txt": ["ethtool", "-c", iface],
        "ethtool.txt": ["ethtool", iface],
        "sysctl.txt": ["sysctl", "net.core", "kernel.osrelease"],
        "lscpu.txt": ["lscpu"],
    }
    texts = {}
    for name, cmd in commands.items():
        if name not in files or shutil.which(cmd[0]) is None:
            continue
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            continue
        # (sysctl exits 1 for a user who may not read a few net.core keys, bpf_jit_harden
        # among them, and prints the others: those are still the host's.)
        if p.returncode == 0 or (name == "sysctl.txt" and p.stdout.strip()):
            texts[name] = p.stdout
    try:
        if "interrupts.txt" in files:
            texts["interrupts.txt"] = Path("/proc/interrupts").read_text()
    except OSError:
        pass
    napi = tuple(f"/sys/class/net/{iface}/{f}" for f in NAPI_FILES)
    for name, globs in (("cpuidle.txt", CPUIDLE_GLOBS), ("cpufreq.txt", CPUFREQ_GLOBS), ("napi.txt", napi)):
        text = _grep_sysfs(globs) if name in files else None
        if text:
            texts[name] = text
    return from_texts(texts, iface, origin="live ")


def _grep_sysfs(globs: tuple[str, ...]) -> str | None:
    """``grep .`` of the sysfs files `globs` name: a ``PATH:VALUE`` line each that reads
    (None when none does)."""
    lines = []
    for pattern in globs:
        for f in sorted(Path("/").glob(pattern.lstrip("/"))):
            try:
                lines.append(f"{f}:{f.read_text().strip()}")
            except OSError:
                continue
    return "\n".join(lines) + "\n" if lines else None


def to_toml(host: Host, source: str, load: Value | None = None) -> str:
    """The scenario, every value commented with where it came from; ``load`` the offered
    rate (default: 10% of the line rate)."""
    driver = host.driver or "unknown"
    lines = [
        _comment(f"# Imported by pktsim import-host from {source}: interface {host.iface}, driver {driver}."),
        "# Per-packet costs are not on the machine: [cost] takes 000's Linux router profile;",
        "# measure this host's own with `pktsim calibrate`.",
    ]
    lines += [_comment(f"#   {n}") for n in host.notes]
    lines += [f"name = {json.dumps(f'{host.iface} ({driver})')}", ""]
    s = {k: dict(v) for k, v in host.sections.items()}
    cores = s.get("cpu", {}).get("cores")
    if cores and host.cpus and int(cores.toml) > host.cpus:
        s["cpu"]["cores"] = Value(str(host.cpus), f"{cores.source}, capped at the {host.cpus} CPUs lscpu lists")
    if cores and int(s["cpu"]["cores"].toml) > max_cores():
        s["cpu"]["cores"] = Value(str(max_cores()), f"{cores.source}, capped at pktsim's {max_cores():,} rings")
    if "rate" not in s.get("link", {}):
        rate, why = DRIVER_LINK.get(driver, ("10Gbit/s", "unknown driver: 10 Gbit/s guessed"))
        s.setdefault("link", {})["rate"] = Value(f'"{rate}"', f"guessed from the driver ({why}); `ethtool {host.iface}` gives the speed")
    if "frequency" not in s.get("cpu", {}):
        s.setdefault("cpu", {})["frequency"] = Value('"3GHz"', "guessed: lscpu gave no frequency")
    io = host_io(host.driver)
    s.setdefault("host", {})["io"] = Value(
        f'"{io}"',
        "veth's NAPI runs in its own thread (threaded NAPI)" if driver == "veth" else "the kernel stack: NAPI",
    )
    if not schema_info.io_mode(io).reads("nic.itr"):
        s.get("nic.itr", {}).clear()  # the mode's NAPI takes no moderated interrupts
    if driver == "veth":
        s["host"]["t_proc"] = Value('"7us"', "guessed: the forwarding cost through veth; calibrate it")
        s.setdefault("nic", {})["dma_delay"] = Value('"0ns"', "veth has no DMA")
    # Per-event costs are not on the machine either: each the mode reads is written out
    # with its default, said to be one.
    for key in ("t_irq", "t_poll", "t_timer", "thread.t_wakeup", "batch.t_wakeup"):
        if schema_info.io_mode(io).reads(f"host.{key}") and key not in s["host"]:
            default = (schema_info.node(f"host.{key}") or {}).get("default")
            if default is not None:
                s["host"][key] = Value(f'"{default}"', "the default, a published machine's (docs/scenario-reference.md), not this host's; calibrate it")
    if "cpu.idle" not in s:
        s["cpu.idle"] = {
            "table": Value('"intel-skx"', "the default, a published machine's (intel_idle's Xeon Scalable states), not this host's: no cpuidle.txt")
        }
    if not schema_info.io_mode(io).reads("host.softirq"):
        s.pop("cpu.sched", None)  # (the fair class runs on the cores of a device's NAPI)
    order = ["cpu", "cpu.caches", "cpu.idle", "cpu.freq", "cpu.sched", "link", "traffic", "cost", "nic", "nic.itr", "nic.napi", "host"]
    defaults = {
        "traffic": {
            "rate": load or Value('"10%"', "a light load to start from; sweep it"),
            "flows": Value("4096", "many flows, so RSS spreads them over the cores"),
        },
        "cost": {"profile": Value('"raumer2015-64B"', "000's Linux router (Linux 3.7, Xeon E3-1230 v2); replace with `pktsim calibrate`")},
    }
    for sec, vals in defaults.items():
        for k, v in vals.items():
            s.setdefault(sec, {}).setdefault(k, v)
    width = 34
    for sec in order:
        vals = s.get(sec)
        if not vals:
            continue
        lines.append(f"[{sec}]")
        for k, v in vals.items():
            try:
                tomllib.loads(f"x = {v.toml}")
            except tomllib.TOMLDecodeError:
                raise ScenarioError(f"{source}: {sec}.{k} = {v.toml!r} (from {_comment(v.source)}): not a TOML value; expected the command's output") from None
            lines.append(_comment(f"{f'{k} = {v.toml}':<{width}} # {v.source}"))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _comment(line: str) -> str:
    """A line with no control character in it (a saved output's value, a file name): a
    newline there would end a TOML comment and start a line of garbage."""
    return "".join(" " if (ord(c) < 32 and c != "\t") or ord(c) == 127 else c for c in line)
