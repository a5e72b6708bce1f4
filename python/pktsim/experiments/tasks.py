"""A sweep's runs: the grid's tasks (a point, a replication, what the core needs to run it),
named variants, the files that travel with each task, and one task's run
as a row (:func:`run_task`, which never raises)."""

from __future__ import annotations

import atexit
import hashlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _core, sim
from ..errors import ScenarioError
from ..parse import _check_profile_file, parsed
from ..scenario import Scenario
from ..values import expand_values, flatten, numeric_value

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
    files: tuple = ()  # ((relative path, bytes), ...): the files the scenario names (profiles, pcaps, chain nodes)
    saved: bool = False  # the sweep keeps a checkpoint: the row brings its result's JSON text
    allow_large: bool = False  # a run of more than pktsim._core.MAX_FRAMES frames is run
    files_id: str = ""  # a hash of ``files`` (their names and contents), made once per grid

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


def files_id(base_dir: str, files: tuple) -> str:
    """A hash of a task's files, their names and contents (and the directory they are for)."""
    h = hashlib.sha256(base_dir.encode())
    for name, data in files:
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()[:16]


def _base_dir(task: Task) -> str:
    """Where the run reads the scenario's relative files: its own directory when they are
    there as sent, else a private directory of this process holding the copies that
    travelled with the task (a Dask worker started elsewhere), removed when the process
    ends. Decided once per process for each set of files."""
    if not task.files:
        return task.base_dir
    digest = task.files_id or files_id(task.base_dir, task.files)
    if digest in _MATERIALISED:
        return _MATERIALISED[digest]
    try:
        if all((Path(task.base_dir) / name).read_bytes() == data for name, data in task.files):
            _MATERIALISED[digest] = task.base_dir
            return task.base_dir
    except OSError:
        pass
    root = Path(tempfile.mkdtemp(prefix="pktsim-files-"))
    atexit.register(shutil.rmtree, root, True)
    depth = max(Path(name).parts.count("..") for name, _ in task.files)
    base = root.joinpath(*(["d"] * depth)) if depth else root
    for name, data in task.files:
        target = base / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
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
            r = sim.run_text(task.text, task.fmt, task.origin, _base_dir(task), task.run_sets, keep_json=True, allow_large=task.allow_large)
        else:
            r = sim.run_text(task.text, task.fmt, task.origin, _base_dir(task), task.run_sets, allow_large=task.allow_large)
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
    from ..parse import _normalise_sets

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


# Files that travel with each task, in all at most this many bytes (a larger pcap is read
# where the task runs, at the path the scenario gives).
MAX_SHIPPED_BYTES = 16 << 20


def _input_files(scenario: Scenario, params: Mapping[str, Any], variants: Mapping[str, tuple] | None) -> tuple:
    """The relative files the scenario, the grid and the variants name (cost profiles,
    pcaps, chain node files and the files those name: :func:`~.checkpoint.input_files`), as
    ((path as written, bytes), ...), to travel with each task; nested paths are written
    against the scenario's directory."""
    from .checkpoint import input_paths

    base = Path(scenario.base_dir)
    files, total = [], 0
    for shown, path in input_paths(scenario, params, variants).items():
        if Path(shown.split(" > ")[-1]).is_absolute():
            continue
        try:
            if total + path.stat().st_size > MAX_SHIPPED_BYTES:
                continue
            rel = os.path.relpath(path, base)
            data = path.read_bytes()
        except (OSError, ValueError):
            continue  # the core says what is wrong with it
        files.append((rel, data))
        total += len(data)
    return tuple(files)


def grid(
    scenario: Scenario, params: Mapping[str, Any], replications: int, variants: Mapping[str, tuple] | None = None, *, allow_large: bool = False
) -> list[Task]:
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
    files = _input_files(scenario, dict(zip(keys, values)), variants)
    fid = files_id(scenario.base_dir, files) if files else ""
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
                    allow_large=allow_large,
                    files_id=fid,
                )
            )
    return tasks
