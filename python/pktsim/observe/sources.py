"""What ``pktsim observe`` reads, and how each source is parsed: only what the kernel already
exposes, read-only.

- ``/sys/class/net/IFACE/statistics/*``: the interface's packet, byte and drop counters;
- ``/proc/interrupts``: the interrupts of the interface's vectors (a line whose name holds
  the interface's name or its PCI device's), per CPU;
- ``/proc/net/softnet_stat``: per CPU, frames the NET_RX softirq processed, frames dropped
  at the backlog, and time squeezes (a poll round that ran out of budget or time);
- ``/proc/softirqs``: NET_RX and NET_TX softirqs per CPU;
- ``/proc/stat``: per CPU, the time in hard IRQs, softirqs, system, user and idle (USER_HZ
  ticks);
- ``/proc/net/snmp``: UDP datagrams delivered and dropped at a full socket
  (``RcvbufErrors``), in the namespace observe runs in;
- ``/proc/sys/net/core/*``: the sysctls that bound a poll (``netdev_budget``,
  ``netdev_budget_usecs``, ``dev_weight``, ``netdev_max_backlog``);
- ``ethtool -S IFACE``: the driver's own counters (per-queue drops, buffer shortages, XDP
  verdicts; mlx5 counts its NAPI polls per channel), where the driver has them;
- ``/proc/PID/schedstat`` and ``/proc/PID/status`` of the interface's NAPI threads (kernel
  threads ``napi/IFACE-ID``, threaded NAPI): their CPU time (ns, exact) and wake-ups
  (voluntary context switches).

Each parser takes the file's text and its name, and raises :class:`ObserveError` naming
the file, the line and what was expected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


class ObserveError(ValueError):
    """A source that is there but cannot be read as expected: names the file and line."""


def _err(origin: str, n: int | None, expected: str, got: str = "") -> ObserveError:
    where = f"{origin}:{n}" if n else origin
    return ObserveError(f"{where}: {got[:80]!r}: expected {expected}" if got else f"{where}: expected {expected}")


STAT_COUNTERS = ("rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped", "rx_missed_errors", "rx_fifo_errors", "rx_errors")


def netdev_stats(directory: Path) -> dict[str, int]:
    """The interface's counters (``statistics/``): those of STAT_COUNTERS it has."""
    out = {}
    for name in STAT_COUNTERS:
        f = directory / name
        try:
            text = f.read_text()
        except OSError:
            continue
        try:
            out[name] = int(text.strip())
        except ValueError:
            raise _err(str(f), 1, "a counter (a whole number)", text.strip()) from None
    if "rx_packets" not in out:
        raise _err(str(directory), None, "the interface's statistics (rx_packets, tx_packets, ...)")
    return out


def interrupts(text: str, origin: str = "/proc/interrupts") -> tuple[int, dict[str, tuple[str, list[int]]]]:
    """(CPUs, {irq: (name, per-CPU counts)}) of ``/proc/interrupts``."""
    lines = text.splitlines()
    if not lines:
        raise _err(origin, None, "a header of CPU columns (CPU0 CPU1 ...)")
    head = lines[0].split()
    if not head or not all(re.fullmatch(r"CPU\d+", h) for h in head):
        raise _err(origin, 1, "a header of CPU columns (CPU0 CPU1 ...)", lines[0])
    cpus = len(head)
    out = {}
    for n, line in enumerate(lines[1:], 2):
        if ":" not in line:
            raise _err(origin, n, "IRQ: counts per CPU and the handler's name", line)
        irq, rest = line.split(":", 1)
        parts = rest.split()
        counts = []
        for p in parts[:cpus]:
            if not p.isdigit():
                break
            counts.append(int(p))
        if len(counts) < cpus:
            continue  # ERR:, MIS: and the like carry one count for the whole machine
        name = " ".join(parts[len(counts) :])
        out[irq.strip()] = (name, counts)
    return cpus, out


def softnet_stat(text: str, origin: str = "/proc/net/softnet_stat") -> list[dict[str, int]]:
    """Per CPU (one line each, hexadecimal): processed, dropped, time_squeeze."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if len(parts) < 3:
            raise _err(origin, n, "at least three hexadecimal fields (processed, dropped, time_squeeze)", line)
        try:
            processed, dropped, squeeze = (int(p, 16) for p in parts[:3])
        except ValueError:
            raise _err(origin, n, "hexadecimal fields", line) from None
        out.append({"processed": processed, "dropped": dropped, "time_squeeze": squeeze})
    if not out:
        raise _err(origin, None, "a line per CPU")
    return out


def softirqs(text: str, origin: str = "/proc/softirqs") -> dict[str, list[int]]:
    """{NET_RX: per CPU, NET_TX: per CPU, ...}."""
    out = {}
    lines = text.splitlines()
    for n, line in enumerate(lines[1:], 2):
        if ":" not in line:
            raise _err(origin, n, "NAME: counts per CPU", line)
        name, rest = line.split(":", 1)
        try:
            out[name.strip()] = [int(p) for p in rest.split()]
        except ValueError:
            raise _err(origin, n, "whole-number counts per CPU", line) from None
    if "NET_RX" not in out:
        raise _err(origin, None, "a NET_RX line")
    return out


STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def proc_stat(text: str, origin: str = "/proc/stat") -> list[dict[str, int]]:
    """Per CPU, the ticks (USER_HZ) in each of STAT_FIELDS."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^cpu(\d+)\s+(.*)$", line)
        if not m:
            continue
        parts = m.group(2).split()
        if len(parts) < len(STAT_FIELDS) or not all(p.isdigit() for p in parts[: len(STAT_FIELDS)]):
            raise _err(origin, n, f"cpuN and at least {len(STAT_FIELDS)} tick counts", line)
        out.append(dict(zip(STAT_FIELDS, map(int, parts))))
    if not out:
        raise _err(origin, None, "cpu0 ... lines")
    return out


