"""Candidates evaluated by the simulator: a :class:`Candidate` (values of the tuned keys)
run at every load of the :class:`Plan`, with its replications, on local processes kept
for the whole tune or on Dask (:class:`Evaluator`), its means and 95% intervals per load
and its mean run result; a candidate that misses a constraint at the highest load by
more than the plan's ``prune_margin`` is not run further (``pruned``)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .. import _core
from ..experiments.tasks import Task, _input_files, files_id
from ..experiments.workers import _run_dask, _spawner, _worker_init, abandon_pool, chunks, run_chunk
from .goals import value
from .knobs import Selection


@dataclass
class Candidate:
    sets: dict  # key -> value text (the keys that matter)
    index: int = -1  # order of evaluation
    origin: str = ""  # "current", "search", "exhaustive", "polish", "alternative"
    per_load: list = field(default_factory=list)  # [{metric: mean}, ...] by load
    ci95: list = field(default_factory=list)  # [{metric: half-width}, ...] by load
    runs: int = 0
    pruned: bool = False
    error: str = ""
    results: list = field(default_factory=list)  # the mean run result at each load (full object)

    def key(self) -> tuple:
        return tuple(sorted(self.sets.items()))


@dataclass
class Plan:
    scenario: object  # pktsim.scenario.Scenario the candidates run on (the tuned keys left out)
    data: dict  # today's scenario, resolved: its values of the tuned keys, the conditions
    selection: Selection
    objectives: list
    constraints: list
    loads: list  # pps (None: the scenario's own rate)
    target: int  # index of the load the objectives are read at (-1: the mean over loads)
    replications: int
    jobs: int | None = None
    dask: str | None = None
    prune_margin: float = 1.0
    progress: Callable[[int, int, str], None] | None = None
    # Where the tuned keys live in the scenario run: "" for a node, "nodes.N." for node N
    # of a chain.
    prefix: str = ""

    @property
    def metrics(self) -> list:
        return list(dict.fromkeys([o.metric for o in self.objectives] + [c.metric for c in self.constraints]))


class Evaluator:
    """Runs candidates' tasks on a pool kept for the whole tune, or on Dask."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.sc = plan.scenario
        self.files = _input_files(self.sc, {}, None)
        self.files_id = files_id(self.sc.base_dir, self.files) if self.files else ""
        self.cache: dict = {}
        self.count = 0
        self._pool = None
        workers = plan.jobs or os.cpu_count() or 1
        self.workers = workers

    def close(self, abort: bool = False) -> None:
        if self._pool is not None and not abort:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._pool is not None:
            abandon_pool(self._pool)
            self._pool = None

    def _tasks(self, cand: Candidate, loads: Sequence[int], reps: Sequence[int]) -> list:
        out = []
        for li in loads:
            load = self.plan.loads[li]
            point = tuple((self.plan.prefix + k, v) for k, v in cand.sets.items()) + ((("traffic.rate", f"{load:.12g}pps"),) if load is not None else ())
            for r in reps:
                out.append(
                    Task(
                        len(out),
                        point,
                        r,
                        self.sc.seed + r,
                        self.sc.text,
                        self.sc.format,
                        self.sc.origin,
                        self.sc.base_dir,
                        self.sc.sets,
                        "",
                        "",
                        (),
                        (),
                        self.files,
                        files_id=self.files_id,
                    )
                )
        return out

    def run_tasks(self, tasks: list) -> list:
        """Rows of the tasks, in order."""
        if not tasks:
            return []
        rows: dict = {}

        def finished(batch):
            for t, row in batch:
                rows[id(t)] = row

        if self.plan.dask is not None:
            _run_dask(self.plan.dask, tasks, finished)
        elif self.workers == 1 or len(tasks) == 1:
            for t in tasks:
                finished([(t, run_chunk([t])[0])])
        else:
            from concurrent.futures import ProcessPoolExecutor, as_completed

            if self._pool is None:
                self._pool = ProcessPoolExecutor(max_workers=self.workers, initializer=_worker_init, initargs=(_spawner(),))
            futures = {self._pool.submit(run_chunk, c): c for c in chunks(tasks, self.workers)}
            for fut in as_completed(futures):
                finished(list(zip(futures[fut], fut.result())))
        return [rows[id(t)] for t in tasks]

    def evaluate(self, cands: list, prune: bool = True) -> None:
        """Evaluate candidates not seen before (in place); cached ones take the cached figures.
        Without ``prune`` every candidate runs at every load."""
        todo, copies = [], []
        for c in cands:
            hit = self.cache.get(c.key())
            if hit is not None:
                copies.append((c, hit))  # filled in once the batch is done (hit may be in it)
                continue
            c.index = self.count
            self.count += 1
            self.cache[c.key()] = c
            todo.append(c)
        self._run(todo, prune)
        for c, hit in copies:
            if c is not hit:
                c.per_load, c.ci95, c.runs, c.pruned, c.error, c.results = hit.per_load, hit.ci95, hit.runs, hit.pruned, hit.error, hit.results
                c.index = hit.index

    def _run(self, todo: list, prune: bool) -> None:
        plan = self.plan
        if not todo:
            return
        n_loads, reps = len(plan.loads), plan.replications
        hardest = max(range(n_loads), key=lambda i: plan.loads[i] or 0.0)
        staged = prune and plan.constraints and (n_loads > 1 or reps > 1)
        first: dict = {}
        if staged:
            # Stage 1: one run at the highest load.
            tasks = {id(c): self._tasks(c, [hardest], [0]) for c in todo}
            rows = self.run_tasks([t for c in todo for t in tasks[id(c)]])
            i = 0
            for c in todo:
                first[id(c)] = rows[i]
                i += 1
                row = first[id(c)]
                if row.get("status") != "ok":
                    c.error = row.get("error", "failed")
                    continue
                worst = max(k.violation(value(row["_full"], k.metric)) for k in plan.constraints)
                if worst > plan.prune_margin:
                    c.pruned = True
        rest = []
        for c in todo:
            if c.error:
                continue
            if c.pruned:
                continue
            for li in range(n_loads):
                for r in range(reps):
                    if staged and li == hardest and r == 0:
                        continue
                    rest.append((c, li, r))
        tasks = []
        for c, li, r in rest:
            t = self._tasks(c, [li], [r])[0]
            tasks.append(t)
        rows = self.run_tasks(tasks)
        got: dict = {}
        for (c, li, r), row in zip(rest, rows):
            got.setdefault(id(c), {})[(li, r)] = row
        for c in todo:
            mine = got.get(id(c), {})
            if staged and id(c) in first:
                mine[(hardest, 0)] = first[id(c)]
            if c.error:
                self._fill(c, {}, only=None)
                continue
            bad = [row for row in mine.values() if row.get("status") != "ok"]
            if bad:
                c.error = bad[0].get("error", "failed")
            self._fill(c, mine, only=hardest if c.pruned else None)

    def _fill(self, c: Candidate, rows: Mapping, only: int | None) -> None:
        """Means and CIs per load from the runs (a pruned candidate: its one run, the other
        loads unknown)."""
        plan = self.plan
        c.per_load, c.ci95, c.results = [], [], []
        c.runs = sum(1 for r in rows.values() if r.get("status") == "ok")
        for li in range(len(plan.loads)):
            runs = [rows[(li, r)]["_full"] for r in range(plan.replications) if (li, r) in rows and rows[(li, r)].get("status") == "ok"]
            if not runs:
                c.per_load.append({m: math.nan for m in plan.metrics})
                c.ci95.append({m: math.nan for m in plan.metrics})
                c.results.append(None)
                continue
            means, halves = {}, {}
            for m in plan.metrics:
                xs = [value(r, m) for r in runs]
                mu = sum(xs) / len(xs)
                means[m] = mu
                if len(xs) > 1 and all(x == x for x in xs):
                    sd = math.sqrt(sum((x - mu) ** 2 for x in xs) / (len(xs) - 1))
                    halves[m] = _core.student_t95(len(xs) - 1) * sd / math.sqrt(len(xs))
                else:
                    halves[m] = math.nan
            c.per_load.append(means)
            c.ci95.append(halves)
            mean = _mean_result(runs)
            # The figures, not the wall time (which differs from run to run).
            c.results.append({k: v for k, v in mean.items() if k != "wall_s"})


def _mean_result(runs: list) -> dict:
    """The run result whose numbers are the means over replications (lists and texts from
    the first run)."""
    if len(runs) == 1:
        return runs[0]

    def merge(objs, key=""):
        first = objs[0]
        if key in ("seed", "name", "ring", "core", "queue"):
            return first
        if isinstance(first, Mapping):
            return {k: merge([o[k] for o in objs if isinstance(o, Mapping) and k in o], k) for k in first}
        if isinstance(first, (int, float)) and not isinstance(first, bool) and all(isinstance(o, (int, float)) and not isinstance(o, bool) for o in objs):
            xs = [float(o) for o in objs]
            return sum(xs) / len(xs) if all(x == x for x in xs) else math.nan
        return first

    return merge(runs)
