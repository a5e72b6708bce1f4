"""A sweep's runs: the grid's tasks (a point, a replication, what the core needs to run it),
named variants, the cost-profile files that travel with each task, and one task's run
as a row (:func:`run_task`, which never raises)."""

from __future__ import annotations

import hashlib
import itertools
import json
import tempfile
from collections.abc import Mapping, Sequence
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
