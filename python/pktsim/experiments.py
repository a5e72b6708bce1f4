"""Experiments at scale: grids of scenario keys with replications, on local processes or a
Dask cluster, resumable, with one tidy row per (point, replication).

``sweep`` (exported as ``pktsim.sweep``) is the entry point; ``summarize`` (``pktsim.summarize``)
turns the replications of each point into means with 95% confidence intervals. Each run
hands the scenario text and the point's overrides to the core (:func:`pktsim.sim.run_text`):
the text is parsed once per process, and each run resolves (validates) its point once,
where it runs; its result comes back as Python objects. This module builds on ``sim`` and
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
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import os
import sys
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import _core, sim
from .errors import ScenarioError
from .parse import _check_profile_file, parsed
from .scenario import Scenario, as_scenario
from .values import expand_values, flatten, numeric_value

RUN_FIELDS_DROPPED = ("swept",)


@dataclass(frozen=True)
class Task:
    """One run of a sweep: a point of the grid and a replication, with what the core needs
    to run it (the base scenario's text and overrides; the point's values and the seed go
    on top). Tasks are pickled to worker processes or Dask workers as they are."""

    index: int
    params: tuple  # ((key, value), ...)
    replication: int
    seed: int
    text: str
    fmt: str
    origin: str
    base_dir: str
    sets: tuple
    invalid: str = ""  # why the scenario rejects this point ("" when it is valid)
    variant: str = ""  # the named variant's name ("" without variants)
    variant_sets: tuple = ()  # its overrides ((key, value), ...)
    numbers: tuple = ()  # each swept value in base units (None when not a number)
    files: tuple = ()  # ((relative path, text), ...): cost-profile files the scenario names
    saved: bool = False  # the sweep keeps a checkpoint: the row brings its result's JSON text

    @property
    def key(self) -> tuple:
        head = (self.variant,) if self.variant else ()
        return (*head, *(v for _, v in self.params), self.replication)

    @property
    def run_sets(self) -> list:
        """The overrides of this run: the base scenario's, the variant's, the point's, then
        its seed."""
        return list(self.sets) + list(self.variant_sets) + [*self.params, ("seed", str(self.seed))]


_MATERIALISED: dict = {}


def _base_dir(task: Task) -> str:
    """Where the run reads the scenario's relative profile files: its own directory when
    they are there as sent, else a private directory of this process holding the copies
    that travelled with the task (a Dask worker started elsewhere)."""
    if not task.files:
        return task.base_dir
    try:
        if all((Path(task.base_dir) / name).read_text(encoding="utf-8") == text for name, text in task.files):
            return task.base_dir
    except (OSError, UnicodeDecodeError):
        pass
    digest = hashlib.sha256(json.dumps(task.files).encode()).hexdigest()[:16]
    if digest not in _MATERIALISED:
        root = Path(tempfile.mkdtemp(prefix="pktsim-profiles-"))
        depth = max(Path(name).parts.count("..") for name, _ in task.files)
        base = root.joinpath(*(["d"] * depth)) if depth else root
        for name, text in task.files:
            target = base / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        _MATERIALISED[digest] = str(base)
    return _MATERIALISED[digest]


def run_task(task: Task) -> dict:
    """Run one point; never raises (a failure becomes an error row, and so does a point the
    scenario rejects).

    The scenario's text is parsed once per process; the point's overrides are resolved
    (validated) once, here, to run it (:func:`pktsim.sim.run_text`)."""
    row = _row_head(task)
    if task.invalid:
        return _failed_row(task, task.invalid)
    try:
        if task.saved:
            r = sim.run_text(task.text, task.fmt, task.origin, _base_dir(task), task.run_sets, keep_json=True)
        else:
            r = sim.run_text(task.text, task.fmt, task.origin, _base_dir(task), task.run_sets)
        flat = {k: v for k, v in flatten(r).items() if not k.startswith(RUN_FIELDS_DROPPED)}
        flat.pop("seed", None)
        row.update(flat)
        if task.numbers and "traffic.rate" in row and row.get("traffic.rate_value") is None:
            # A share of the line rate or bit/s: the packet rate the model computes.
            row["traffic.rate_value"] = getattr(r, "_offered_pps", None)
        row["status"] = "ok"
        row["error"] = ""
        row["pktsim_version"] = _core.VERSION  # the version that ran it (a worker's own)
        row["_full"] = dict(r)
        if getattr(r, "_json", None) is not None:
            row["_full_json"] = r._json
    except BaseException as e:  # noqa: BLE001 - a point's failure must not stop the sweep
        if isinstance(e, KeyboardInterrupt):
            raise
        row["status"] = "error"
        row["error"] = f"{type(e).__name__}: {e}"
    return row


def _row_head(task: Task) -> dict:
    """The first columns of a task's row: the swept keys, the replication and the seed.
    With ``seed`` swept its column is the point's seed as written (replication r ran on
    seed + r, which the full result's own ``seed`` says)."""
    row: dict = {"variant": task.variant} if task.variant else {}
    numbers = task.numbers or (None,) * len(task.params)
    for (k, v), x in zip(task.params, numbers):
        row[k] = v
        row[f"{k}_value"] = x
    row["replication"] = task.replication
    row.setdefault("seed", task.seed)
    return row


