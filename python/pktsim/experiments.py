"""Experiments at scale: grids of scenario keys with replications, on local processes or a
Dask cluster, resumable, with one tidy row per (point, replication).

``sweep`` (exported as ``pktsim.sweep``) is the entry point; ``summarize`` (``pktsim.summarize``)
turns the replications of each point into means with 95% confidence intervals. Each point
is validated once when the grid is built, then each run hands the scenario text and the
point's overrides to the core (:func:`pktsim.sim.run_text`), which parses it once more to
run it. This module builds on ``sim`` and ``values``, which never import it.

A point that fails, or whose values the scenario rejects, is kept as a row with
``status = "error"`` and its message; the others go on. Finished rows are appended to
``OUT.partial.jsonl`` as they come, so an interrupted sweep resumes where it stopped; the
table is written all at once at the end. The checkpoint's first line holds a hash of what
the rows depend on (pktsim's version, the resolved scenario with its overrides and cost
profile, the grid): a resume reuses the saved ``ok`` rows only when the hash matches, and
otherwise says so and starts over. Error rows are always run again.

Sweeping ``seed`` runs each point with that seed; replication r of the point runs on
seed + r, as for any other sweep.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from . import _core, sim
from .errors import ScenarioError
from .scenario import Scenario, as_scenario
from .values import expand_values, flatten

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

    @property
    def key(self) -> tuple:
        return (*(v for _, v in self.params), self.replication)

    @property
    def run_sets(self) -> list:
        """The overrides of this run: the base scenario's, the point's, then its seed."""
        return list(self.sets) + [*self.params, ("seed", str(self.seed))]


def run_task(task: Task) -> dict:
    """Run one point; never raises (a failure becomes an error row).

    The point was validated when the grid was built (:func:`grid`); here the core parses
    it once more, to run it, and nothing else does."""
    row = _row_head(task)
    if task.invalid:
        return _failed_row(task, task.invalid)
    try:
        r = sim.run_text(task.text, task.fmt, task.origin, task.base_dir, task.run_sets)
        flat = {k: v for k, v in flatten(r).items() if not k.startswith(RUN_FIELDS_DROPPED)}
        flat.pop("seed", None)
        row.update(flat)
        row["status"] = "ok"
        row["error"] = ""
        row["_full"] = dict(r)
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
    row: dict = {k: v for k, v in task.params}
    row["replication"] = task.replication
    row.setdefault("seed", task.seed)
    return row


def _failed_row(task: Task, message: str) -> dict:
    return {**_row_head(task), "status": "error", "error": message}


def grid(scenario: Scenario, params: Mapping[str, Any], replications: int) -> list[Task]:
    """Tasks for the cartesian product of the parameter values, `replications` each with
    seeds base, base + 1, ... (independent streams: each component's seed is derived from
    the scenario seed). The base is the point's own seed: the scenario's, or the swept
    value when ``seed`` is a parameter.

    Each point is validated here, once, before any runs; a point the scenario rejects
    becomes tasks that yield error rows (with the :class:`~pktsim.errors.ScenarioError`
    message) without running, and the rest of the grid goes on. The replications of a point
    differ only in their seed and are not validated again."""
    keys = list(params)
    values = [expand_values(params[k]) for k in keys]
    tasks = []
    for combo in itertools.product(*values):
        point = tuple(zip(keys, combo))
        invalid = ""
        try:
            base_seed = scenario.with_sets(list(point)).seed
        except ScenarioError as e:
            invalid, base_seed = f"ScenarioError: {e}", scenario.seed
        for r in range(replications):
            tasks.append(Task(len(tasks), point, r, base_seed + r, scenario.text, scenario.format, scenario.origin, scenario.base_dir, scenario.sets, invalid))
    return tasks


def sweep_fingerprint(scenario: Scenario, params: Mapping[str, Sequence[str]]) -> str:
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
    h.update(json.dumps(doc, sort_keys=True, default=str).encode())
    h.update(hashlib.sha256(profile_bytes).digest())
    return h.hexdigest()


def _checkpoint_path(output: Path) -> Path:
    return output.with_name(output.name + ".partial.jsonl")


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
    scenario: "Scenario | str | Mapping[str, Any]",
    param: "str | Mapping[str, Any] | None" = None,
    values: "str | Sequence[Any] | None" = None,
    sets=None,
    progress: "bool | Callable[[int, int, str], None]" = False,
    *,
    replications: int | None = None,
    jobs: int | None = None,
    dask: str | None = None,
    output: "str | None" = None,
    restart: bool = False,
):
    """Run the scenario at every point of a grid: ``sweep(sc, "traffic.rate", "0.1Mpps:2Mpps:0.1Mpps")``
    or ``sweep(sc, {"traffic.rate": [...], "cpu.cores": [1, 2, 4]}, replications=5)``.
    Without ``param`` the grid is the scenario's ``[sweep]`` table, with its replications
    unless ``replications`` is given (what ``pktsim sweep FILE`` runs); with ``param``, it
    is the whole grid and ``replications`` defaults to 1.

    Returns a pandas DataFrame with one row per (point, replication): the swept keys, the
    replication and its seed, then the flattened ``run`` fields (``latency_ns_p99``, ...).
    Points run on local processes (``jobs``, default all cores) or on a Dask cluster
    (``dask="tcp://host:8786"``); with ``output`` the table is written (Parquet or CSV) and an
    interrupted sweep resumes (unless ``restart``, or the checkpoint belongs to another
    sweep). ``df.attrs["results"]`` holds the full results."""
    if isinstance(param, Mapping):
        params = dict(param)
    elif param is not None:
        params = {param: values}
    else:
        scenario = as_scenario(scenario, sets)
        sets = None
        params, planned = sweep_plan(scenario)
        replications = planned if replications is None else replications
    return run_grid(scenario, params, 1 if replications is None else replications, sets=sets, jobs=jobs, dask=dask, output=output, progress=progress, restart=restart)


def sweep_plan(scenario: Scenario, params: Mapping[str, Any] | None = None, replications: int | None = None) -> tuple[dict, int]:
    """The grid and replications a sweep of ``scenario`` runs: the keys of its ``[sweep]``
    table (``[sweep.params]``), then ``params`` (a key given in both takes the value given
    here); ``replications`` if given (and not 0), else the table's, else 1. The values are
    as written; :func:`pktsim.expand_values` expands them."""
    spec = scenario.data.get("sweep") or {}
    grid_params = {**dict(spec.get("params", {})), **dict(params or {})}
    return grid_params, replications or int(spec.get("replications", 1))


def run_grid(
    scenario: "Scenario | str | Mapping[str, Any]",
    params: Mapping[str, Any],
    replications: int = 1,
    *,
    sets=None,
    jobs: int | None = None,
    dask: str | None = None,
    output: str | Path | None = None,
    progress: "bool | Callable[[int, int, str], None]" = False,
    restart: bool = False,
    notify: Callable[[str], None] | None = _say,
):
    """Run a sweep; returns a pandas DataFrame (one row per point and replication) whose
    ``attrs["results"]`` holds the full result of each successful run.

    With ``output``, saved rows of an interrupted run of the same sweep are reused (see the
    module's notes); ``restart`` discards them. ``notify`` receives the one-line notice
    when a checkpoint is not reused (default: printed on stderr)."""
    import pandas as pd

    sc = as_scenario(scenario, sets)
    if not params:
        raise ValueError("a sweep needs at least one parameter (--param KEY --values ...)")
    if replications < 1:
        raise ValueError(f"replications = {replications}: expected at least 1")
    expanded = {}
    for key, vals in params.items():
        expanded[key] = expand_values(vals)
        if not expanded[key]:
            raise ValueError(f"{key}: no values to sweep")
        seen = set()
        for v in expanded[key]:
            if v in seen:
                raise ValueError(f"{key}: value {v!r} is given twice (each point of a sweep is run once per replication)")
            seen.add(v)
    params = expanded
    out = check_output(output) if output else None
    tasks = grid(sc, params, replications)
    checkpoint = _checkpoint_path(out) if out else None
    done: dict = {}
    if checkpoint:
        fingerprint = sweep_fingerprint(sc, params)
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
    report = _progress_printer() if progress is True else (progress or None)
    rows: dict = {tuple(k): v for k, v in done.items()}

    def finished(task: Task, row: dict) -> None:
        row["_key"] = list(task.key)
        rows[tuple(row["_key"])] = row
        if checkpoint:
            with checkpoint.open("a") as f:
                f.write(json.dumps(row) + "\n")
        if report:
            report(len(rows), len(tasks), ", ".join(f"{k}={v}" for k, v in task.params))

    if report and done:
        report(len(rows), len(tasks), f"resuming: {len(done)} points already done")
    if dask:
        _run_dask(dask, todo, finished)
    elif (jobs or os.cpu_count() or 1) == 1 or len(todo) <= 1:
        for t in todo:
            finished(t, run_task(t))
    else:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=min(jobs or os.cpu_count() or 1, len(todo))) as ex:
            futures = {ex.submit(run_task, t): t for t in todo}
            for fut in as_completed(futures):
                t = futures[fut]
                try:
                    row = fut.result()
                except Exception as e:  # a worker died
                    row = _failed_row(t, f"{type(e).__name__}: {e}")
                finished(t, row)

    ordered = [rows[t.key] for t in tasks]
    results = [r.pop("_full") for r in ordered if "_full" in r]
    for r in ordered:
        r.pop("_key", None)
        r.pop("_full", None)
    df = pd.DataFrame(ordered)
    df["pktsim_version"] = _core.VERSION
    df["scenario"] = sc.origin
    df.attrs["results"] = results
    df.attrs["tasks_run"] = len(todo)
    df.attrs["params"] = list(params)
    if out:
        write_table(df, out, sc)
        if checkpoint and checkpoint.exists():
            checkpoint.unlink()
    return df


def _run_dask(address: str, tasks: Sequence[Task], finished) -> None:
    from distributed import Client, as_completed as dask_completed

    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError, TypeError) as e:
        raise ValueError(f"--dask {address}: cannot reach the Dask scheduler ({e}); expected an address such as tcp://host:8786") from None
    with client:
        futures = client.map(run_task, tasks, pure=False)
        by_future = dict(zip(futures, tasks))
        for fut in dask_completed(futures):
            t = by_future[fut]
            try:
                row = fut.result()
            except Exception as e:  # the worker was lost
                row = _failed_row(t, f"{type(e).__name__}: {e}")
            finished(t, row)


def write_table(df, path: str | Path, scenario: Scenario | None = None) -> None:
    """Parquet (with the scenario text, seed and pktsim version in its metadata) or CSV,
    chosen by the suffix; written all at once."""
    import io

    from .textio import atomic_write

    path = Path(path)
    flat = df.copy()
    flat.attrs = {}
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(flat, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[b"pktsim_version"] = _core.VERSION.encode()
        if scenario is not None:
            meta[b"pktsim_scenario"] = scenario.text.encode()
            meta[b"pktsim_scenario_origin"] = scenario.origin.encode()
            meta[b"pktsim_seed"] = str(scenario.seed).encode()
        table = table.replace_schema_metadata(meta)
        buf = io.BytesIO()
        pq.write_table(table, buf)
        atomic_write(path, buf.getvalue())
    elif path.suffix == ".csv":
        atomic_write(path, flat.to_csv(index=False))
    else:
        raise ValueError(f"{path}: expected a .parquet or .csv output file")


def read_table(path: str | Path):
    import pandas as pd

    path = Path(path)
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def summarize(df, keys: Sequence[str] | None = None, metrics: Sequence[str] | None = None):
    """Mean and 95% confidence half-width (Student's t over replications) of each metric
    per point: columns ``<metric>_mean``, ``<metric>_ci95`` and ``n``."""
    import pandas as pd

    keys = list(keys if keys is not None else df.attrs.get("params", []))
    ok = df[df["status"] == "ok"] if "status" in df else df
    if metrics is None:
        skip = set(keys) | {"replication", "seed", "wall_s", "events"}
        metrics = [c for c in ok.columns if c not in skip and pd.api.types.is_numeric_dtype(ok[c])]
    out = []
    for point, g in ok.groupby(keys, sort=False) if keys else [((), ok)]:
        row = dict(zip(keys, point if isinstance(point, tuple) else (point,)))
        n = len(g)
        row["n"] = n
        for m in metrics:
            vals = g[m].astype(float)
            row[f"{m}_mean"] = vals.mean()
            row[f"{m}_ci95"] = _core.student_t95(n - 1) * vals.std(ddof=1) / n**0.5 if n > 1 else float("nan")
        out.append(row)
    return pd.DataFrame(out)


def _progress_printer():
    stream = sys.stderr
    if not stream.isatty():
        return None

    def show(i: int, n: int, label: str) -> None:
        width = 30
        filled = int(width * i / max(n, 1))
        end = "\n" if i >= n else ""
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {i}/{n} {label[:60]:<60}{end}")
        stream.flush()

    return show