SYSCTLS = ("netdev_budget", "netdev_budget_usecs", "dev_weight", "netdev_max_backlog", "busy_poll", "busy_read")


def snmp_udp(text: str, origin: str = "/proc/net/snmp") -> dict[str, int]:
    """The UDP counters of ``/proc/net/snmp`` (a ``Udp:`` line of names, then one of
    values): InDatagrams, RcvbufErrors (a full socket), InErrors ..."""
    lines = [(n, line.split()) for n, line in enumerate(text.splitlines(), 1) if line.startswith("Udp:")]
    if len(lines) < 2:
        raise _err(origin, None, "two Udp: lines, the counters' names and their values")
    (_, names), (n, values) = lines[0], lines[1]
    if len(names) != len(values) or not all(v.lstrip("-").isdigit() for v in values[1:]):
        raise _err(origin, n, f"{len(names) - 1} whole numbers after Udp:, one per name of the line before", " ".join(values))
    return dict(zip(names[1:], map(int, values[1:])))


def ethtool_stats(text: str, origin: str = "ethtool -S") -> dict[str, int]:
    """The counters of ``ethtool -S`` output: ``NIC statistics:`` and a ``name: value`` line
    each (a name may hold dots, dashes and brackets: ``port.rx_dropped``, ``rx-0.packets``)."""
    out: dict[str, int] = {}
    lines = text.splitlines()
    if not lines or lines[0].strip() != "NIC statistics:":
        raise _err(origin, 1, "ethtool -S output, starting 'NIC statistics:'", lines[0] if lines else "")
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        name, sep, value = line.rpartition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value.isdigit():
            raise _err(origin, n, "a counter as 'name: whole number'", line)
        out[name] = int(value)
    return out


# Counters of `ethtool -S` that count frames lost or bad, by name (drivers name them differently:
# ixgbe rx_no_buffer_count and rx_no_dma_resources, mlx5 rx_out_of_buffer and
# rx_discards_phy, i40e and ice port.rx_dropped / rx_dropped.nic, veth rx_queue_N_drops).
# A counter of errors (rx_crc_errors, tx_errors.nic, rx_wqe_err) counts bad frames too.
DROP_COUNTER = re.compile(r"drop|discard|missed|out_of_buffer|no_buffer|no_dma|tx_full|alloc.*fail|(^|_)(errors?|err)([_.]|$)", re.I)
# Per-channel NAPI polls and completion events, where the driver counts them (mlx5: chN_poll,
# chN_events).
POLL_COUNTER = re.compile(r"^ch\d+_poll$")