def _failed_row(task: Task, message: str) -> dict:
    return {**_row_head(task), "status": "error", "error": message, "pktsim_version": _core.VERSION}


def parse_variants(variants) -> dict[str, tuple]:
    """Named variants as ``{name: ((key, value text), ...)}``, from ``{"static":
    {"nic.itr.mode": "static", "nic.itr.interval": 50e-6}}``, ``{"static":
    "nic.itr.mode=static,nic.itr.interval=50us"}`` or the CLI's
    ``["static=nic.itr.mode=static,nic.itr.interval=50us", ...]``. Raises ``ValueError``
    naming the variant and what was expected."""
    from .parse import _normalise_sets

    if not variants:
        return {}
    if not isinstance(variants, Mapping):
        parsed = {}
        for item in variants:
            name, sep, rest = str(item).partition("=")
            if not sep or not name.strip():
                raise ValueError(f"--variant {item}: expected NAME=KEY=VALUE[,KEY=VALUE...], e.g. static=nic.itr.mode=static,nic.itr.interval=50us")
            if name.strip() in parsed:
                raise ValueError(f"--variant {name.strip()}: given twice; expected each name once")
            parsed[name.strip()] = rest
        variants = parsed
    out = {}
    for name, spec in variants.items():
        if isinstance(spec, str):
            spec = [p for p in (x.strip() for x in spec.split(",")) if p]
            bad = [p for p in spec if "=" not in p]
            if bad:
                raise ValueError(f"variant {name}: {bad[0]!r}: expected KEY=VALUE")
        try:
            sets = tuple(_normalise_sets(spec))
        except ScenarioError as e:
            raise ValueError(f"variant {name}: {e}") from None
        if not sets:
            raise ValueError(f"variant {name}: no KEY=VALUE overrides; expected at least one")
        out[str(name)] = sets
    return out


