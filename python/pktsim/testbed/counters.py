"""Counters read before and after a run: exact CPU time per task, device counters, CPUs.

- A task's CPU time is ``sum_exec_runtime`` from ``/proc/PID/task/TID/schedstat`` (ns,
  exact). The dut's cost per packet is its NAPI thread's runtime over the frames it
  forwarded; its wake-ups are the thread's voluntary context switches.
- Device counters come from ``/sys/class/net/DEV/statistics`` inside each namespace.
- Foreign load is the runtime of every task that is not part of the testbed.
- ``/proc/stat`` gives busy time per CPU (its softirq column is tick-sampled and is not
  used for costs).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

USER_HZ = os.sysconf("SC_CLK_TCK")


def task_runtimes() -> dict[tuple[int, int], tuple[int, str]]:
    """{(pid, tid): (runtime_ns, comm)} of every task on the machine."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            try:
                with open(f"/proc/{p}/task/{t}/schedstat") as f:
                    ns = int(f.read().split()[0])
                with open(f"/proc/{p}/task/{t}/comm") as f:
                    comm = f.read().strip()
            except (OSError, ValueError, IndexError):
                continue
            out[(int(p), int(t))] = (ns, comm)
    return out


def thread_runtime_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def voluntary_switches(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    return 0


def cpu_busy_ns() -> list[int]:
    """Busy (non-idle, non-iowait) time per CPU from /proc/stat, in ns."""
    busy = []
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                v = [int(x) for x in line.split()[1:]]
                total = sum(v[:8])
                busy.append((total - v[3] - v[4]) * 1_000_000_000 // USER_HZ)
    return busy


def dev_stats(ns: str, dev: str) -> dict[str, int]:
    keys = ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped")
    cmd = ["ip", "netns", "exec", ns, "sh", "-c", " ; ".join(f"cat /sys/class/net/{dev}/statistics/{k}" for k in keys)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()
    return dict(zip(keys, map(int, out)))


@dataclass
class Snapshot:
    t_ns: int
    napi_ns: int
    napi_wakeups: int
    tasks: dict
    cpus: list
    devs: dict
    app_ns: int = 0

    @classmethod
    def take(cls, napi_pid: int | None, devs: dict[str, tuple[str, str]], app_pid: int | None = None) -> Snapshot:
        """``napi_pid``: the dut's NAPI thread (None: its NAPI is not threaded); ``app_pid``:
        a process on the dut CPU whose CPU time is the dut's too (a forwarder in user
        space)."""
        return cls(
            t_ns=time.monotonic_ns(),
            app_ns=thread_runtime_ns(app_pid) if app_pid else 0,
            napi_ns=thread_runtime_ns(napi_pid) if napi_pid else 0,
            napi_wakeups=voluntary_switches(napi_pid) if napi_pid else 0,
            tasks=task_runtimes(),
            cpus=cpu_busy_ns(),
            devs={name: dev_stats(ns, dev) for name, (ns, dev) in devs.items()},
        )


# Kernel threads that do the testbed's own work: its NAPI threads, and ksoftirqd running
# the sink's backlog when softirqs overflow.
OWN_KERNEL_THREADS = ("napi/tb-", "ksoftirqd/")


def foreign(before: Snapshot, after: Snapshot, ours: set[int]) -> tuple[float, list[tuple[str, float]]]:
    """CPU time of tasks outside the testbed over the window, in CPUs (1.0 = one CPU busy),
    and the three busiest of them (comm, CPUs)."""
    window = max(1, after.t_ns - before.t_ns)
    per_comm: dict[str, int] = {}
    for key, (ns, comm) in after.tasks.items():
        if key[0] in ours or key[1] in ours or comm.startswith(OWN_KERNEL_THREADS):
            continue
        d = ns - before.tasks.get(key, (0, comm))[0]
        if d > 0:
            per_comm[comm] = per_comm.get(comm, 0) + d
    total = sum(per_comm.values()) / window
    top = sorted(((c, v / window) for c, v in per_comm.items()), key=lambda x: -x[1])[:3]
    return total, top
