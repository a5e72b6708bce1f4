"""What waking the dut's thread costs: the CPU's idle state (a KVM guest's halt), a switch,
a system call. Part of ``pktsim testbed probe`` and of every ``stack``, ``defer`` and
``xdp`` validation.

``pktsim-tb wake`` puts a sleeper on the dut CPU (at the NAPI thread's priority) and wakes
it from the load CPU after idle gaps from 10 us to 2 ms, twice: once with the dut CPU free
to enter its idle state (``halting``) and once kept busy by a SCHED_IDLE spinner
(``awake``: the CPU never idles). After each wake-up the sleeper walks a working set
(:data:`WORK_KIB`) twice; the first walk minus the second is what cold caches cost. Then

- the idle state's **exit latency** is the halting pass's wake latency minus the awake
  pass's (medians), at the gaps up to :data:`SHORT_GAP_NS` (a longer halt costs more on a
  KVM host that stops polling for the vCPU after its ``halt_poll_ns``: reported per gap);
- its **refill** grows with the time halted (the host runs other work in the meantime):
  the halting pass's extra walk time minus the awake pass's, fitted as
  ``refill x min(gap, refill_time) / refill_time`` (:func:`fit_refill`);
- a **switch** (half a futex round trip between two threads on the dut CPU: one wake-up and
  one context switch) and a **null system call** (``getppid``) are measured too.

:func:`sets` gives the model's ``[cpu.idle]`` states: the halt with the measured refill;
the switch is the NAPI thread's switch in (``validate.split_wakeup``). The halt's exit
latency stays the driver's declared 1 us: the paths fit their wake-up latency, the
cross-CPU wake-up with the halt's exit, to the median at their sparsest load
(``validate.fit_wake_latency``), and the probe's latencies are reported beside it.
"""

from __future__ import annotations

import json
import subprocess

from .topology import NAPI_PRIORITY, Placement, TestbedError, child_env, tb_binary

# The working set each wake-up walks: the order of the forwarding path's code and data
# (the stack's receive and forward path with 400 nftables rules), larger than L1 and L2.
WORK_KIB = 1024
GAPS_US = (10, 20, 50, 100, 200, 500, 1000, 2000)
COUNT = 200
# Gaps up to this are the halts of loads from 10% up (a frame at least every ~80 us).
SHORT_GAP_NS = 100_000


def run_wake(cpu: int | None = None, from_cpu: int | None = None) -> dict:
    """``pktsim-tb wake`` on the dut CPU (the caller holds the testbed's lock): its raw
    result and :func:`analyze`'s."""
    pl = Placement()
    cpu = pl.dut_cpu if cpu is None else cpu
    from_cpu = pl.load_cpu if from_cpu is None else from_cpu
    argv = [
        tb_binary(),
        "wake",
        "--cpu",
        str(cpu),
        "--from-cpu",
        str(from_cpu),
        "--priority",
        str(NAPI_PRIORITY),
        "--work-kib",
        str(WORK_KIB),
        "--count",
        str(COUNT),
        "--gaps-us",
        ",".join(map(str, GAPS_US)),
    ]
    p = subprocess.run(argv, capture_output=True, text=True, env=child_env(), timeout=120)
    if p.returncode != 0:
        raise TestbedError(f"pktsim-tb wake failed (exit {p.returncode}): {p.stderr.strip()}")
    raw = json.loads(p.stdout)
    return {"raw": raw, **analyze(raw)}


def fit_refill(gaps_ns: list[float], refills_ns: list[float]) -> tuple[float, float]:
    """(refill, refill_time) ns of the ramp ``refill x min(gap, T) / T`` nearest the
    measured refills (least squares; T among the gaps, refill in closed form for each)."""
    best = (float("inf"), 0.0, 0.0)
    for T in gaps_ns:
        x = [min(g, T) / T for g in gaps_ns]
        xx = sum(v * v for v in x)
        R = max(0.0, sum(a * b for a, b in zip(x, refills_ns)) / xx) if xx else 0.0
        err = sum((R * a - b) ** 2 for a, b in zip(x, refills_ns))
        if err < best[0]:
            best = (err, R, T)
    return best[1], best[2]


def analyze(raw: dict) -> dict:
    """Per gap: the idle state's exit latency and refill (halting minus awake); the halt's
    figures for the model; the switch and the system call."""
    awake = {r["gap_ns"]: r for r in raw["awake"]}
    rows = []
    for h in raw["halting"]:
        a = awake.get(h["gap_ns"])
        if a is None:
            continue
        rows.append(
            {
                "gap_ns": h["gap_ns"],
                "wake_latency_halting_ns": h["wake_latency_ns"]["p50"],
                "wake_latency_awake_ns": a["wake_latency_ns"]["p50"],
                "exit_latency_ns": max(0, h["wake_latency_ns"]["p50"] - a["wake_latency_ns"]["p50"]),
                "refill_ns": max(0, h["refill_ns"]["p50"] - a["refill_ns"]["p50"]),
            }
        )
    if not rows:
        raise TestbedError("pktsim-tb wake measured no wake-up (interrupted?)")
    short = sorted(r["exit_latency_ns"] for r in rows if r["gap_ns"] <= SHORT_GAP_NS) or [rows[0]["exit_latency_ns"]]
    refill, refill_time = fit_refill([r["gap_ns"] for r in rows], [r["refill_ns"] for r in rows])
    return {
        "gaps": rows,
        "halt": {"latency_ns": float(short[len(short) // 2]), "refill_ns": refill, "refill_time_ns": refill_time},
        "switch_ns": raw["switch_ns"],
        "syscall_ns": raw["syscall_ns"],
        "work_bytes": raw["work_bytes"],
    }


def sets(res: dict) -> dict:
    """The model's idle states (``--set`` keys) with the refill of the halt a wake probe
    measured (its exit latency the driver's declared 1 us: the paths fit the whole
    wake-up latency, see the module's doc)."""
    h = res["halt"]
    return {
        "cpu.idle.states": [
            {"name": "POLL", "latency": "0ns", "residency": "0ns"},
            {
                "name": "halt",
                "latency": "1us",
                "residency": "1us",
                "refill": f"{h['refill_ns']:.0f}ns",
                "refill_time": f"{h['refill_time_ns']:.0f}ns",
            },
        ]
    }


def describe(res: dict) -> list[str]:
    """Lines for a terminal: the halt for the model, then each gap."""
    h = res["halt"]
    out = [
        f"  waking a thread on it: a switch {res['switch_ns'] / 1e3:.2f} us, a null system call {res['syscall_ns']:.0f} ns",
        f"  its halt: exit latency {h['latency_ns'] / 1e3:.1f} us (reported), refill (the model's [cpu.idle]) up to "
        f"{h['refill_ns'] / 1e3:.2f} us after {h['refill_time_ns'] / 1e3:.0f} us halted ({res['work_bytes'] // 1024} KiB walked)",
        "  gap us   wake halting us   wake awake us   exit us   refill us",
    ]
    for r in res["gaps"]:
        out.append(
            f"  {r['gap_ns'] / 1e3:6.0f}   {r['wake_latency_halting_ns'] / 1e3:15.1f}   {r['wake_latency_awake_ns'] / 1e3:13.1f}   "
            f"{r['exit_latency_ns'] / 1e3:7.1f}   {r['refill_ns'] / 1e3:9.2f}"
        )
    return out