def _profile_files(scenario: Scenario, extra: Sequence[str] = ()) -> tuple:
    """The relative cost-profile files the scenario (and swept or variant values of
    ``cost.profile``) name, as ((path as written, text), ...), to travel with each task."""
    names = [(scenario.data.get("cost") or {}).get("profile"), *extra]
    bundled = set(_core.bundled_profiles())
    files = []
    for name in dict.fromkeys(n for n in names if isinstance(n, str) and n):
        if name in bundled or Path(name).is_absolute():
            continue
        try:
            files.append((name, (Path(scenario.base_dir) / name).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue  # the core says what is wrong with it
    return tuple(files)


def grid(scenario: Scenario, params: Mapping[str, Any], replications: int, variants: Mapping[str, tuple] | None = None) -> list[Task]:
    """Tasks for the cartesian product of the parameter values, `replications` each with
    seeds base, base + 1, ... (independent streams: each component's seed is derived from
    the scenario seed). The base is the point's own seed: the scenario's, or the swept
    value when ``seed`` is a parameter.

    Building the grid resolves nothing: each run resolves (validates) its point once, where
    it runs (:func:`run_task`), and a point the scenario rejects yields error rows with the
    :class:`~pktsim.errors.ScenarioError` message while the rest of the grid goes on. Only
    where a point's seed comes from the grid (``seed`` swept, or set by a variant) is the
    point resolved here, for its seed; a point rejected then, or whose swept cost-profile
    file cannot be read, yields its error rows without running. ``traffic.rate`` written as
    a share of the line rate or in bit/s gets its ``KEY_value`` (the model's packet rate)
    from the run."""
    keys = list(params)
    values = [expand_values(params[k], k) for k in keys]
    named = list((variants or {}).items()) or [("", ())]
    profiles = [v for _, vs in named for k, v in vs if k == "cost.profile"]
    if "cost.profile" in params:
        profiles += values[keys.index("cost.profile")]
    files = _profile_files(scenario, profiles)
    numbers_of = {k: {v: numeric_value(k, v) for v in vals} for k, vals in zip(keys, values)}
    seeded = "seed" in keys
    profiled = "cost.profile" in keys
    tasks = []
    for (variant, vsets), combo in itertools.product(named, itertools.product(*values)):
        point = tuple(zip(keys, combo))
        numbers = tuple(numbers_of[k][v] for k, v in point)
        invalid = ""
        base_seed = scenario.seed
        added = [*vsets, *point]
        try:
            if seeded or any(k == "seed" for k, _ in vsets):
                base_seed = scenario._resolve(added).seed
            elif profiled or any(k == "cost.profile" for k, _ in vsets):
                _check_profile_file(
                    parsed(scenario.text, scenario.format, scenario.origin, scenario.base_dir), scenario.origin, scenario.base_dir, [*scenario.sets, *added]
                )
        except ScenarioError as e:
            invalid, base_seed = f"ScenarioError: {e}", scenario.seed
        for r in range(replications):
            tasks.append(
                Task(
                    len(tasks),
                    point,
                    r,
                    base_seed + r,
                    scenario.text,
                    scenario.format,
                    scenario.origin,
                    scenario.base_dir,
                    scenario.sets,
                    invalid,
                    variant,
                    tuple(vsets),
                    numbers,
                    files,
                )
            )
    return tasks


def sweep_fingerprint(scenario: Scenario, params: Mapping[str, Sequence[str]], variants: Mapping[str, tuple] | None = None) -> str:
    """A hash of everything a sweep's rows depend on: pktsim's version, the resolved
    scenario (every default filled in) with its overrides, the cost-profile file it names
    (bundled profiles are part of the version) and the grid. A checkpoint whose hash differs
    belongs to another sweep."""
    h = hashlib.sha256()
    profile = (scenario.data.get("cost") or {}).get("profile")
    profile_bytes = b""
    if isinstance(profile, str) and profile not in _core.bundled_profiles():
        try:
            profile_bytes = (Path(scenario.base_dir) / profile).read_bytes()
        except OSError:
            profile_bytes = b"<unreadable>"
    doc = {
        "version": _core.VERSION,
        "scenario": scenario.data,
        "sets": [list(kv) for kv in scenario.sets],
        "grid": {k: list(v) for k, v in params.items()},
    }
    if variants:
        doc["variants"] = {k: [list(kv) for kv in v] for k, v in variants.items()}
    h.update(json.dumps(doc, sort_keys=True, default=str).encode())
    h.update(hashlib.sha256(profile_bytes).digest())
    return h.hexdigest()


def _checkpoint_path(output: Path) -> Path:
    return output.with_name(output.name + ".partial.jsonl")


def _checkpoint_line(row: dict, full_json: str | None = None) -> str:
    """A row as one line of JSON; ``full_json``, the core's JSON text of the row's full
    result, stands for ``row["_full"]`` (the same values, without Python encoding them)."""
    if full_json is None or "_full" not in row:
        return json.dumps(row)
    head = json.dumps({k: v for k, v in row.items() if k != "_full"})
    return f'{head[:-1]}, "_full": {full_json}}}' if len(head) > 2 else f'{{"_full": {full_json}}}'


def _load_checkpoint(path: Path, fingerprint: str) -> tuple[dict, str]:
    """The ``ok`` rows saved by an interrupted run of the same sweep, and why none are
    reused ("" when the file is missing or matches). Error rows are not kept: a resume runs
    them again."""
    done: dict = {}
    if not path.is_file():
        return done, ""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        return done, f"cannot read it ({e.strerror or e})"
    header = None
    if lines:
        try:
            header = json.loads(lines[0]).get("_pktsim_sweep")
        except (json.JSONDecodeError, AttributeError):
            header = None
    if not isinstance(header, dict) or header.get("fingerprint") != fingerprint:
        return done, "it was written by a different sweep (the scenario, its overrides, the grid or pktsim changed)"
    for line in lines[1:]:
        try:
            row = json.loads(line)
            key = tuple(row["_key"])
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a line cut by the interruption
        if row.get("status") == "ok":
            done[key] = row
        else:
            done.pop(key, None)
    return done, ""


def _say(message: str) -> None:
    print(f"pktsim: {message}", file=sys.stderr)


def check_output(output: str | Path) -> Path:
    """The sweep table's path, checked before any run: a ``.parquet`` or ``.csv`` suffix, and
    a directory where the table and its checkpoint can be written. Raises ``ValueError``
    naming the path and the reason."""
    out = Path(output)
    if out.suffix not in (".parquet", ".csv"):
        raise ValueError(f"{out}: expected a .parquet or .csv output file")
    if out.is_dir():
        raise ValueError(f"{out}: is a directory, expected a .parquet or .csv output file")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        probe = _checkpoint_path(out)
        existed = probe.exists()
        with probe.open("a"):
            pass
        if not existed:
            probe.unlink()
    except OSError as e:
        raise ValueError(f"{out}: cannot write there ({e.strerror or e})") from None
    return out


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
):
    """Run the scenario at every point of a grid and return one tidy row per (point,
    replication) as a pandas DataFrame.

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
    whose ``table`` holds the finished rows."""
    if isinstance(param, Mapping):
        params = dict(param)
    elif param is not None:
        params = {param: values}
    else:
        scenario = as_scenario(scenario, sets)
        sets = None
        params, planned = sweep_plan(scenario)
        replications = planned if replications is None else replications
    return run_grid(
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
    )


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
        self.table, self.done, self.total = table, done, total


class DaskClusterError(ValueError):
    """The Dask cluster cannot run the sweep: ``distributed`` is not installed, the
    scheduler is gone, or no worker is left."""


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
    if replications < 1:
        raise ValueError(f"replications = {replications}: expected at least 1")
    if dask:
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
    out = check_output(output) if output else None
    tasks = grid(sc, params, replications, named)
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
        # The checkpoint starts afresh with this sweep's hash and the rows kept.
        lines = [json.dumps({"_pktsim_sweep": {"fingerprint": fingerprint, "version": _core.VERSION}})]
        lines += [json.dumps(row, allow_nan=True) for row in done.values()]
        from .textio import atomic_write

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
        if dask:
            _run_dask(dask, todo, finished, dask_lost_after_s)
        elif (jobs or os.cpu_count() or 1) == 1 or len(todo) <= 1:
            for t in todo:
                finished([(t, run_task(t))])
        else:
            _run_processes(min(jobs or os.cpu_count() or 1, len(todo)), todo, finished)
    except KeyboardInterrupt as e:
        if isinstance(e, SweepInterrupted):
            raise
        partial = _table([rows[t.key] for t in tasks if t.key in rows], sc, keys, len(todo))
        raise SweepInterrupted(partial, len(rows), len(tasks)) from None
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


# The full results of recent sweeps, by attrs["sweep_id"]: held while the sweep's own table
# lives, and for the last few sweeps in any case (tables derived from a dropped one).
_STORE: weakref.WeakValueDictionary[str, _Results] = weakref.WeakValueDictionary()
_RECENT: collections.deque = collections.deque(maxlen=8)


class _Results(list):
    """The full results of a sweep's rows (None for an error row), by row position."""

    keys: list


def _table(ordered: list, sc: Scenario, keys: list, tasks_run: int):
    import pandas as pd

    full = _Results(r.pop("_full", None) for r in ordered)
    full.keys = keys
    for r in ordered:
        r.pop("_key", None)
    df = pd.DataFrame(ordered)
    # A key's numeric column only when its values are numbers.
    empty = [c for c in df.columns if c.endswith("_value") and c[: -len("_value")] in keys and df[c].isna().all()]
    df = df.drop(columns=empty)
    if "pktsim_version" not in df:
        df["pktsim_version"] = _core.VERSION
    df["pktsim_version"] = df["pktsim_version"].fillna(_core.VERSION)
    df["scenario"] = sc.origin
    sweep_id = uuid.uuid4().hex
    _STORE[sweep_id] = full
    _RECENT.append(full)
    object.__setattr__(df, "_pktsim_results", full)  # lives as long as the table
    # Small metadata only: pandas deep-copies attrs on every operation.
    df.attrs["sweep_id"] = sweep_id
    df.attrs["tasks_run"] = tasks_run
    df.attrs["params"] = list(keys)
    return df


def results(df) -> list:
    """The full :func:`pktsim.run` result (a dict, with its per-class, per-ring and
    time-series lists) of each row of a sweep table, or of a table derived from it (rows
    matched by index); None for an error row. Raises ``ValueError`` when the table's results
    are gone (a table read back from a file: use the long tables written next to it)."""
    full = _STORE.get(df.attrs.get("sweep_id", ""))
    if full is None:
        raise ValueError(
            "this table's full results are not held any more (read from a file, or from an old sweep); "
            "expected a table returned by pktsim.sweep, or read OUT.per_class/per_ring/time_series files"
        )
    return [full[i] if 0 <= i < len(full) else None for i in df.index]


def _point_columns(df) -> list:
    keys = [k for k in df.attrs.get("params", []) if k in df.columns]
    cols = []
    for k in keys:
        cols.append(k)
        if f"{k}_value" in df.columns:
            cols.append(f"{k}_value")
    return cols + [c for c in ("replication", "seed") if c in df.columns]


def _long(df, rows_of) -> Any:
    import pandas as pd

    cols = _point_columns(df)
    point = df[cols].to_dict("records")
    out = []
    for head, r in zip(point, results(df)):
        if r:
            out.extend({**head, **row} for row in rows_of(r))
    return pd.DataFrame(out, columns=None if out else cols)


def per_class(df):
    """A long table of per-class results: the point columns, ``class``, then each class's
    flattened fields (``offered_pps``, ``throughput_pps``, ``loss_ratio``,
    ``latency_ns_p99``, ...), one row per (row of ``df``, traffic class)."""
    return _long(df, lambda r: ({"class": c, **flatten(v)} for c, v in (r.get("per_class") or {}).items()))


def per_ring(df):
    """A long table of per-ring results: the point columns, then ``ring``, ``core``,
    ``queue`` and each ring's flattened fields, one row per (row of ``df``, rx ring)."""
    return _long(df, lambda r: (flatten(v) for v in (r.get("per_ring") or [])))


def time_series(df):
    """A long table of the time series (scenarios with ``measure.interval``): the point
    columns, ``bucket``, ``t_s`` (the bucket's start: bucket x ``series_interval_s``, s) and the
    bucket's counts (``offered``, ``forwarded``, ``dropped``, ``irqs``, ``polls``, ...),
    one row per (row of ``df``, bucket)."""

    def rows(r):
        step = r.get("series_interval_s") or 0.0
        return ({"bucket": i, "t_s": i * step, **b} for i, b in enumerate(r.get("series") or []))

    return _long(df, rows)


LONG_TABLES = {"per_class": per_class, "per_ring": per_ring, "time_series": time_series}


def _worker_init() -> None:
    """Local worker processes leave Ctrl-C to the parent, which stops them at once (a
    terminated worker ends quietly: not with the command's SIGTERM handler, inherited by
    the fork, which would raise KeyboardInterrupt in it)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_chunk(tasks: Sequence[Task]) -> list:
    """Run a few points in turn (one pool or Dask task): their rows, in order."""
    return [run_task(t) for t in tasks]


# Points per pool or Dask task: enough that the per-task cost (pickling, a round trip to
# the worker, the scheduler's bookkeeping) is spread over many short points, few enough
# that every worker gets about CHUNKS_PER_WORKER tasks (the last ones balance the load)
# and that finished rows reach the checkpoint and the progress bar as they come.
MAX_CHUNK = 64
CHUNKS_PER_WORKER = 8


def chunks(tasks: Sequence[Task], workers: int, max_chunk: int = MAX_CHUNK) -> list:
    """The tasks cut into consecutive chunks for ``workers`` processes (see ``MAX_CHUNK``)."""
    size = max(1, min(max_chunk, len(tasks) // max(1, workers * CHUNKS_PER_WORKER)))
    return [list(tasks[i : i + size]) for i in range(0, len(tasks), size)]


def _finish_chunk(chunk: Sequence[Task], fut, finished) -> None:
    try:
        rows = fut.result()
    except Exception as e:  # a worker died (or was lost): the chunk's points failed
        rows = [_failed_row(t, f"{type(e).__name__}: {e}") for t in chunk]
    finished(list(zip(chunk, rows)))


def _run_processes(workers: int, tasks: Sequence[Task], finished) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ex = ProcessPoolExecutor(max_workers=workers, initializer=_worker_init)
    try:
        futures = {ex.submit(run_chunk, c): c for c in chunks(tasks, workers)}
        for fut in as_completed(futures):
            _finish_chunk(futures[fut], fut, finished)
    except BaseException:
        # Ctrl-C: the running points are abandoned, not waited for.
        procs = list((getattr(ex, "_processes", None) or {}).values())
        ex.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(1.0)
        raise
    ex.shutdown(wait=True)


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise DaskClusterError("--dask needs Dask's distributed package, which is not installed: pip install 'dask[distributed]'") from None
    return distributed


def _reason(e: BaseException) -> str:
    text = (str(e).strip().splitlines() or [""])[0].rstrip(":")
    if "cancelled" in text.lower():
        return "its futures were cancelled"
    return text or type(e).__name__


# Points per Dask task at most: the scheduler's cost per task is larger than a pool's.
DASK_MAX_CHUNK = 256


def _runs(pending, by_future) -> int:
    """The runs (points) in the pending futures' chunks."""
    return sum(len(by_future[f]) for f in pending)


def _run_dask(address: str, tasks: Sequence[Task], finished, lost_after_s: float = 10.0) -> None:
    """Run the tasks on the cluster at ``address``; the client's own log lines (reconnect
    attempts) are muted while it runs, since a lost cluster ends in one error here."""
    import logging

    _import_distributed()
    names = ["distributed"] + [n for n in list(logging.root.manager.loggerDict) if n.startswith("distributed.")]
    levels = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.CRITICAL + 1)
    try:
        _run_dask_quiet(address, tasks, finished, lost_after_s)
    finally:
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)


