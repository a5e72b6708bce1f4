"""The testbed's three network namespaces and what is placed in them.

::

    pktsim-tb-gen                 pktsim-tb-dut (ip_forward = 1)              pktsim-tb-sink
    tb-gen0 198.18.0.1/30 ==veth== tb-dut0 198.18.0.2/30   tb-dut1 198.18.0.5/30 ==veth== tb-sink0 198.18.0.6/30
      TSO off                      GRO on, threaded NAPI   nftables dial (forward hook)     RPS -> CPU 0
                                   thread pinned to the    N /32 routes in 198.19.0.0/16
                                   dut CPU, SCHED_FIFO     via 198.18.0.6

The generator sends UDP to 198.19.0.0/16: the dut forwards it to the sink, which has
forwarding off and drops it quietly after its packet socket has seen it. The sink's veth
has no NAPI of its own, so the dut's transmit puts each frame into a backlog; RPS sends
that backlog to the generator's CPU, leaving the dut CPU to the dut (the frame is
time-stamped as it is queued, i.e. at dut egress).

Everything the testbed creates is named ``pktsim-tb-*`` / ``tb-*`` and is deleted on
every way out (normal end, error, Ctrl-C, SIGTERM); namespaces left by a crashed run are
deleted before a new one starts. Only addresses from 198.18.0.0/15 are used.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import TestbedError

NAMESPACES = ("pktsim-tb-gen", "pktsim-tb-dut", "pktsim-tb-sink")
GEN, DUT, SINK = NAMESPACES
GEN_IF, DUT_IN, DUT_OUT, SINK_IF = "tb-gen0", "tb-dut0", "tb-dut1", "tb-sink0"
GEN_IP, DUT_IN_IP, DUT_OUT_IP, SINK_IP = "198.18.0.1", "198.18.0.2", "198.18.0.5", "198.18.0.6"
DST_NET = ipaddress.ip_network("198.19.0.0/16")
DST_BASE = ipaddress.ip_address("198.19.0.1")
BENCHMARK_NET = ipaddress.ip_network("198.18.0.0/15")
MAX_ROUTES = 65_000
MAX_RULES = 50_000
NAPI_PRIORITY = 50
LOCK_PATH = Path("/run/pktsim-testbed.lock")



def _sh(*cmd: str, input: str | None = None, ns: str | None = None, check: bool = True) -> str:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    try:
        p = subprocess.run(full, input=input, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise TestbedError(f"{cmd[0]}: not found (the testbed needs iproute2, ethtool and nftables; `make install` as root installs them)") from None
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{' '.join(full)}: no answer within 120 s") from None
    if check and p.returncode != 0:
        raise TestbedError(f"{' '.join(full[:8])}{' ...' if len(full) > 8 else ''}: {p.stderr.strip() or f'exit {p.returncode}'}")
    return p.stdout


def require_root() -> None:
    if os.geteuid() != 0:
        raise TestbedError("the testbed creates network namespaces and pins kernel threads: run it as root (e.g. sudo .venv/bin/pktsim testbed ...)")
    for tool in ("ip", "ethtool", "nft"):
        if shutil.which(tool) is None:
            raise TestbedError(f"{tool}: not found; install iproute2, ethtool and nftables (`make install` as root does)")
    if (os.cpu_count() or 1) < 2:
        raise TestbedError("the testbed needs 2 CPUs: one for the device under test, one for generator and sink")


def stale_namespaces() -> list[str]:
    out = _sh("ip", "netns", "list", check=False)
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n in NAMESPACES]


def teardown() -> list[str]:
    """Delete every namespace the testbed makes (their veths go with them). Returns the names deleted."""
    gone = []
    for ns in stale_namespaces():
        _kill_processes_in(ns)
        _sh("ip", "netns", "del", ns, check=False)
        gone.append(ns)
    return gone


def _kill_processes_in(ns: str) -> None:
    out = _sh("ip", "netns", "pids", ns, check=False)
    for pid in out.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


@dataclass
class Placement:
    """CPUs of the parts: the dut's NAPI thread alone on ``dut_cpu``."""

    dut_cpu: int = 1
    load_cpu: int = 0


