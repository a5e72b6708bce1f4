"""Simulation from Python: ``run`` one scenario.

The engine is the Rust core; this module carries a scenario to it and shapes what comes
back into a dict. Grids of runs (``sweep``) are in :mod:`pktsim.experiments`, which builds
on this module (never the other way round).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence

from . import _core
from .parse import _normalise_sets, read_scenario_file, resolve
from .values import expand_values, flatten

# typing is only needed by type checkers (annotations are not evaluated): not imported at
# run time, so that the command starts without it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from .scenario import Scenario

__all__ = ["RunResult", "run", "run_file", "run_text", "expand_values", "flatten", "observe_runs"]

_OBSERVERS: list = []


@contextlib.contextmanager
def observe_runs(callback: Callable[[RunResult], None]) -> Iterator[None]:
    """Call ``callback(result)`` after each :func:`run` in this process while the block runs
    (``pktsim reproduce`` counts its simulations with it to show progress)."""
    _OBSERVERS.append(callback)
    try:
        yield
    finally:
        _OBSERVERS.remove(callback)


class RunResult(dict):
    """One run's result: a dict with the ``pktsim run --json`` keys."""

    # The offered rate the model computes for the run's scenario (pps), for a sweep's
    # ``traffic.rate_value`` column when the rate is written as a share or in bit/s.
    _offered_pps: float | None = None
    # The result as JSON text, when the run was asked to keep it (see run_text).
    _json: str | None = None

    def flat(self) -> dict:
        """One level of keys: ``latency_ns.p99`` becomes ``latency_ns_p99``; lists are dropped."""
        return flatten(self)


def run(scenario: Scenario | str | Mapping[str, Any], sets=None, *, allow_large: bool = False) -> RunResult:
    """Simulate a scenario (a :class:`Scenario`, a TOML path or a dict) with optional
    overrides (``sets={"traffic.rate": "1.2Mpps"}``; plain numbers are taken in the key's
    base unit: pps, bit/s, bytes, seconds, Hz, cycles; numpy scalars are numbers).

    Returns a :class:`RunResult` (a dict, the ``pktsim run --json`` object):

    - ``name``, ``seed``; ``offered_pps``, ``throughput_pps`` (pps), ``throughput_bps``
      (bit/s), ``loss_ratio`` (0..1 of the offered packets);
    - ``latency_ns``: ``p25``, ``p50``, ``p75``, ``p90``, ``p99``, ``p999``, ``min``,
      ``max``, ``mean`` (ns), and ``latency_mean_ci95_ns`` (ns, batch means);
    - ``irq_per_s`` (1/s), ``irqs_per_packet``, ``polls_per_packet``,
      ``softirqs_per_packet``, ``packets_per_poll`` (``mean`` and ``histogram``),
      ``time_squeeze``, ``ksoftirqd_wakeups``, ``empty_polls`` (counts);
    - ``cpu_utilization``, ``cpu_useful`` (0..1 of all cores' time), ``cpu_by_activity``
      (``idle``, ``io``, ``irq``, ``poll``, ``rx_clean``, ``spin``, ``tx_clean``,
      ``tx_lock``, ``wakeup``, ``refill``: 0..1), ``cpu_per_core`` (list, 0..1);
    - ``cpu_by_context`` (NAPI modes: ``hardirq``, ``softirq``, ``ksoftirqd``,
      ``napi_threads``, ``app``: 0..1 of all cores' time, as mpstat and pidstat split it);
    - ``idle_states`` (with ``[cpu.idle]`` states that cost something: ``governor``, per state
      ``name``, ``entries``, ``time_share``, ``above``, ``below``; ``wakeups_per_s``,
      ``mean_exit_latency_ns``);
    - ``drops`` (``qdisc_full``, ``rx_ring_full``: packets), ``offered_packets``,
      ``forwarded_packets``, ``consumed_packets`` (XDP_DROP, an application), ``carried_in_packets``,
      ``sim_packets``, ``events`` (counts);
    - ``per_class`` (by class name: the throughput, loss, latency and drop fields above) and
      ``per_ring`` (list: ``ring``, ``core``, ``queue`` and the same fields);
    - ``series`` (with ``measure.interval``: per bucket ``offered``, ``forwarded``,
      ``dropped``, ``carried_in``, ``irqs``, ``polls`` counts, ``latency_sum_ns`` and
      ``itr_sum_ns``: the moderation interval at each interrupt, summed; over ``irqs`` the
      mean interval; ``rx_polled``: over ``polls``, the frames per poll;
      ``deferred_polls``: polls the deferral timer started; ``wakeups`` from an idle state
      and their ``exit_latency_sum_ns``, whose mean names the state) and
      ``series_interval_s`` (s);
    - ``sim_time_s``, ``wall_s`` (s), ``t_proc_ns``, ``t_clean_ns``, ``t_irq_ns`` (ns, the
      per-packet costs used), ``io`` (I/O-mode details) and ``notes`` (list of text).

    A run of more than ``pktsim._core.MAX_FRAMES`` simulated frames (offered rate x
    warm-up and duration; 2e9, about a minute) raises :class:`~pktsim.errors.ScenarioError`
    naming ``measure.duration`` unless ``allow_large``."""
    from .scenario import as_scenario

    sc = as_scenario(scenario, sets)
    return _observed(run_text(sc.text, sc.format, sc.origin, sc.base_dir, sc.sets, allow_large=allow_large))


