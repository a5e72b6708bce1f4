"""Experiments at scale: grids of scenario keys with replications, on local processes or a
Dask cluster, resumable, with one tidy row per (point, replication).

``sweep`` (exported as ``pktsim.sweep``) is the entry point; ``summarize`` (``pktsim.summarize``)
turns the replications of each point into means with 95% confidence intervals. Each run
hands the scenario text and the point's overrides to the core (:func:`pktsim.sim.run_text`):
the text is parsed once per process, and each run resolves (validates) its point once,
where it runs; its result comes back as Python objects. This package builds on ``sim`` and
``values``, which never import it.

A point that fails, or whose values the scenario rejects, is kept as a row with
``status = "error"`` and its message; the others go on. Finished rows are appended to
``OUT.partial.jsonl`` as they come, so an interrupted sweep resumes where it stopped; the
table is written all at once at the end. The checkpoint's first line holds a hash of what
the rows depend on (pktsim's version, the resolved scenario with its overrides and cost
profile, the grid): a resume reuses the saved ``ok`` rows only when the hash matches, and
otherwise says so and starts over. Error rows are always run again.

Sweeping ``seed`` runs each point with that seed; replication r of the point runs on
seed + r, as for any other sweep.

The table is tidy: each swept key keeps its label ("1.1Mpps") and gains ``KEY_value``, the
number in base units (pps, bit/s, bytes, seconds, Hz, cycles; counts as they are), next to
it; named variants (configurations differing in several keys) add a ``variant`` column.
The full result of each run (per-class, per-ring and time-series lists included) is not
kept in ``DataFrame.attrs`` (pandas deep-copies attrs on every operation, which made the
post-processing of large sweeps quadratic): :func:`results`, :func:`per_class`,
:func:`per_ring` and :func:`time_series` find them by the small ``attrs["sweep_id"]``, for
the sweep's table and any table derived from it (rows are matched by index). ``write_table``
writes those long tables next to the main one: ``OUT.per_class.parquet``,
``OUT.per_ring.parquet`` and ``OUT.time_series.parquet`` (or ``.csv``).

The sweep itself (:func:`sweep`, :func:`run_grid`) is here; the package's modules hold its
parts: :mod:`~pktsim.experiments.tasks` (the grid's tasks and one run),
:mod:`~pktsim.experiments.checkpoint` (the hash and ``OUT.partial.jsonl``),
:mod:`~pktsim.experiments.workers` (local processes or Dask) and
:mod:`~pktsim.experiments.tables` (the table, its full results and long tables, files,
:func:`summarize`). Every name is also reached as ``pktsim.experiments.NAME``.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import _core
from ..errors import ScenarioError
from ..scenario import Scenario, as_scenario
from ..values import expand_values
from .checkpoint import _checkpoint_line, _checkpoint_path, _load_checkpoint, check_output, sweep_fingerprint
from .tables import LONG_TABLES, _table, per_class, per_ring, read_table, results, summarize, time_series, write_table
from .tasks import RUN_FIELDS_DROPPED, Task, grid, parse_variants, run_task
from .workers import CHUNKS_PER_WORKER, DASK_MAX_CHUNK, MAX_CHUNK, DaskClusterError, _import_distributed, _run_dask, _run_processes, chunks, run_chunk

__all__ = [
    "sweep",
    "sweep_plan",
    "run_grid",
    "SweepInterrupted",
    "SweepError",
    "first_point_refusal",
    "failures",
    "DaskClusterError",
    "Task",
    "RUN_FIELDS_DROPPED",
    "grid",
    "parse_variants",
    "run_task",
    "check_output",
    "sweep_fingerprint",
    "run_chunk",
    "chunks",
    "MAX_CHUNK",
    "CHUNKS_PER_WORKER",
    "DASK_MAX_CHUNK",
    "results",
    "per_class",
    "per_ring",
    "time_series",
    "LONG_TABLES",
    "write_table",
    "read_table",
    "summarize",
]


# The most runs a sweep starts unless allowed (``allow_large``, ``--allow-large``): at the
# engine's usual milliseconds per run, minutes to hours of work; a grid past it is mostly
# a typo in a range.
MAX_RUNS = 100_000


def _say(message: str) -> None:
    print(f"pktsim: {message}", file=sys.stderr)


def sweep(
    scenario: Scenario | str | Mapping[str, Any],
    param: str | Mapping[str, Any] | None = None,
    values: str | Sequence[Any] | None = None,
    sets=None,
    progress: bool | Callable[[int, int, str], None] = False,
    *,
    replications: int | None = None,
    variants: Mapping[str, Any] | Sequence[str] | None = None,
    jobs: int | None = None,
    dask: str | None = None,
    output: str | None = None,
    restart: bool = False,
    allow_large: bool = False,
    errors: str = "raise",
):
    """Run the scenario at every point of a grid and return one tidy row per (point,
    replication) as a pandas DataFrame.

    A grid whose first point the scenario refuses (a misspelt key, a value of the wrong
    kind) raises :class:`~pktsim.errors.ScenarioError` before anything runs; a point that
    fails as it runs raises :class:`SweepError` after the grid (its ``table`` holds every
    row), with the message ``pktsim sweep`` prints. ``errors="keep"`` returns the table
    with those points as error rows (``status``, ``error``) instead.

    ``sweep(sc, "traffic.rate", "0.1Mpps:2Mpps:0.1Mpps")``,
    ``sweep(sc, {"traffic.rate": np.linspace(0.5e6, 2e6, 4), "cpu.cores": [1, 2, 4]}, replications=5)``
    or, crossing named configurations with the grid,
    ``sweep(sc, "traffic.rate", "1Mpps,2Mpps", variants={"static": {"nic.itr.mode": "static",
    "nic.itr.interval": 50e-6}, "dynamic": {"nic.itr.mode": "dynamic"}})``. Values and
    ``sets`` may be unit strings ("1.2Mpps") or plain numbers in base units (pps, bit/s,
    bytes, seconds, Hz, cycles); numpy arrays and scalars are accepted. Without ``param`` the
    grid is the scenario's ``[sweep]`` table, with its replications unless ``replications``
    is given (what ``pktsim sweep FILE`` runs); with ``param``, it is the whole grid and
    ``replications`` defaults to 1.

    Columns: ``variant`` (with ``variants``); each swept key as written and ``KEY_value``, its
    number in base units (omitted for keys that are not numbers); ``replication``; ``seed``;
    then the flattened :func:`pktsim.run` fields -- ``offered_pps``, ``throughput_pps``
    (pps), ``throughput_bps`` (bit/s), ``loss_ratio`` (0..1), ``latency_ns_p25`` ...
    ``latency_ns_p999``, ``latency_ns_min``, ``latency_ns_max``, ``latency_ns_mean``,
    ``latency_mean_ci95_ns`` (ns), ``irq_per_s`` (1/s), ``irqs_per_packet``,
    ``polls_per_packet``, ``softirqs_per_packet``, ``packets_per_poll_mean`` (per packet or
    poll), ``time_squeeze``, ``ksoftirqd_wakeups``, ``empty_polls``, ``drops_qdisc_full``,
    ``drops_rx_ring_full``, ``offered_packets``, ``forwarded_packets``,
    ``carried_in_packets``, ``sim_packets``, ``events`` (counts), ``cpu_utilization``,
    ``cpu_useful``, ``cpu_by_activity_*`` (0..1 of the cores' time), ``sim_time_s``,
    ``wall_s`` (s), ``t_proc_ns``, ``t_clean_ns``, ``t_irq_ns`` (ns), ``per_class_CLASS_*``
    (the same per traffic class); ``status`` ("ok" or "error"), ``error``,
    ``pktsim_version`` (of the process that ran the row) and ``scenario``.

    :func:`results`, :func:`per_class`, :func:`per_ring` and :func:`time_series` give the
    full results and long tables of the returned table (or of any table derived from it).
    Points run on local processes (``jobs``, default all cores) or on a Dask cluster
    (``dask="tcp://host:8786"``); ``progress=True`` shows a bar with an ETA (terminal or
    Jupyter). With ``output`` the table is written (Parquet or CSV, see :func:`write_table`)
    and an interrupted sweep resumes (unless ``restart``, or the checkpoint belongs to
    another sweep). Ctrl-C stops the sweep at once and raises :class:`SweepInterrupted`,
    whose ``table`` holds the finished rows.

    Work is bounded before it starts: at most :data:`MAX_RUNS` runs (points x replications x
    variants), and each run at most ``pktsim._core.MAX_FRAMES`` simulated frames (a point
    with more is an error row); ``allow_large`` lifts both."""
    if errors not in ("raise", "keep"):
        raise ValueError(f"errors = {errors!r}: expected 'raise' (a failed point raises) or 'keep' (error rows in the table)")
    if isinstance(param, Mapping):
        params = dict(param)
    elif param is not None:
        params = {param: values}
    else:
        scenario = as_scenario(scenario, sets)
        sets = None
        params, planned = sweep_plan(scenario)
        replications = planned if replications is None else replications
    if errors == "raise" and params:
        sc = as_scenario(scenario, sets)
        refused = first_point_refusal(sc, {k: expand_values(v, k) for k, v in params.items()}, parse_variants(variants))
        if refused:
            raise ScenarioError(refused)
    df = run_grid(
        scenario,
        params,
        1 if replications is None else replications,
        sets=sets,
        variants=variants,
        jobs=jobs,
        dask=dask,
        output=output,
        progress=progress,
        restart=restart,
        allow_large=allow_large,
    )
    if errors == "raise":
        keys = (["variant"] if variants else []) + list(params)
        failed = failures(df, keys)
        if failed:
            more = f" (and {len(failed) - 1} more failed runs: errors='keep' returns them as rows)" if len(failed) > 1 else ""
            raise SweepError(failed[0] + more, df, len(failed))
    return df


class SweepError(ScenarioError):
    """Points of a sweep that failed (a value the scenario refuses, a run that failed): the
    message is the first one's, as ``pktsim sweep`` prints it; ``table`` holds every row
    (the failed ones as error rows) and ``failed`` counts them."""

    def __init__(self, message: str, table, failed: int):
        super().__init__(message)
        self.table, self.failed = table, failed


def first_point_refusal(sc: Scenario, params: Mapping[str, Sequence[str]], variants: Mapping[str, tuple]) -> str | None:
    """Why the scenario refuses the grid's first point under every variant (a misspelt key,
    a value of the wrong kind: every point would fail), or None. ``params``: expanded."""
    first = [(k, vals[0]) for k, vals in params.items() if vals]
    refusals = []
    for vsets in [list(v) for v in variants.values()] or [[]]:
        try:
            sc.with_sets([*vsets, *first])
            return None
        except ScenarioError as e:
            refusals.append(e)
    point = ", ".join(f"{k}={v}" for k, v in first)
    return f"sweep: its first point ({point}) is refused: {refusals[0]}"


def failures(df, keys: Sequence[str]) -> list[str]:
    """One line per failed run of a sweep table: ``point K=V, ... (replication R) failed:
    ERROR``."""
    if "status" not in df:
        return []
    failed = df[df["status"] != "ok"]
    out = []
    for r in failed[[*keys, "replication", "error"]].to_dict("records"):
        point = ", ".join(f"{k}={r[k]}" for k in keys)
        out.append(f"point {point} (replication {r['replication']}) failed: {r['error']}")
    return out


def sweep_plan(scenario: Scenario, params: Mapping[str, Any] | None = None, replications: int | None = None) -> tuple[dict, int]:
    """The grid and replications a sweep of ``scenario`` runs: the keys of its ``[sweep]``
    table (``[sweep.params]``), then ``params`` (a key given in both takes the value given
    here); ``replications`` if given (and not 0), else the table's, else 1. The values are
    as written; :func:`pktsim.expand_values` expands them."""
    spec = scenario.data.get("sweep") or {}
    grid_params = {**dict(spec.get("params", {})), **dict(params or {})}
    return grid_params, replications or int(spec.get("replications", 1))


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during a sweep: ``table`` holds the rows finished before it
    (also saved in the checkpoint when the sweep writes an output file)."""

    def __init__(self, table, done: int, total: int):
        super().__init__(f"sweep interrupted after {done} of {total} runs")
        self._table, self.done, self.total = table, done, total

    @property
    def table(self):
        # Built when asked for (a callable until then): the command line never asks, and
        # its first pandas table costs the import of pandas, half a second after Ctrl-C.
        if callable(self._table):
            self._table = self._table()
        return self._table