def _run_dask_quiet(address: str, tasks: Sequence[Task], finished, lost_after_s: float) -> None:
    distributed = _import_distributed()
    try:
        client = distributed.Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError, TypeError) as e:
        raise DaskClusterError(f"--dask {address}: cannot reach the Dask scheduler ({e}); expected an address such as tcp://host:8786") from None
    with client:
        try:
            threads = sum(client.nthreads().values()) or 2  # no worker yet: sized for two
        except Exception:  # noqa: BLE001 - sized for two workers then
            threads = 2
        parts = chunks(tasks, threads, DASK_MAX_CHUNK)
        futures = client.map(run_chunk, parts, pure=False)
        by_future = dict(zip(futures, parts))
        pending = set(futures)
        no_worker_since = None
        try:
            while pending:
                try:
                    done, pending = distributed.wait(pending, timeout=0.5, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    done = set()
                except Exception as e:  # noqa: BLE001 - the scheduler went away
                    if type(e).__name__ != "TimeoutError":
                        raise DaskClusterError(
                            f"--dask {address}: lost the connection to the Dask scheduler ({_reason(e)}); "
                            f"{_runs(pending, by_future)} of {len(tasks)} runs not done"
                        ) from None
                    done = set()
                for fut in done:
                    _finish_chunk(by_future[fut], fut, finished)
                if done or not pending:
                    continue
                try:
                    workers = len(client.nthreads())
                except Exception as e:  # noqa: BLE001
                    raise DaskClusterError(
                        f"--dask {address}: lost the connection to the Dask scheduler ({_reason(e)}); {_runs(pending, by_future)} of {len(tasks)} runs not done"
                    ) from None
                if workers:
                    no_worker_since = None
                elif no_worker_since is None:
                    no_worker_since = time.monotonic()
                elif time.monotonic() - no_worker_since > lost_after_s:
                    raise DaskClusterError(
                        f"--dask {address}: no Dask worker left for {lost_after_s:g} s; {_runs(pending, by_future)} of {len(tasks)} runs not done "
                        "(finished rows are kept in the checkpoint when the sweep writes -o OUT; start workers and run it again to resume)"
                    )
        finally:
            if pending:
                client.cancel(list(pending))


def _sibling(path: Path, table: str) -> Path:
    return path.with_name(f"{path.stem}.{table}{path.suffix}")


def write_table(df, path: str | Path, scenario: Scenario | None = None, *, variants: Mapping[str, tuple] | None = None, long_tables: bool = True) -> None:
    """Parquet or CSV, chosen by the suffix; written all at once. The long tables of the
    sweep's full results (:func:`per_class`, :func:`per_ring`, :func:`time_series`) go next
    to it as ``OUT.per_class.parquet`` etc. (when the results are held and the table is not
    empty). Parquet metadata (``pktsim_*`` keys) records the scenario as written, the
    resolved scenario (every default filled in, JSON), the ``--set`` overrides, the
    variants, the seed, the client's pktsim version and the versions of the processes that
    ran the rows (``pktsim_worker_versions``, JSON list); ``pktsim_table`` says which table
    a file holds (``sweep``, ``per_class``, ``per_ring`` or ``time_series``)."""
    import io

    from .textio import atomic_write

    path = Path(path)
    flat = df.copy()
    flat.attrs = {}
    extra = {}
    if long_tables and df.attrs.get("sweep_id") in _STORE:
        for name, fn in LONG_TABLES.items():
            t = fn(df)
            if len(t):
                extra[name] = t
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        meta = {b"pktsim_version": _core.VERSION.encode()}
        if "pktsim_version" in df:
            meta[b"pktsim_worker_versions"] = json.dumps(sorted(map(str, df["pktsim_version"].dropna().unique()))).encode()
        if scenario is not None:
            meta[b"pktsim_scenario"] = scenario.text.encode()
            meta[b"pktsim_scenario_origin"] = scenario.origin.encode()
            meta[b"pktsim_scenario_resolved"] = json.dumps(scenario.data).encode()
            meta[b"pktsim_sets"] = json.dumps([f"{k}={v}" for k, v in scenario.sets]).encode()
            meta[b"pktsim_seed"] = str(scenario.seed).encode()
        if variants:
            meta[b"pktsim_variants"] = json.dumps({k: [f"{a}={b}" for a, b in v] for k, v in variants.items()}).encode()
        for kind, target, frame in [("sweep", path, flat), *((n, _sibling(path, n), t) for n, t in extra.items())]:
            table = pa.Table.from_pandas(frame, preserve_index=False)
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta, b"pktsim_table": kind.encode()})
            buf = io.BytesIO()
            pq.write_table(table, buf)
            atomic_write(target, buf.getvalue())
    elif path.suffix == ".csv":
        atomic_write(path, flat.to_csv(index=False))
        for n, t in extra.items():
            atomic_write(_sibling(path, n), t.to_csv(index=False))
    else:
        raise ValueError(f"{path}: expected a .parquet or .csv output file")