def run_all(scenarios: Sequence, *, workers: int | None = None) -> list[RunResult]:
    """:func:`run` for each of ``scenarios`` (what :func:`run` takes, or ``(scenario,
    sets)`` pairs), side by side on ``workers`` threads (default: the machine's CPUs; the
    engine releases the GIL), the results in their order, each bit for bit what
    :func:`run` gives. Ctrl-C cancels the runs not started; the ones under way end first
    (a run in a thread does not see the signal)."""
    from concurrent.futures import ThreadPoolExecutor

    items = [s if isinstance(s, tuple) else (s, None) for s in scenarios]
    n = min(len(items), workers or os.cpu_count() or 1)
    if n <= 1:
        return [run(sc, sets) for sc, sets in items]
    ex = ThreadPoolExecutor(max_workers=n)
    try:
        futures = [ex.submit(run, sc, sets) for sc, sets in items]
        return [f.result() for f in futures]
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        ex.shutdown(wait=True)


def run_file(path: str | Path, sets=None, *, allow_large: bool = False, notify: Callable[[str], None] | None = None) -> RunResult:
    """What :func:`run` does for a TOML file, without building a :class:`Scenario` (what
    ``pktsim run FILE`` does: the file is read, validated once and simulated; the same
    errors, the same result). ``notify`` hears of a long run (more than
    ``pktsim._core.LONG_FRAMES`` frames) before it starts."""
    text, origin, base_dir = read_scenario_file(path)
    point = resolve(text, "toml", origin, base_dir, _normalise_sets(sets))
    frames = point.expected_frames
    if notify and frames > _core.LONG_FRAMES and (allow_large or frames <= _core.MAX_FRAMES):
        notify(f"{origin}: {frames:.3g} frames to simulate: this run may take a minute or more (Ctrl-C stops it)")
    result = RunResult(point.run(allow_large=allow_large))
    result._offered_pps = point.offered_pps
    return _observed(result)


def _observed(result: RunResult) -> RunResult:
    for callback in list(_OBSERVERS):
        callback(result)
    return result


def run_text(text: str, fmt: str, origin: str, base_dir: str, sets=(), *, keep_json: bool = False, allow_large: bool = False) -> RunResult:
    """Simulate scenario text (``fmt`` "toml" or "json") with overrides (``["a.b=1"]``,
    ``[("a.b", 1)]`` or ``{"a.b": 1}``, applied as :meth:`Scenario.with_sets` applies them);
    relative profile paths are read from ``base_dir``, errors name ``origin``.

    The core parses the text once per process (:func:`pktsim.parse.parsed`) and resolves
    the overrides on a copy of it, once per call; an invalid scenario raises
    :class:`~pktsim.errors.ScenarioError` as :func:`run` would. The result comes from the
    core as Python objects (no JSON text in between). A sweep's points take this path; with
    ``keep_json`` the result's JSON text, written by the core, is kept as ``_json`` too (a
    sweep's checkpoint saves it)."""
    point = resolve(text, fmt, origin, base_dir, _normalise_sets(sets), check_profile=False)
    if keep_json:
        objects, text_json = point.run(and_json=True, allow_large=allow_large)
        result = RunResult(objects)
        result._json = text_json
    else:
        result = RunResult(point.run(allow_large=allow_large))
    result._offered_pps = point.offered_pps
    return result