@dataclass
class Topology:
    """Build with :meth:`up` (or ``with Topology(...) as t``); :meth:`down` always runs."""

    routes: int = 0
    rules: int = 0
    placement: Placement = field(default_factory=Placement)
    napi_pid: int | None = None
    dut_mac: str = ""
    _lock: object | None = None

    def __post_init__(self):
        if not 0 <= self.routes <= MAX_ROUTES:
            raise TestbedError(f"--routes {self.routes}: expected a number of /32 routes from 0 to {MAX_ROUTES}")
        if not 0 <= self.rules <= MAX_RULES:
            raise TestbedError(f"--rules {self.rules}: expected a number of nftables rules from 0 to {MAX_RULES}")

    # ------------------------------------------------------------------ life cycle

    def __enter__(self) -> "Topology":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        require_root()
        self._take_lock()
        try:
            teardown()  # whatever a crashed run left behind
            self._build()
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        teardown()
        if self._lock is not None:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_UN)
                self._lock.close()
            finally:
                self._lock = None

    def _take_lock(self) -> None:
        f = open(LOCK_PATH, "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise TestbedError(f"another testbed run holds {LOCK_PATH}; wait for it to end") from None
        self._lock = f

    # ------------------------------------------------------------------ building

    def _build(self) -> None:
        for ns in NAMESPACES:
            _sh("ip", "netns", "add", ns)
            # No IPv6 chatter (router solicitations, DAD) on the measured links.
            for key in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
                _sh("sysctl", "-qw", f"{key}=1", ns=ns, check=False)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        _sh("ip", "link", "add", GEN_IF, "netns", GEN, "type", "veth", "peer", "name", DUT_IN, "netns", DUT)
        _sh("ip", "link", "add", DUT_OUT, "netns", DUT, "type", "veth", "peer", "name", SINK_IF, "netns", SINK)
        for ns, dev, addr in ((GEN, GEN_IF, GEN_IP), (DUT, DUT_IN, DUT_IN_IP), (DUT, DUT_OUT, DUT_OUT_IP), (SINK, SINK_IF, SINK_IP)):
            assert ipaddress.ip_address(addr) in BENCHMARK_NET
            _sh("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
        _sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=DUT)
        _sh("ip", "-n", GEN, "route", "add", str(DST_NET), "via", DUT_IN_IP)
        _sh("ip", "-n", DUT, "route", "add", str(DST_NET), "via", SINK_IP)
        # Static neighbours: no ARP during a run.
        self.dut_mac = mac(DUT, DUT_IN)
        _sh("ip", "-n", GEN, "neigh", "replace", DUT_IN_IP, "lladdr", self.dut_mac, "dev", GEN_IF, "nud", "permanent")
        _sh("ip", "-n", DUT, "neigh", "replace", SINK_IP, "lladdr", mac(SINK, SINK_IF), "dev", DUT_OUT, "nud", "permanent")
        # veth takes its NAPI path only with GRO on at the receiver and TSO off at the sender.
        _sh("ethtool", "-K", GEN_IF, "tso", "off", ns=GEN)
        _sh("ethtool", "-K", DUT_IN, "gro", "on", ns=DUT)
        _sh("sh", "-c", f"echo 1 > /sys/class/net/{DUT_IN}/threaded", ns=DUT)
        _sh("sh", "-c", f"echo {1 << self.placement.load_cpu:x} > /sys/class/net/{SINK_IF}/queues/rx-0/rps_cpus", ns=SINK)
        self._routes()
        self._rules()
        self.napi_pid = self._place_napi_thread()

    def _routes(self) -> None:
        if not self.routes:
            return
        base = int(DST_BASE)
        lines = [f"route add {ipaddress.ip_address(base + i)}/32 via {SINK_IP} dev {DUT_OUT}" for i in range(self.routes)]
        _sh("ip", "-n", DUT, "-batch", "-", input="\n".join(lines) + "\n")

    def _rules(self) -> None:
        if not self.rules:
            return
        # Rules that never match this traffic (it goes to UDP port 9001): each costs one
        # evaluation per forwarded packet.
        body = "\n".join(f"    udp dport {10_000 + i} drop" for i in range(self.rules))
        text = f"table inet pktsim_tb {{\n  chain forward_dial {{\n    type filter hook forward priority 0; policy accept;\n{body}\n  }}\n}}\n"
        _sh("nft", "-f", "-", input=text, ns=DUT)

    def _place_napi_thread(self) -> int:
        deadline = time.monotonic() + 5
        pat = re.compile(rf"^napi/{re.escape(DUT_IN)}-\d+$")
        while time.monotonic() < deadline:
            for pid in _pids():
                if pat.match(_comm(pid)):
                    os.sched_setaffinity(pid, {self.placement.dut_cpu})
                    os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(NAPI_PRIORITY))
                    return pid
            time.sleep(0.05)
        raise TestbedError(f"no threaded NAPI kernel thread napi/{DUT_IN}-* appeared (does this kernel support threaded NAPI on veth?)")

    @property
    def destinations(self) -> int:
        """Destination addresses the generator cycles through (one per route)."""
        return max(1, self.routes)


def mac(ns: str, dev: str) -> str:
    return _sh("cat", f"/sys/class/net/{dev}/address", ns=ns).strip()


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