def read_table(path: str | Path):
    import pandas as pd

    path = Path(path)
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def summarize(df, keys: Sequence[str] | None = None, metrics: Sequence[str] | None = None):
    """Mean and 95% confidence half-width (Student's t over replications) of each metric
    per point: the point's columns (``keys``, default the swept keys and ``variant``, also
    for a table read back from a file; with their ``KEY_value`` columns), ``n`` (replications that succeeded), then
    ``<metric>_mean`` and ``<metric>_ci95`` in the metric's own unit (``latency_ns_p99`` in
    ns, ``throughput_pps`` in pps, ...; see :func:`sweep`). ``ci95`` is NaN when n = 1.
    Metrics default to every numeric column but the seed, replication, wall time and events.
    One vectorised group-by: linear in the rows."""
    import numpy as np
    import pandas as pd

    if keys is None:
        keys = df.attrs.get("params")
    if keys is None:  # a table read back from a file: its scenario keys ("a.b") and variant
        keys = (["variant"] if "variant" in df.columns else []) + [c for c in df.columns if "." in c and not c.endswith("_value")]
    keys = list(keys)
    # A key's numeric twin is not a key of its own (callers that take every "a.b" column).
    keys = [k for k in keys if not (k.endswith("_value") and k[: -len("_value")] in keys)]
    ok = df[df["status"] == "ok"] if "status" in df else df
    value_cols = [f"{k}_value" for k in keys if f"{k}_value" in ok.columns]
    if metrics is None:
        skip = set(keys) | set(value_cols) | {"replication", "seed", "wall_s", "events"}
        metrics = [c for c in ok.columns if c not in skip and pd.api.types.is_numeric_dtype(ok[c])]
    metrics = list(metrics)
    data = ok[keys + value_cols].copy()
    for m in metrics:
        data[m] = pd.to_numeric(ok[m], errors="coerce").astype(float)
    if not keys:
        data["_all"] = 0
    g = data.groupby(keys or ["_all"], sort=False, dropna=False)
    n = g.size()
    mean = g[metrics].mean()
    std = g[metrics].std(ddof=1)
    t = np.array([_core.student_t95(int(k) - 1) if k > 1 else np.nan for k in n.to_numpy()])
    half = std.mul(t / np.sqrt(n.to_numpy()), axis=0)
    cols = {}
    if value_cols:
        first = g[value_cols].first()
        cols.update({c: first[c] for c in value_cols})
    cols["n"] = n
    for m in metrics:
        cols[f"{m}_mean"] = mean[m]
        cols[f"{m}_ci95"] = half[m]
    out = pd.DataFrame(cols).reset_index()
    if not keys:
        out = out.drop(columns=["_all"])
    else:
        order = []
        for k in keys:
            order.append(k)
            if f"{k}_value" in out.columns:
                order.append(f"{k}_value")
        out = out[order + [c for c in out.columns if c not in order]]
    out.attrs["params"] = keys
    return out


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
