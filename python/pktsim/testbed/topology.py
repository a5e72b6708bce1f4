"""The testbed's three network namespaces and what is placed in them.

::

    pktsim-tb-gen                 pktsim-tb-dut (ip_forward = 1)              pktsim-tb-sink
    tb-gen0 198.18.0.1/30 ==veth== tb-dut0 198.18.0.2/30   tb-dut1 198.18.0.5/30 ==veth== tb-sink0 198.18.0.6/30
      TSO off                      GRO on, threaded NAPI   nftables dial (forward hook)     RPS -> CPU 0
                                   thread pinned to the    N /32 routes in 198.19.0.0/16
                                   dut CPU, SCHED_FIFO     via 198.18.0.6

With ``xdp`` an XDP program on tb-dut0 redirects every frame to tb-dut1 through a devmap
(no skb, no routing, no nftables) and tb-sink0 carries XDP_PASS with its NAPI thread on
the load CPU; the programs are held by ``pktsim-tb xdp`` children through BPF links.
:meth:`Topology.set_deferral` sets tb-dut0's ``napi_defer_hard_irqs`` and
``gro_flush_timeout``.

The generator sends UDP to 198.19.0.0/16: the dut forwards it to the sink, which has
forwarding off and drops it quietly after its packet socket has seen it. The sink's veth
has no NAPI of its own, so the dut's transmit puts each frame into a backlog; RPS sends
that backlog to the generator's CPU, leaving the dut CPU to the dut (the frame is
time-stamped as it is queued, i.e. at dut egress).

Everything the testbed creates is named ``pktsim-tb-*`` / ``tb-*`` and is deleted on
every way out (normal end, error, Ctrl-C, SIGTERM). Only addresses from 198.18.0.0/15
are used.

A run holds :data:`LOCK_PATH` (``flock``) from before it builds until it has torn down,
and writes its PID and temporary directory into it. Its long-lived children (generator,
sink, perf) carry ``PKTSIM_TB_PARENT=<run PID>`` in their environment and die with the
run (``PR_SET_PDEATHSIG``). What a killed run leaves (namespaces, processes marked with
another PID, its temporary directory and other ``pktsim-tb-*`` directories in the
temporary directory) is reaped by the next run or ``pktsim testbed teardown``, which
both hold the lock while they do it; ``teardown`` refuses while a live run holds it. The
lock and the reaping are :mod:`pktsim.testbed.leftovers` (its names are given here too).
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import TestbedError
from .leftovers import (
    FORCE_WAIT_S,
    LOCK_PATH,
    NAMESPACES,
    PARENT_ENV,
    TMP_PREFIX,
    Lock,
    LockBusy,
    _kill_and_wait,
    _pids,
    _sh,
    _signals_held,
    lock_holder,
    marked_processes,
    reap,
    restore_sysctls,
    stale_namespaces,
    teardown,
    teardown_all,
)

__all__ = [
    "FORCE_WAIT_S",
    "LOCK_PATH",
    "NAMESPACES",
    "PARENT_ENV",
    "TMP_PREFIX",
    "Lock",
    "LockBusy",
    "lock_holder",
    "marked_processes",
    "reap",
    "restore_sysctls",
    "stale_namespaces",
    "teardown",
    "teardown_all",
    "TestbedError",
    "GEN",
    "DUT",
    "SINK",
    "GEN_IF",
    "DUT_IN",
    "DUT_OUT",
    "SINK_IF",
    "GEN_IP",
    "DUT_IN_IP",
    "DUT_OUT_IP",
    "SINK_IP",
    "DST_NET",
    "DST_BASE",
    "BENCHMARK_NET",
    "MAX_ROUTES",
    "MAX_RULES",
    "MAX_XDP_LOOPS",
    "NAPI_PRIORITY",
    "SINK_NAPI_PRIORITY",
    "XDP_HOLD_MS",
    "require_root",
    "die_with_parent",
    "child_env",
    "tb_binary",
    "Placement",
    "Topology",
    "mac",
]

GEN, DUT, SINK = NAMESPACES
GEN_IF, DUT_IN, DUT_OUT, SINK_IF = "tb-gen0", "tb-dut0", "tb-dut1", "tb-sink0"
GEN_IP, DUT_IN_IP, DUT_OUT_IP, SINK_IP = "198.18.0.1", "198.18.0.2", "198.18.0.5", "198.18.0.6"
DST_NET = ipaddress.ip_network("198.19.0.0/16")
DST_BASE = ipaddress.ip_address("198.19.0.1")
BENCHMARK_NET = ipaddress.ip_network("198.18.0.0/15")
MAX_ROUTES = 65_000
MAX_RULES = 50_000
MAX_XDP_LOOPS = 100_000
NAPI_PRIORITY = 50
# The sink's NAPI thread (XDP path) on the load CPU: above the sink reader and the generator.
SINK_NAPI_PRIORITY = 20
# How the dut's ingress veth can receive (Topology.receive).
RECEIVE = ("threaded", "softirq")
# `pktsim-tb xdp` holds its program at most this long (it dies with the run before that).
XDP_HOLD_MS = 86_400_000


def require_root() -> None:
    if os.geteuid() != 0:
        raise TestbedError("the testbed creates network namespaces and pins kernel threads: run it as root (e.g. sudo .venv/bin/pktsim testbed ...)")
    for tool in ("ip", "ethtool", "nft"):
        if shutil.which(tool) is None:
            raise TestbedError(f"{tool}: not found; install iproute2, ethtool and nftables (`make install` as root does)")
    if (os.cpu_count() or 1) < 2:
        raise TestbedError("the testbed needs 2 CPUs: one for the device under test, one for generator and sink")


# ---------------------------------------------------------------------------------- children

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int):
    """A ``preexec_fn`` for children that are not pktsim-tb (perf): SIGKILL when the run dies."""

    def pre() -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return pre


def child_env() -> dict:
    """The environment of a run's children: marked with the run's PID."""
    return {**os.environ, PARENT_ENV: str(os.getpid())}


def tb_binary() -> str:
    """The compiled generator/sink: $PKTSIM_TB, else next to this Python, else on PATH."""
    env = os.environ.get("PKTSIM_TB")
    if env:
        return env
    here = Path(sys.executable).parent / "pktsim-tb"
    if here.exists():
        return str(here)
    found = shutil.which("pktsim-tb")
    if found:
        return found
    repo = Path(__file__).resolve().parents[3] / "target" / "release" / "pktsim-tb"
    if repo.exists():
        return str(repo)
    raise TestbedError("pktsim-tb (the testbed's generator and sink) is not built: run `make install`")


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
    # XDP_REDIRECT from the dut's ingress veth to its egress veth through a devmap (no skb,
    # no nftables); the sink's veth carries XDP_PASS and a NAPI thread on the load CPU.
    xdp: bool = False
    xdp_loops: int = 0  # the XDP program's cost dial: turns of an empty loop per frame
    # The generator's destination is the dut's own address (on its loopback): the dut
    # delivers to a local UDP socket, and the nftables dial sits on the input hook.
    local: bool = False
    # How the dut receives: "threaded" (veth's NAPI in a kernel thread on the dut CPU) or
    # "softirq" (GRO off, so veth has no NAPI: each frame goes to a backlog, which RPS
    # puts on the dut CPU, whose NET_RX softirq processes it after the RPS IPI).
    receive: str = "threaded"
    # The NAPI thread's scheduling class: "fifo" (NAPI_PRIORITY) or "other" (the kernel's
    # default for NAPI threads: SCHED_OTHER, nice 0).
    napi_policy: str = "fifo"
    placement: Placement = field(default_factory=Placement)
    napi_pid: int | None = None
    sink_napi_pid: int | None = None
    dut_mac: str = ""
    tmp: str | None = None  # the run's temporary directory (removed by down())
    _lock: Lock | None = None
    _holders: list = field(default_factory=list)  # pktsim-tb xdp children holding programs

    def __post_init__(self):
        if not 0 <= self.routes <= MAX_ROUTES:
            raise TestbedError(f"--routes {self.routes}: expected a number of /32 routes from 0 to {MAX_ROUTES}")
        if not 0 <= self.xdp_loops <= MAX_XDP_LOOPS:
            raise TestbedError(f"--loops {self.xdp_loops}: expected a number of XDP loop turns from 0 to {MAX_XDP_LOOPS}")
        if not 0 <= self.rules <= MAX_RULES:
            raise TestbedError(f"--rules {self.rules}: expected a number of nftables rules from 0 to {MAX_RULES}")
        if self.receive not in RECEIVE:
            raise TestbedError(f"receive {self.receive!r}: expected one of {', '.join(RECEIVE)}")
        if self.napi_policy not in ("fifo", "other"):
            raise TestbedError(f"napi_policy {self.napi_policy!r}: expected fifo or other")

    # ------------------------------------------------------------------ life cycle

    def __enter__(self) -> Topology:
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        require_root()
        try:
            self._lock = Lock()
        except LockBusy as e:
            raise TestbedError(f"{e}; wait for it to end") from None
        try:
            reap(self._lock.previous)  # whatever a killed run left behind
            self.tmp = tempfile.mkdtemp(prefix=TMP_PREFIX)
            self._lock.write(tmp=self.tmp)
            self._build()
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        with _signals_held():
            try:
                for proc in self._holders:  # their links close: the programs detach
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                self._holders.clear()
                if self._lock is not None:
                    _kill_and_wait(marked_processes())  # our own children, if any are left
                teardown()
                if self.tmp:
                    shutil.rmtree(self.tmp, ignore_errors=True)
                    self.tmp = None
            finally:
                if self._lock is not None:
                    self._lock.release()
                    self._lock = None

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
        if self.local:
            _sh("ip", "-n", DUT, "addr", "add", f"{DST_BASE}/32", "dev", "lo")
        _sh("ethtool", "-K", GEN_IF, "tso", "off", ns=GEN)
        _sh("sh", "-c", f"echo {1 << self.placement.load_cpu:x} > /sys/class/net/{SINK_IF}/queues/rx-0/rps_cpus", ns=SINK)
        self._routes()
        self._rules()
        self.set_receive(self.receive, self.napi_policy)
        if self.xdp:
            self._xdp()

    def attach_xdp(self, loops: int) -> None:
        """The XDP redirect (with ``loops`` turns of its cost loop) on a topology built
        without it: from here on the dut forwards as :attr:`xdp` does."""
        if not 0 <= loops <= MAX_XDP_LOOPS:
            raise TestbedError(f"--loops {loops}: expected a number of XDP loop turns from 0 to {MAX_XDP_LOOPS}")
        self.xdp, self.xdp_loops = True, loops
        self._xdp()

    def _xdp(self) -> None:
        """XDP_PASS on the sink's veth (veth's ndo_xdp_xmit needs the receiver's NAPI),
        whose NAPI thread runs on the load CPU, then the redirect on the dut's ingress.
        Each program is held by a `pktsim-tb xdp` child through a BPF link: it leaves the
        interface when that child ends, which it does with the run (even a killed one)."""
        self._hold_xdp(SINK, SINK_IF, ["--prog", "pass"])  # veth has a NAPI (to thread) from here on
        _sh("sh", "-c", f"echo 1 > /sys/class/net/{SINK_IF}/threaded", ns=SINK)
        self.sink_napi_pid = self._place_napi_thread(SINK_IF, self.placement.load_cpu, SINK_NAPI_PRIORITY)
        self._hold_xdp(DUT, DUT_IN, ["--prog", "redirect", "--to", DUT_OUT, "--loops", str(self.xdp_loops)])

    def _hold_xdp(self, ns: str, dev: str, prog: list[str]) -> None:
        ready = Path(self.tmp or tempfile.gettempdir()) / f"xdp-{dev}-ready"
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, tb_binary(), "xdp", "--iface", dev, *prog, "--duration-ms", str(XDP_HOLD_MS), "--ready-file", str(ready)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        self._holders.append(proc)
        deadline = time.monotonic() + 5
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                if proc.poll() is None:
                    proc.kill()
                err = proc.communicate()[1].strip()
                raise TestbedError(f"could not attach XDP to {dev}: {err or 'no answer within 5 s'} (native XDP on veth needs Linux 5.9 or later with BPF)")
            time.sleep(0.01)

    def set_receive(self, receive: str, napi_policy: str = "fifo") -> None:
        """How the dut's ingress veth receives (see :attr:`receive`), switched in place."""
        if receive not in RECEIVE or napi_policy not in ("fifo", "other"):
            raise TestbedError(f"receive {receive!r} / {napi_policy!r}: expected one of {', '.join(RECEIVE)} / fifo or other")
        rps = f"/sys/class/net/{DUT_IN}/queues/rx-0/rps_cpus"
        if receive == "threaded":
            _sh("sh", "-c", f"echo 0 > {rps}", ns=DUT)
            # veth takes its NAPI path only with GRO on at the receiver and TSO off at the sender.
            _sh("ethtool", "-K", DUT_IN, "gro", "on", ns=DUT)
            _sh("sh", "-c", f"echo 1 > /sys/class/net/{DUT_IN}/threaded", ns=DUT)
            prio = NAPI_PRIORITY if napi_policy == "fifo" else None
            self.napi_pid = self._place_napi_thread(DUT_IN, self.placement.dut_cpu, prio)
        else:
            if self.napi_pid is not None:
                _sh("sh", "-c", f"echo 0 > /sys/class/net/{DUT_IN}/threaded", ns=DUT)
            _sh("ethtool", "-K", DUT_IN, "gro", "off", ns=DUT)
            _sh("sh", "-c", f"echo {1 << self.placement.dut_cpu:x} > {rps}", ns=DUT)
            self.napi_pid = None
        self.receive, self.napi_policy = receive, napi_policy

    def set_stack_cpu(self, cpu: int) -> None:
        """Where the dut's receive work runs: RPS's CPU for the backlog (``softirq``), the
        NAPI thread's affinity (``threaded``)."""
        if self.receive == "softirq":
            _sh("sh", "-c", f"echo {1 << cpu:x} > /sys/class/net/{DUT_IN}/queues/rx-0/rps_cpus", ns=DUT)
        elif self.napi_pid is not None:
            os.sched_setaffinity(self.napi_pid, {cpu})

    @property
    def ksoftirqd_pid(self) -> int | None:
        """The dut CPU's ksoftirqd."""
        name = f"ksoftirqd/{self.placement.dut_cpu}"
        return next((pid for pid in _pids() if _comm(pid) == name), None)

    def set_deferral(self, defer_hard_irqs: int, gro_flush_timeout_ns: int) -> None:
        """``napi_defer_hard_irqs`` and ``gro_flush_timeout`` of the dut's ingress veth."""
        if not (0 <= defer_hard_irqs <= 2**31 - 1 and 0 <= gro_flush_timeout_ns <= 10**9):
            raise TestbedError(f"deferral {defer_hard_irqs} x {gro_flush_timeout_ns} ns: expected 0..2^31-1 and 0..1 s")
        _sh(
            "sh",
            "-c",
            f"echo {defer_hard_irqs} > /sys/class/net/{DUT_IN}/napi_defer_hard_irqs && echo {gro_flush_timeout_ns} > /sys/class/net/{DUT_IN}/gro_flush_timeout",
            ns=DUT,
        )

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
        # evaluation per forwarded (with ``local``: delivered) packet.
        body = "\n".join(f"    udp dport {10_000 + i} drop" for i in range(self.rules))
        hook = "input" if self.local else "forward"
        text = f"table inet pktsim_tb {{\n  chain {hook}_dial {{\n    type filter hook {hook} priority 0; policy accept;\n{body}\n  }}\n}}\n"
        _sh("nft", "-f", "-", input=text, ns=DUT)

    def _place_napi_thread(self, dev: str, cpu: int, priority: int | None) -> int:
        deadline = time.monotonic() + 5
        pat = re.compile(rf"^napi/{re.escape(dev)}-\d+$")
        while time.monotonic() < deadline:
            for pid in _pids():
                if pat.match(_comm(pid)):
                    os.sched_setaffinity(pid, {cpu})
                    if priority is None:
                        os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
                    else:
                        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
                    return pid
            time.sleep(0.05)
        raise TestbedError(f"no threaded NAPI kernel thread napi/{dev}-* appeared (does this kernel support threaded NAPI on veth?)")

    @property
    def destinations(self) -> int:
        """Destination addresses the generator cycles through (one per route)."""
        return max(1, self.routes)


def mac(ns: str, dev: str) -> str:
    return _sh("cat", f"/sys/class/net/{dev}/address", ns=ns).strip()


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
