"""The ``share`` path: a UDP receiver on the CPU that receives its frames.

The dut delivers the generator's UDP to a local socket (the destination is on its
loopback; 400 nftables rules on the input hook are the stack's cost dial), read by
``pktsim-tb udprecv``: ``recvmmsg`` of up to 64 frames, then a fixed loop of work per frame.
Two ways the dut CPU receives, each measured:

- ``softirq``: GRO off, so veth has no NAPI; ``netif_rx`` queues each frame in a backlog
  that RPS puts on the dut CPU (``netdev_max_backlog``), with an IPI when the backlog's
  NAPI is not scheduled; the NET_RX softirq runs it on the IPI's exit and on every bh
  enable, before the reader (Linux 6.5 on runs it inline even while ksoftirqd waits);
- ``threaded``: veth's NAPI in its kernel thread, as the kernel makes it: SCHED_OTHER,
  nice 0, sharing the CPU with the reader by weight.

1. **Calibrate on the separate-core case only**, nothing measured with the two on one CPU:
   - *the stack alone on the dut CPU*, the reader on the load CPU (above the generator,
     which shares it, and on a timer, so that the stack never pays for waking it across
     CPUs), loads doubling from 20 kpps until the stack saturates: the stack's time from
     eBPF (``pktsim-tb softirq``: NET_RX softirqs and RPS IPIs; the NAPI thread's time on
     the CPU from ``sched_switch``), its polls from ``napi:napi_poll``; least squares give
     ``t_proc`` and ``t_poll`` (the thread's ``t_wakeup``), the IPI's handler ``t_irq``;
   - *the same with a spinner keeping the dut CPU busy* (``pktsim-tb spin``): what an
     interrupt costs beyond what eBPF brackets when it finds the CPU running
     (``host.t_irq_busy``: a KVM guest's vCPU exits to the hypervisor and back);
   - *the reader alone on the dut CPU*, the stack moved to the load CPU (RPS, or the
     thread's affinity), on a timer at two loads and two batch sizes: ``t_packet`` and
     ``t_call`` (its timer's wake-ups are not carried over: on the shared CPU the stack
     wakes it, which costs the wake probe's switch);
   - the socket's truesize from a held socket (its memory over the frames it held), the
     sysctls from the dut, the fair class's slice from the CPU count and
     ``CONFIG_IRQ_TIME_ACCOUNTING`` from the kernel's configuration.
2. **Measure the shared CPU and predict it**, loads from 20% to 300% of what the CPU
   could take through the stack and the reader at their calibrated costs, with the
   simulator (``scenarios/veth-udp-receiver.toml``, the app on the same core; its model
   half is :mod:`.sharemodel`): the rate the reader reads, the socket's overflows
   (``RcvbufErrors``), the CPU split (softirq, ksoftirqd, NAPI thread, reader, hard IRQs)
   and the loss-free capacity, where livelock sets in (the load at which 5% is first
   lost).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from . import counters, runner

# The path's model half (its calibration, the simulator's figures, the rows): the path's
# compare and describe are its.
from .sharemodel import BATCH, CAL_LOSS, compare, describe

__all__ = ["NAME", "TITLE", "measure", "compare", "describe", "measure_one", "figures"]
from .topology import DST_BASE, DUT, GEN, GEN_IF, GEN_IP, TestbedError, Topology, child_env, tb_binary

NAME = "share"
TITLE = "A UDP receiver on the CPU that receives its frames (softirq with RPS, threaded NAPI), measured on this machine"
PORT = 9001
# The reader's work per frame: turns of an empty loop (0.7 us here).
WORK_LOOPS = 2500
# The reader on the load CPU: above the generator, which spins there between frames.
READER_PRIORITY = 10
# The NAPI thread as the kernel makes it: SCHED_OTHER, nice 0.
VARIANTS = {"softirq": ("softirq", "fifo"), "threaded": ("threaded", "other")}
# Calibration loads (the reader on the other CPU): from this rate, doubling until the
# reader misses 2% or the generator cannot offer more (at most this many; quick: fewer).
PILOT_PPS = 20_000.0
CAL_STEPS = 6
QUICK_CAL_STEPS = 3
# A calibration run that misses frames is run again, up to this many tries in all, while
# the fit lacks its two clean runs: a burst of other work on a shared machine loses a few
# percent of a load the stack and the reader take without loss on a quiet one.
CAL_TRIES = 3
# While fewer than two calibration runs are clean, this many more at halved loads.
CAL_LOWER = 2
# The reader's calibration (the stack on the load CPU): (fraction of the stack's capacity
# on one CPU, frames per recvmmsg), each reader on a timer of READER_POLL_US; two batch
# sizes at each load tell a call's cost from a wake-up's.
READER_CAL = ((0.2, 64), (0.2, 8), (0.4, 64), (0.4, 8))
QUICK_READER_CAL = ((0.2, 64), (0.4, 64))
READER_POLL_US = 1000
# Loads of the runs that time an interrupt on a busy dut CPU (a spinner there).
SPIN_RATES = (40_000.0, 80_000.0)
# The shared CPU's loads, fractions of the grid's scale: what the CPU could take through
# the stack and the reader at their calibrated costs per frame (not a prediction).
SHARED_LOADS = (0.2, 0.5, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0)
QUICK_SHARED_LOADS = (0.3, 0.9, 1.25, 2.0, 3.0)
# A held socket for its truesize: this long without reading (past the start of the
# generator's 0.5 s, which starts after perf's set-up), at the first calibration rate.
HOLD_MS = 600
# The reader on the other CPU sleeps on a timer of this period and then drains its socket:
# no stack has to wake it there (a wake-up across CPUs costs the waker an IPI, which the
# shared CPU's local wake-up does not).
POLL_US = 200
SYSCTLS = ("netdev_max_backlog", "dev_weight", "netdev_budget", "netdev_budget_usecs")


# ------------------------------------------------------------------------------ measuring


def _sysctls() -> dict:
    out = {}
    for k in SYSCTLS:
        try:
            out[k] = int(Path(f"/proc/sys/net/core/{k}").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def _kernel_config_text() -> str | None:
    import gzip
    import platform

    for path, opener in ((Path("/proc/config.gz"), gzip.open), (Path(f"/boot/config-{platform.release()}"), open)):
        try:
            with opener(path, "rt") as f:
                return f.read()
        except OSError:
            continue
    return None


def kernel_config(name: str) -> bool | None:
    """Whether the running kernel was built with ``name`` (``/proc/config.gz``, else
    ``/boot/config-$(uname -r)``); None when neither is there."""
    text = _kernel_config_text()
    return None if text is None else f"\n{name}=y" in f"\n{text}"


def kernel_hz() -> int | None:
    """The running kernel's ``CONFIG_HZ`` (None when its configuration is not there)."""
    import re

    m = re.search(r"^CONFIG_HZ=(\d+)$", _kernel_config_text() or "", re.M)
    return int(m.group(1)) if m else None