def run_grid(
    scenario: Scenario | str | Mapping[str, Any],
    params: Mapping[str, Any],
    replications: int = 1,
    *,
    sets=None,
    variants: Mapping[str, Any] | Sequence[str] | None = None,
    jobs: int | None = None,
    dask: str | None = None,
    output: str | Path | None = None,
    progress: bool | Callable[[int, int, str], None] = False,
    restart: bool = False,
    notify: Callable[[str], None] | None = _say,
    dask_lost_after_s: float = 10.0,
    allow_large: bool = False,
):
    """Run a sweep; returns a pandas DataFrame (one row per point and replication; see
    :func:`sweep`). The full result of each run is reached with :func:`results`.

    With ``output``, saved rows of an interrupted run of the same sweep are reused (see the
    module's notes); ``restart`` discards them. ``notify`` receives the one-line notice
    when a checkpoint is not reused (default: printed on stderr). On Dask, a sweep with no
    worker for ``dask_lost_after_s`` seconds stops with :class:`DaskClusterError`."""
    sc = as_scenario(scenario, sets)
    if not params:
        raise ValueError("a sweep needs at least one parameter (--param KEY --values ...)")
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 1:
        raise ValueError(f"replications = {replications!r}: expected a whole number of at least 1")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs = {jobs!r}: expected a whole number of local processes of at least 1 (None: one per core)")
    if dask is not None:
        _import_distributed()
    named = parse_variants(variants)
    expanded = {}
    for key, vals in params.items():
        expanded[key] = expand_values(vals, key)
        if not expanded[key]:
            raise ValueError(f"{key}: no values to sweep")
        seen = set()
        for v in expanded[key]:
            if v in seen:
                raise ValueError(f"{key}: value {v!r} is given twice (each point of a sweep is run once per replication)")
            seen.add(v)
    params = expanded
    runs = math.prod(len(v) for v in params.values()) * replications * max(1, len(named))
    if runs > MAX_RUNS and not allow_large:
        raise ValueError(
            f"{runs:,} runs ({' x '.join(str(len(v)) for v in params.values())} points x {replications} replications"
            + (f" x {len(named)} variants" if named else "")
            + f"): more than {MAX_RUNS:,}; narrow the grid, or pass --allow-large (allow_large=True) to run them all"
        )
    out = check_output(output) if output else None
    tasks = grid(sc, params, replications, named, allow_large=allow_large)
    checkpoint = _checkpoint_path(out) if out else None
    done: dict = {}
    if checkpoint:
        fingerprint = sweep_fingerprint(sc, params, named)
        if restart:
            if checkpoint.exists() and notify:
                notify(f"{checkpoint}: --restart: not reusing its saved rows")
        else:
            done, why = _load_checkpoint(checkpoint, fingerprint)
            if why and notify:
                notify(f"{checkpoint}: not resuming from it: {why}; starting over")
        wanted = {t.key for t in tasks}
        done = {k: v for k, v in done.items() if k in wanted}
        if done and notify:
            notify(f"{checkpoint}: resuming: {len(done)} of {len(tasks)} runs reused, {len(tasks) - len(done)} to run")
        # The checkpoint starts afresh with this sweep's hash and the rows kept.
        lines = [json.dumps({"_pktsim_sweep": {"fingerprint": fingerprint, "version": _core.VERSION}})]
        lines += [json.dumps(row, allow_nan=True) for row in done.values()]
        from ..textio import atomic_write

        atomic_write(checkpoint, "\n".join(lines) + "\n")
    todo = [t for t in tasks if t.key not in done]
    if checkpoint:
        todo = [replace(t, saved=True) for t in todo]
    bar = _progress_bar(len(tasks), len(done)) if progress is True else None
    report = bar or progress or None
    rows: dict = {tuple(k): v for k, v in done.items()}
    keys = (["variant"] if named else []) + list(params)

    saved = checkpoint.open("a") if checkpoint else None

    def finished(batch: list) -> None:
        """Rows as they come back ((task, row) pairs: one, or a chunk's)."""
        for task, row in batch:
            row["_key"] = list(task.key)
            rows[tuple(row["_key"])] = row
            full_json = row.pop("_full_json", None)
            if saved:
                saved.write(_checkpoint_line(row, full_json) + "\n")
            if report:
                label = ", ".join(([f"variant={task.variant}"] if task.variant else []) + [f"{k}={v}" for k, v in task.params])
                report(len(rows), len(tasks), label)
        if saved:
            saved.flush()

    try:
        if report and done:
            report(len(rows), len(tasks), f"resuming: {len(done)} points already done")
        if dask is not None:
            _run_dask(dask, todo, finished, dask_lost_after_s)
        elif (jobs or os.cpu_count() or 1) == 1 or len(todo) <= 1:
            for t in todo:
                finished([(t, run_task(t))])
        else:
            _run_processes(min(jobs or os.cpu_count() or 1, len(todo)), todo, finished)
    except KeyboardInterrupt as e:
        if isinstance(e, SweepInterrupted):
            raise
        finished_rows = [rows[t.key] for t in tasks if t.key in rows]
        raise SweepInterrupted(lambda: _table(finished_rows, sc, keys, len(todo)), len(rows), len(tasks)) from None
    finally:
        if bar:
            bar.close()
        if saved:
            saved.close()
    df = _table([rows[t.key] for t in tasks], sc, keys, len(todo))
    if out:
        write_table(df, out, sc, variants=named)
        if checkpoint and checkpoint.exists():
            checkpoint.unlink()
    return df


def _progress_bar(total: int, initial: int = 0):
    """A progress bar with rate and ETA that draws on a terminal and in Jupyter (tqdm.auto)."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, initial=initial, unit="run", dynamic_ncols=True, leave=True, file=sys.stderr)

    class _Bar:
        def __call__(self, i: int, n: int, label: str) -> None:
            bar.set_postfix_str(label[:60], refresh=False)
            bar.update(max(0, i - bar.n))

        def close(self) -> None:
            bar.close()

    return _Bar()
