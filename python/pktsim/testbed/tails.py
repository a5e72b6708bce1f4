"""The interference the dut CPU suffers with nothing to forward: ``pktsim testbed probe``.

``pktsim-tb probe`` spins on the dut CPU at the NAPI thread's real-time priority, reading
CLOCK_MONOTONIC; every pair of reads more than a threshold apart is a gap, time the CPU
spent elsewhere (scheduler tick, timers, RCU, interrupts, the hypervisor). :func:`analyze`
splits the gaps into

- the **tick**: gaps that come back at a fixed period (the candidates are the kernel's
  CONFIG_HZ values), with the period, its phase, the share of periods that showed a gap
  and the tick's cost (the CPU time a tick took: the gaps in its window summed, their
  median and quantiles; a gap at the tick's phase that lasts a quarter of the period or
  more is not the tick's work but time given to something else, and counts with the
  rest); and
- the **rest**: preemptions at a rate (per spinning second) with the distribution of
  their lengths (quantiles).

:func:`sets` turns them into the model's ``[cpu.interference]`` (the tick with its
measured CPU time per tick, preemptions at the measured rate with lengths drawn from the
measured distribution), with which the paths predict their latency tails.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np

from .topology import NAPI_PRIORITY, Lock, LockBusy, Placement, TestbedError, child_env, reap, require_root, tb_binary

# CONFIG_HZ values a kernel is built with, in Hz.
HZ_CANDIDATES = (100, 250, 300, 1000)
# A gap within this share of the period from the tick's phase belongs to the tick ...
TICK_WINDOW = 0.02
# ... unless it lasts longer than this share of the period: no tick takes a quarter of its
# period on a spinning CPU; such a gap is time given to something else that began at the
# tick (real-time throttling, the hypervisor running another guest) and counts with the
# rest. It also keeps a tick's cost (the gaps of its window summed) below its period.
TICK_MAX = 0.25
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)


def run_probe(duration_s: float, threshold_ns: int = 1000, cpu: int | None = None) -> dict:
    """``pktsim-tb probe`` on the dut CPU at the NAPI thread's priority for ``duration_s``
    (the caller holds the testbed's lock): its raw result and :func:`analyze`'s."""
    if not 0.1 <= duration_s <= 600:
        raise TestbedError(f"--duration {duration_s:g}s: expected from 100ms to 600s")
    cpu = Placement().dut_cpu if cpu is None else cpu
    p = subprocess.run(
        [
            tb_binary(),
            "probe",
            "--cpu",
            str(cpu),
            "--duration-ms",
            str(round(duration_s * 1000)),
            "--priority",
            str(NAPI_PRIORITY),
            "--threshold-ns",
            str(threshold_ns),
        ],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=duration_s + 30,
    )
    if p.returncode != 0:
        raise TestbedError(f"pktsim-tb probe failed (exit {p.returncode}): {p.stderr.strip()}")
    raw = json.loads(p.stdout)
    return {"raw": raw, **analyze(raw)}


def check_duration(duration_s: float) -> None:
    """The probe's --duration: long enough to see the tick, short enough to stay bounded."""
    if not 0.1 <= duration_s <= 600:
        raise TestbedError(f"--duration {duration_s:g}s: expected from 100ms to 600s")


def probe(duration_s: float, threshold_ns: int = 1000, cpu: int | None = None, wake: bool = False) -> dict:
    """:func:`run_probe` holding the testbed's lock (no run measures meanwhile); with
    ``wake`` also what waking a thread there costs (:func:`.wake.run_wake`)."""
    check_duration(duration_s)
    require_root()
    try:
        lock = Lock()
    except LockBusy as e:
        raise TestbedError(f"{e}; wait for it to end") from None
    try:
        reap(lock.previous)
        res = run_probe(duration_s, threshold_ns, cpu)
        if wake:
            from .wake import run_wake

            res["wake"] = run_wake(cpu)
        return res
    finally:
        lock.release()


# Quantiles of the measured lengths the model draws from, evenly (each stands for 1/n of
# the events): fine enough to keep the long, rare gaps that make the tails.
TICK_QUANTILES = 100
REST_QUANTILES = 500


def _is_tick(starts: np.ndarray, lens: np.ndarray, period: float, phase: float) -> np.ndarray:
    """Which gaps are the tick's: those that start within TICK_WINDOW of its phase and are
    shorter than TICK_MAX of its period."""
    d = np.abs((((starts % period) - phase) / period + 0.5) % 1.0 - 0.5)
    return (d <= TICK_WINDOW) & (lens < TICK_MAX * period)


def _per_tick(starts: np.ndarray, lens: np.ndarray, period: float, phase: float) -> np.ndarray:
    """The CPU time of each tick that showed a gap: the tick's gaps of its window summed (a
    tick may show as more than one gap: the interrupt, then its softirq work)."""
    k = np.round((starts - phase) / period).astype(np.int64)
    per_tick = np.bincount(k - k.min(), weights=lens) if len(k) else np.array([])
    return per_tick[per_tick > 0]


def sets(res: dict) -> dict:
    """The model's ``[cpu.interference]`` from a probe result (``--set`` keys): the tick's
    period and per-tick CPU times (100 quantiles), the rest's rate and lengths (500)."""
    g = np.array(res["raw"].get("listed") or [], dtype=float).reshape(-1, 2)
    t, r = res.get("tick"), res.get("rest")
    out = {}

    def times(values, n):
        return "[" + ", ".join(f'"{v:.0f}ns"' for v in np.quantile(values, [(k + 0.5) / n for k in range(n)], method="inverted_cdf")) + "]"

    starts, lens = g[:, 0], g[:, 1]
    is_tick = np.zeros(len(g), dtype=bool)
    if t:
        period, phase = t["period_ns"], t["phase_ns"]
        is_tick = _is_tick(starts, lens, period, phase)
        per_tick = _per_tick(starts[is_tick], lens[is_tick], period, phase)
        if len(per_tick):
            out["cpu.interference.tick_period"] = f"{period:.0f}ns"
            out["cpu.interference.t_tick"] = times(per_tick, TICK_QUANTILES)
    rest = lens[~is_tick]
    if r and len(rest):
        out["cpu.interference.rate"] = f"{r['rate_per_s']:.3f}Hz"
        out["cpu.interference.t_preempt"] = times(rest, REST_QUANTILES)
    return out


def _phase_concentration(starts_ns: np.ndarray, period_ns: float) -> tuple[float, float]:
    """(share of gaps within TICK_WINDOW of the densest phase, that phase in ns)."""
    ph = (starts_ns % period_ns) / period_ns
    bins = np.histogram(ph, bins=100, range=(0, 1))[0]
    k = int(np.argmax(bins))
    phase = (k + 0.5) / 100
    d = np.abs(((ph - phase) + 0.5) % 1.0 - 0.5)
    return float(np.mean(d <= TICK_WINDOW)), phase * period_ns


def analyze(raw: dict) -> dict:
    """The tick and the rest of the gaps of a ``pktsim-tb probe`` result."""
    listed = np.array(raw.get("listed") or [], dtype=float).reshape(-1, 2)
    spin_s = raw["spin_ns"] / 1e9
    if spin_s <= 0:
        raise TestbedError("the probe observed nothing (no spinning time)")
    starts, lens = listed[:, 0], listed[:, 1]
    out = {
        "observed_s": spin_s,
        "gaps": int(raw["gaps"]),
        "gaps_per_s": raw["gaps"] / spin_s,
        "stolen_share": raw["stolen_ns"] / raw["spin_ns"],
        "threshold_ns": raw["threshold_ns"],
    }
    if len(starts) < 10:
        out.update(tick=None, rest=None)
        return out
    # The tick: the candidate period whose phase concentrates the most gaps. A tick of 4 ms
    # also concentrates on a 1 ms grid (with more chance hits): of the candidates within
    # 10% of the best, the longest period.
    conc = {hz: _phase_concentration(starts, 1e9 / hz)[0] for hz in HZ_CANDIDATES}
    top = max(conc.values())
    best = min(hz for hz, c in conc.items() if c >= 0.9 * top)
    period = 1e9 / best
    share, phase = _phase_concentration(starts, period)
    is_tick = _is_tick(starts, lens, period, phase)
    ticks_seen = spin_s * best
    per_tick = _per_tick(starts[is_tick], lens[is_tick], period, phase)
    out["tick"] = {
        "hz": best,
        "period_ns": period,
        "phase_ns": phase,
        "gaps": int(is_tick.sum()),
        "share_of_gaps": share,
        "share_of_periods": float(len(per_tick) / ticks_seen) if ticks_seen else None,
        "t_tick_ns": float(np.median(per_tick)) if len(per_tick) else None,
        "length_ns": {f"p{round(100 * q)}": float(np.quantile(per_tick, q)) for q in QUANTILES} if len(per_tick) else None,
    }
    rest_starts, rest_lens = starts[~is_tick], lens[~is_tick]
    out["rest"] = {
        "gaps": int(len(rest_starts)),
        "rate_per_s": len(rest_starts) / spin_s,
        "length_ns": {f"p{round(100 * q)}": float(np.quantile(rest_lens, q)) for q in QUANTILES} if len(rest_lens) else None,
        "mean_length_ns": float(rest_lens.mean()) if len(rest_lens) else None,
    }
    return out