def _autogroup() -> bool | None:
    """``kernel.sched_autogroup_enabled`` (None without ``CONFIG_SCHED_AUTOGROUP``): with it
    the reader runs in a session of its own (see :func:`measure_one`)."""
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return None


def base_slice_ns(cpus: int, proc_sched: str | None = None) -> int:
    """``sysctl_sched_base_slice`` as this kernel applies it: the ``se.slice`` of a task
    that set none of its own (``/proc/self/sched``; the sysctl itself is in debugfs, which
    a locked-down kernel refuses), else the default 0.70 ms x (1 + ilog2(online CPUs, at
    most 8)) of current kernels (0.75 ms before)."""
    if proc_sched is None:
        try:
            proc_sched = Path("/proc/self/sched").read_text()
        except OSError:
            proc_sched = ""
    for line in proc_sched.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "se.slice" and value.strip().isdigit() and int(value) > 0:
            return int(value)
    return 700_000 * (1 + (min(max(cpus, 1), 8).bit_length() - 1))


def _udp_counters() -> dict:
    from ..observe.sources import ObserveError, snmp_udp

    try:
        return snmp_udp(_cat_in(DUT, "/proc/net/snmp"), f"{DUT}:/proc/net/snmp")
    except ObserveError:
        return {}


def _cat_in(ns: str, path: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, "cat", path], capture_output=True, text=True, check=True).stdout