def ethtool_text(iface: str, timeout_s: float = 2.0) -> tuple[str | None, str]:
    """``ethtool -S IFACE``'s output (read-only), or (None, why not)."""
    import shutil
    import subprocess

    if shutil.which("ethtool") is None:
        return None, "ethtool -S: ethtool is not installed (driver counters)"
    try:
        p = subprocess.run(["ethtool", "-S", iface], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"ethtool -S {iface}: {e}"
    if p.returncode != 0:
        why = (p.stderr or p.stdout).strip().splitlines()
        return None, f"ethtool -S {iface}: {why[-1] if why else f'exit {p.returncode}'} (the driver has no counters of its own)"
    return p.stdout, ""


def napi_thread_prefix(iface: str) -> str:
    """The name the kernel gives the interface's NAPI threads (``napi/%s-%d``), as a task's
    comm holds it: at most 15 characters."""
    return f"napi/{iface}-"[:15]


def napi_threads(ifaces: list[str], root: Path = Path("/")) -> dict[str, list[int]]:
    """The pids of each interface's NAPI threads (kernel threads ``napi/IFACE-ID``)."""
    out: dict[str, list[int]] = {i: [] for i in ifaces}
    proc = root / "proc"
    try:
        pids = [p for p in proc.iterdir() if p.name.isdigit()]
    except OSError:
        return out
    for p in pids:
        try:
            comm = (p / "comm").read_text().strip()
        except OSError:
            continue
        if not comm.startswith("napi/"):
            continue
        for i in ifaces:
            if comm.startswith(napi_thread_prefix(i)):
                out[i].append(int(p.name))
    return out


def thread_counters(pid: int, root: Path = Path("/")) -> tuple[int, int, int] | None:
    """(CPU time in ns, wake-ups, the CPU it last ran on) of a thread: ``schedstat``'s first
    field, its voluntary context switches (each a sleep it was woken from) and ``stat``'s
    ``processor``; None once it is gone."""
    d = root / "proc" / str(pid)
    try:
        ns = int((d / "schedstat").read_text().split()[0])
        switches = next(int(line.split()[1]) for line in (d / "status").read_text().splitlines() if line.startswith("voluntary_ctxt_switches:"))
        # (The fields after the command's closing parenthesis: processor is the 39th of the line.)
        cpu = int((d / "stat").read_text().rpartition(")")[2].split()[36])
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return ns, switches, cpu


@dataclass
class Snapshot:
    """Every source at one instant (``t_ns``: CLOCK_MONOTONIC), and what was missing."""

    t_ns: int
    netdev: dict[str, dict[str, int]] = field(default_factory=dict)
    vectors: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # iface -> irq name -> per CPU
    softnet: list[dict[str, int]] = field(default_factory=list)
    softirqs: dict[str, list[int]] = field(default_factory=dict)
    stat: list[dict[str, int]] = field(default_factory=list)
    ethtool: dict[str, dict[str, int]] = field(default_factory=dict)  # iface -> ethtool -S counters
    udp: dict[str, int] = field(default_factory=dict)  # /proc/net/snmp's Udp counters
    threads: dict[str, dict[int, tuple[int, int, int]]] = field(default_factory=dict)  # iface -> pid -> (ns, wake-ups, CPU)
    missing: list[str] = field(default_factory=list)


def _read(path: Path, snap: Snapshot) -> str | None:
    try:
        return path.read_text()
    except OSError as e:
        snap.missing.append(f"{path}: {e.strerror or e}")
        return None


def pci_device(root: Path, iface: str) -> str:
    """The PCI address of the interface's device (``0000:03:00.0``), or ""."""
    try:
        return Path((root / "sys/class/net" / iface / "device").resolve()).name if (root / "sys/class/net" / iface / "device").exists() else ""
    except OSError:
        return ""


def names_vector(handler: str, iface: str, device: str = "") -> bool:
    """Whether an interrupt's handler name is the interface's: its name as a whole word
    (``eth1-TxRx-0`` is eth1's, ``eth10-TxRx-0`` is not) or its device's (an mlx5 vector
    names the PCI address, a virtio one the virtio device)."""
    for key in (iface, device):
        if key and re.search(rf"(?<![\w.]){re.escape(key)}(?![\w.])", handler):
            return True
    return False


# The machine-wide files of a snapshot: where each is, its parser, the Snapshot field.
_PROC_FILES = (
    ("proc/net/softnet_stat", softnet_stat, "softnet"),
    ("proc/softirqs", softirqs, "softirqs"),
    ("proc/stat", proc_stat, "stat"),
    ("proc/net/snmp", snmp_udp, "udp"),
)


def take(ifaces: list[str], root: Path = Path("/"), threads: dict[str, list[int]] | None = None, ethtool: bool = False) -> Snapshot:
    """Every source now (``root``: where /proc and /sys are, for saved trees; ``threads``:
    each interface's NAPI threads to read; ``ethtool``: run ``ethtool -S`` on each)."""
    import time

    snap = Snapshot(time.monotonic_ns())
    for i in ifaces:
        snap.netdev[i] = netdev_stats(root / "sys/class/net" / i / "statistics")
    for i, pids in (threads or {}).items():
        snap.threads[i] = {pid: c for pid in pids if (c := thread_counters(pid, root)) is not None}
    text = _read(root / "proc/interrupts", snap)
    if text is not None:
        _, irqs = interrupts(text, str(root / "proc/interrupts"))
        for i in ifaces:
            snap.vectors[i] = {name: counts for name, counts in irqs.values() if names_vector(name, i, pci_device(root, i))}
    for rel, parse, attr in _PROC_FILES:
        text = _read(root / rel, snap)
        if text is not None:
            setattr(snap, attr, parse(text, str(root / rel)))
    if ethtool:  # (last: a command, milliseconds; the counters above are read in microseconds)
        for i in ifaces:
            text, why = ethtool_text(i)
            try:
                if text is None:
                    raise ObserveError(why)
                snap.ethtool[i] = ethtool_stats(text, f"ethtool -S {i}")
            except ObserveError as e:
                # (A driver's counters in a form the parser does not know are named, not
                # fatal: the kernel's own counters above still make the observation.)
                snap.missing.append(str(e))
    return snap


def sysctls(root: Path = Path("/")) -> dict[str, int]:
    out = {}
    for k in SYSCTLS:
        try:
            out[k] = int((root / "proc/sys/net/core" / k).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out