def _softnet(cpu: int) -> dict:
    """The dut CPU's row of /proc/net/softnet_stat: processed, dropped (the backlog was
    full), time_squeeze."""
    rows = Path("/proc/net/softnet_stat").read_text().splitlines()
    v = [int(x, 16) for x in rows[cpu].split()]
    return {"processed": v[0], "dropped": v[1], "time_squeeze": v[2]}


def _switches(pid: int | None) -> int:
    if not pid:
        return 0
    try:
        return counters.voluntary_switches(pid)
    except OSError:
        return 0


def _snap(topo: Topology, reader_pid: int) -> dict:
    return {
        "t_ns": time.monotonic_ns(),
        "reader_switches": _switches(reader_pid),
        "napi_switches": _switches(topo.napi_pid),
        "udp": _udp_counters(),
        "softnet": _softnet(topo.placement.dut_cpu),
        "busy": counters.cpu_busy_ns()[topo.placement.dut_cpu],
    }


def _spawn(argv: list[str], ready: Path, what: str, session: bool = False) -> subprocess.Popen:
    """Start ``argv`` and wait for its ready file; ``session``: in a session of its own."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), start_new_session=session)
    deadline = time.monotonic() + 5
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            raise TestbedError(f"{what} did not start: {proc.communicate()[1].strip() or 'no answer within 5 s'}")
        time.sleep(0.01)
    return proc


def measure_one(
    topo: Topology,
    rate_pps: float,
    duration_s: float,
    reader_cpu: int,
    run_id: int,
    *,
    poll_us: int = 0,
    batch: int = BATCH,
    hold_ms: int = 0,
    priority: int | None = None,
    spinner: bool = False,
) -> dict:
    """One run at ``rate_pps`` with the reader on ``reader_cpu`` (``poll_us``: on a timer
    instead of blocking; ``priority``: SCHED_FIFO), the dut CPU timed by eBPF; ``spinner``:
    with ``pktsim-tb spin`` on the dut CPU, which times all that the rest takes there."""
    runner.check(rate_pps, duration_s)
    tb = tb_binary()
    p = topo.placement
    dur_ms = int(duration_s * 1000)
    with tempfile.TemporaryDirectory(prefix="share-", dir=topo.tmp) as tmp:
        procs: list[subprocess.Popen] = []
        try:
            # perf first (it needs a moment before it counts), then the reader and the
            # accountant, so that the accountant's window is the generator's but for a
            # few milliseconds.
            perf = runner._perf_polls(p.dut_cpu, duration_s + runner.PERF_START_S + 1.5)
            if perf:
                procs.append(perf)
                time.sleep(runner.PERF_START_S)
            prio = ["chrt", "-f", str(priority)] if priority else []
            reader = _spawn(
                ["ip", "netns", "exec", DUT, *prio, tb, "udprecv", "--port", str(PORT), "--duration-ms", str(dur_ms + 5000)]
                + ["--idle-ms", str(runner.SINK_IDLE_MS), "--cpu", str(reader_cpu), "--batch", str(batch), "--work-loops", str(WORK_LOOPS)]
                + ["--run-id", str(run_id), "--ready-file", f"{tmp}/reader"]
                + (["--poll-us", str(poll_us)] if poll_us else [])
                + (["--hold-ms", str(hold_ms)] if hold_ms else []),
                Path(f"{tmp}/reader"),
                "pktsim-tb udprecv",
                # Its own session, so its own autogroup (CONFIG_SCHED_AUTOGROUP): in the
                # generator's, the group's weight on the dut CPU would be shared with the
                # generator's busy CPU (calc_group_shares), about half a nice-0 task's,
                # where a server's traffic comes from another machine.
                session=True,
            )
            procs.append(reader)
            spin = None
            if spinner:
                spin = _spawn(
                    [tb, "spin", "--cpu", str(p.dut_cpu), "--duration-ms", str(dur_ms + 10_000), "--ready-file", f"{tmp}/spin"],
                    Path(f"{tmp}/spin"),
                    "pktsim-tb spin",
                )
                procs.append(spin)
            tasks = [reader.pid] + ([topo.napi_pid] if topo.napi_pid else [])
            acct = _spawn(
                [tb, "softirq", "--cpu", str(p.dut_cpu), "--duration-ms", str(dur_ms + 10_000), "--ready-file", f"{tmp}/acct"]
                + ["--tasks", ",".join(map(str, tasks))]
                + (["--ksoftirqd-pid", str(topo.ksoftirqd_pid)] if topo.ksoftirqd_pid else []),
                Path(f"{tmp}/acct"),
                "pktsim-tb softirq",
            )
            procs.append(acct)
            before = _snap(topo, reader.pid)
            count = max(1, int(rate_pps * duration_s))
            gen = subprocess.Popen(
                ["ip", "netns", "exec", GEN, tb, "gen", "--iface", GEN_IF, "--dst-mac", topo.dut_mac, "--src-ip", GEN_IP]
                + ["--dst-ip", str(DST_BASE), "--dst-count", "1", "--rate", f"{rate_pps:.3f}", "--count", str(count)]
                + ["--duration-ms", str(dur_ms), "--size", str(runner.FRAME_BYTES), "--cpu", str(p.load_cpu), "--run-id", str(run_id)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=child_env(),
            )
            procs.append(gen)
            g = runner._json_out(gen, "pktsim-tb gen", duration_s + 10)
            acct.send_signal(signal.SIGINT)
            if spin:
                spin.send_signal(signal.SIGINT)
            after = _snap(topo, reader.pid)
            polls = runner._perf_count(perf)
            a = runner._json_out(acct, "pktsim-tb softirq", 10)
            r = runner._json_out(reader, "pktsim-tb udprecv", 15)
            sp = runner._json_out(spin, "pktsim-tb spin", 10) if spin else None
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    on_dut = reader_cpu == p.dut_cpu
    out = figures(g, r, a, before, after, polls, rate_pps, on_dut, topo.receive)
    if sp:
        out["spin"] = {k: sp[k] for k in ("window_ns", "taken_ns", "work_ns", "ns_per_turn")}
    return out


def _ns(d: dict | None) -> int:
    return (d or {}).get("ns", 0)


def figures(g: dict, r: dict, a: dict, before: dict, after: dict, polls: int | None, rate_pps: float, on_dut: bool, receive: str) -> dict:
    """A run's figures from its reports (generator, reader, the dut CPU's eBPF accountant)
    and the counters read before and after it. ``on_dut``: the reader ran on the dut CPU.

    The dut CPU's time by task is the accountant's (``sched_switch``): ``/proc/PID/schedstat``
    splits a CPU two tasks share under interrupt load wrongly on some kernels (a NAPI
    thread and this reader: 66% / 32% where sched_switch and perf sampling both gave
    83% / 12%, the sums equal)."""
    window_ns = max(1, g["elapsed_ns"])
    window_s = window_ns / 1e9
    # The accountant's shares are of its own window (the generator's and a few ms).
    acct_ns = max(window_ns, a.get("window_ns") or 0)
    udp = {k: after["udp"].get(k, 0) - before["udp"].get(k, 0) for k in ("InDatagrams", "RcvbufErrors", "InErrors")}
    net = {k: after["softnet"][k] - before["softnet"][k] for k in after["softnet"]}
    # Frames the stack took through UDP: queued to the socket or refused by it.
    stacked = udp["InDatagrams"] + udp["RcvbufErrors"]
    read = r["received"]
    nr = a.get("net_rx") or {}
    ipi = a.get("ipi") or {}
    oncpu = a.get("oncpu") or {}
    tasks = oncpu.get("tasks") or []
    nr_tasks = nr.get("tasks") or []
    # The reader's own time on the dut CPU: on it, less the softirqs that ran on its stack
    # (an interrupt's exit or its bh enable runs them while it is current).
    reader_ns = (_ns(tasks[0] if tasks else None) - _ns(nr_tasks[0] if nr_tasks else None)) if on_dut else 0
    napi_ns = _ns(tasks[1]) if receive == "threaded" and len(tasks) > 1 else 0
    ksoftirqd_ns = _ns(oncpu.get("ksoftirqd"))
    stack_ns = napi_ns if receive == "threaded" else nr.get("ns", 0)
    # Every receive call, the ones that found the socket empty too (a polling reader's),
    # and its wake-ups: a timer's (sleeps) or the stack's (its voluntary switches).
    calls = (r.get("calls") or 0) + (r.get("empty_calls") or 0)
    wakeups = r.get("sleeps") or (after["reader_switches"] - before["reader_switches"])
    napi_wakeups = after["napi_switches"] - before["napi_switches"]
    lat = r.get("latency_app_ns") or {}
    share = lambda ns: ns / acct_ns  # noqa: E731
    return {
        "rate_pps": rate_pps,
        "reader_on_dut": on_dut,
        "offered_pps": g["offered"] / window_s,
        "read_pps": read / window_s,
        "rcvbuf_errors_pps": udp["RcvbufErrors"] / window_s,
        "backlog_drops_pps": net["dropped"] / window_s,
        "loss_ratio": 1 - read / g["offered"] if g["offered"] else 0.0,
        "stack_ns_per_packet": stack_ns / stacked if stacked and stack_ns else None,
        "packets_per_poll": stacked / polls if polls else None,
        "packets_per_wakeup": stacked / napi_wakeups if receive == "threaded" and napi_wakeups else None,
        "ipi_ns": ipi["ns"] / ipi["count"] if ipi.get("count") else None,
        "packets_per_ipi": stacked / ipi["count"] if ipi.get("count") else None,
        "reader_ns_per_packet": reader_ns / read if read and reader_ns else None,
        "reader_packets_per_call": read / calls if calls else None,
        "reader_packets_per_wakeup": read / wakeups if wakeups else None,
        "latency_ns": {q: lat.get(q) for q in runner.PERCENTILES},
        # The dut CPU's time by context, as the model's cpu_by_context names them.
        "cpu": {
            "softirq": share(nr.get("ns", 0) - _ns(nr.get("ksoftirqd"))),
            "ksoftirqd": share(ksoftirqd_ns),
            "napi_threads": share(napi_ns),
            "app": share(reader_ns),
            "hardirq": share(ipi.get("ns", 0)),
            # /proc/stat: busy is exact (the idle time is), its split is tick-sampled.
            "busy": (after["busy"] - before["busy"]) / max(1, after["t_ns"] - before["t_ns"]),
            # Tasks outside the experiment.
            "other": share(_ns(oncpu.get("other"))),
        },
        "counts": {
            "offered": g["offered"],
            "read": read,
            "stacked": stacked,
            "udp": udp,
            "softnet": net,
            "polls": polls,
            "reader_calls": calls,
            "reader_wakeups": wakeups,
            "napi_wakeups": napi_wakeups,
            "net_rx": nr,
            "ipi": ipi or None,
            "oncpu": oncpu or None,
            "window_ns": window_ns,
        },
        "reader": {k: r.get(k) for k in ("rcvbuf_bytes", "ns_per_work_loop", "work_loops", "held")},
        "generator_stalls": [{"rate_hz": k["count"] / window_s, "length_ns": k["length_ns"]} for k in g.get("stalls") or []],
    }


def average(runs: list[dict]) -> dict:
    """Runs at one setting: the mean of each figure (the median of each latency quantile),
    the spread of the rate read, and every run."""
    out = {k: runs[0][k] for k in ("rate_pps", "reader_on_dut")}
    for k, v in runs[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) or v is None:
            vals = [r[k] for r in runs if r[k] is not None]
            out[k] = float(np.mean(vals)) if vals else None
    out["cpu"] = {k: float(np.mean([r["cpu"][k] for r in runs])) for k in runs[0]["cpu"]}
    out["latency_ns"] = {q: (float(np.median(v)) if (v := [r["latency_ns"][q] for r in runs if r["latency_ns"][q]]) else None) for q in runner.PERCENTILES}
    reads = [r["read_pps"] for r in runs]
    out["spread"] = {"read_pps": {"min": min(reads), "max": max(reads)}}
    out["stalls"] = runner.stalls(runs)
    out["reader"] = runs[0]["reader"]
    out["runs"] = runs
    return out


def until_clean(run, tries: int) -> dict:
    """``run(try_index)`` again, ``tries`` times in all, while the reader misses more than
    CAL_LOSS of its frames: the run that missed least, with the number of tries it took."""
    best = None
    for t in range(tries):
        q = run(t)
        q["tries"] = t + 1
        if best is None or q["loss_ratio"] < best["loss_ratio"]:
            best = q
        if q["loss_ratio"] <= CAL_LOSS:
            break
    return best


def lower_until_two_clean(out: list[dict], run, rate: float) -> list[dict]:
    """``out`` with up to CAL_LOWER more runs, ``run(rate)`` at halved rates below
    ``rate``, while fewer than two of its runs missed at most CAL_LOSS: a machine slower than
    the one the loads were chosen on still gives two clean runs. Sorted by rate."""
    for _ in range(CAL_LOWER):
        if sum(q["loss_ratio"] <= CAL_LOSS for q in out) >= 2:
            break
        rate /= 2
        out.append(run(rate))
    return sorted(out, key=lambda q: q["offered_pps"])


def reader_calibration(run, cal: tuple, stack_pps: float) -> list[dict]:
    """The reader's calibration runs: ``run(rate, batch, what)`` at each (fraction of
    ``stack_pps``, batch) of ``cal``, then lower loads (the first batch size) while fewer
    than two are clean."""
    out = [run(f * stack_pps, b, "") for f, b in cal]
    b = cal[0][1]
    return lower_until_two_clean(out, lambda rate: run(rate, b, ", a lower load"), min(f for f, _ in cal) * stack_pps)


def spin_baseline(cpu: int, seconds: float = 1.0) -> float:
    """The share of ``cpu`` that ``pktsim-tb spin`` does not get without traffic (the tick,
    timers, other tasks)."""
    argv = [tb_binary(), "spin", "--cpu", str(cpu), "--duration-ms", str(int(seconds * 1000))]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    sp = runner._json_out(proc, "pktsim-tb spin", seconds + 10)
    return sp["taken_ns"] / max(1, sp["window_ns"])


def measure(topo: Topology, quick: bool, duration_s: float, reps: int, progress=None) -> dict:
    """The machine's settings, a wake probe, then for each variant: the socket's truesize
    (a held socket), the stack's calibration loads (the reader on the load CPU), the
    reader's (the stack on the load CPU), then the shared CPU's loads."""
    from . import wake

    p = topo.placement
    out: dict = {
        "sysctls": _sysctls(),
        "irq_time_accounting": kernel_config("CONFIG_IRQ_TIME_ACCOUNTING"),
        "hz": kernel_hz(),
        "base_slice_ns": base_slice_ns(os.cpu_count() or 1),
        "autogroup": _autogroup(),
        "wake": wake.run_wake(),
        "variants": {},
    }
    steps = QUICK_CAL_STEPS if quick else CAL_STEPS
    reader_cal = QUICK_READER_CAL if quick else READER_CAL
    shared_loads = QUICK_SHARED_LOADS if quick else SHARED_LOADS
    total = len(VARIANTS) * (1 + steps + len(SPIN_RATES) + len(reader_cal) + len(shared_loads))
    step = 0
    run_id = 1000

    def rep(rate: float, what: str, reader_cpu: int, **kw) -> dict:
        nonlocal step, run_id
        if progress:
            where = "the reader on the dut CPU" if reader_cpu == p.dut_cpu else "the reader on the load CPU"
            progress(min(step, total - 1), total, f"{what}: {rate / 1e3:.1f} kpps, {where}")
        step += 1
        run_id += 10
        return average([measure_one(topo, rate, duration_s, reader_cpu, run_id + k, **kw) for k in range(reps)])

    def clean(rate: float, what: str, reader_cpu: int, tries: int, **kw) -> dict:
        return until_clean(lambda t: rep(rate, what if not t else f"{what}, try {t + 1}", reader_cpu, **kw), tries)

    def stack_run(rate: float, what: str, tries: int) -> dict:
        return clean(rate, what, p.load_cpu, tries, poll_us=POLL_US, priority=READER_PRIORITY)

    for name, (receive, policy) in VARIANTS.items():
        topo.set_receive(receive, policy)
        if progress:
            progress(step, total, f"{name}: the socket's truesize")
        step += 1
        run_id += 10
        held = measure_one(topo, PILOT_PPS, 0.5, p.load_cpu, run_id, hold_ms=HOLD_MS, poll_us=POLL_US, priority=READER_PRIORITY)["reader"]["held"]
        # The stack alone on the dut CPU: doubling loads until the reader misses frames.
        stack_cal = []
        for k in range(steps):
            # Until two runs are clean, a lossy one may be the machine's noise: try again.
            tries = CAL_TRIES if sum(q["loss_ratio"] <= CAL_LOSS for q in stack_cal) < 2 else 1
            q = stack_run(PILOT_PPS * 2**k, f"{name}, the stack's costs", tries)
            stack_cal.append(q)
            if q["loss_ratio"] > CAL_LOSS or q["offered_pps"] < 0.9 * q["rate_pps"]:
                break
        step += steps - len(stack_cal)
        stack_cal = lower_until_two_clean(stack_cal, lambda rate, n=name: stack_run(rate, f"{n}, the stack's costs (a lower load)", CAL_TRIES), PILOT_PPS)
        # The same with a spinner keeping the dut CPU busy: what an interrupt costs there.
        baseline = spin_baseline(p.dut_cpu)
        busy = [rep(r, f"{name}, interrupts on a busy CPU", p.load_cpu, poll_us=POLL_US, priority=READER_PRIORITY, spinner=True) for r in SPIN_RATES]
        full = [q for q in stack_cal if q["loss_ratio"] <= CAL_LOSS and q["stack_ns_per_packet"]] or stack_cal[:1]
        stack_pps = 1e9 / (full[-1]["stack_ns_per_packet"] or 1e4)
        # The reader alone on the dut CPU, the stack on the load CPU.
        topo.set_stack_cpu(p.load_cpu)
        try:
            read_cal = reader_calibration(
                lambda rate, b, what, n=name: clean(rate, f"{n}, the reader's costs (batch {b}{what})", p.dut_cpu, CAL_TRIES, poll_us=READER_POLL_US, batch=b),
                reader_cal,
                stack_pps,
            )
        finally:
            topo.set_stack_cpu(p.dut_cpu)
        # The grid's scale: what the CPU could take through both (not a prediction).
        per_frame = (full[-1]["stack_ns_per_packet"] or 0.0) + min((q["reader_ns_per_packet"] or 1e9) for q in read_cal)
        cap = 1e9 / per_frame
        shared = []
        for f in shared_loads:
            q = rep(f * cap, name, p.dut_cpu)
            q["load"] = f
            shared.append(q)
        out["variants"][name] = {
            "receive": receive,
            "napi_policy": policy,
            "held": held,
            "spin_baseline": baseline,
            "busy_calibration": busy,
            "stack_calibration": stack_cal,
            "reader_calibration": read_cal,
            "shared": shared,
            "grid_pps": cap,
        }
    return out
