"""Candidates evaluated by the simulator: a :class:`Candidate` (values of the tuned keys)
run at every load of the :class:`Plan`, with its replications, on local processes kept
for the whole tune or on Dask (:class:`Evaluator`), its means and 95% intervals per load
and its mean run result. A candidate first runs once at the highest load: one that misses
a constraint there by more than the plan's ``prune_margin`` is not run further
(``pruned``), nor one the race stops (``raced``: the search's rule, given that one run)."""

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
    raced: str = ""  # why the race stopped it after its first run ("" if it was not)
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
        # The race: given a candidate and the full result of its first run (at the highest
        # load), why it is not worth its other runs, or "" (set by the search).
        self.race: Callable[[Candidate, dict], str] | None = None
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
            from concurrent.futures import as_completed

            self._ensure_pool()
            futures = {self._pool.submit(run_chunk, c): c for c in chunks(tasks, self.workers)}
            for fut in as_completed(futures):
                finished(list(zip(futures[fut], fut.result())))
        return [rows[id(t)] for t in tasks]

    def evaluate(self, cands: list, prune: bool = True) -> None:
        """Evaluate candidates not seen before (in place); cached ones take the cached figures.
        Without ``prune`` every candidate runs at every load."""
        self.submit(cands, prune, background=False).wait()

    def submit(self, cands: list, prune: bool = True, background: bool = True) -> Pending:
        """:meth:`evaluate`, started: the candidates' indices are given now (so what is
        asked next is decided the same way however long the runs take) and, with
        ``background`` and more than one local process or Dask, their runs go on in a thread
        while the caller goes on (the sampler proposes the next batch); ``wait()`` finishes."""
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
        pending = Pending(copies)
        if background and todo and (self.workers > 1 or self.plan.dask is not None):
            import threading

            if self.plan.dask is None:
                self._ensure_pool()

            def work():
                try:
                    self._run(todo, prune)
                except BaseException as e:  # given to the caller by wait()
                    pending.failed = e

            pending.thread = threading.Thread(target=work, name="pktsim-tune-runs", daemon=True)
            pending.thread.start()
        else:
            self._run(todo, prune)
        return pending

    def _ensure_pool(self) -> None:
        """The pool, its processes started by this (the main) thread: a worker dies with the
        thread that forked it (``PR_SET_PDEATHSIG``), and a thread that runs one batch ends."""
        if self._pool is None:
            from concurrent.futures import ProcessPoolExecutor, wait

            self._pool = ProcessPoolExecutor(max_workers=self.workers, initializer=_worker_init, initargs=(_spawner(),))
            wait([self._pool.submit(os.getpid) for _ in range(self.workers)])

    def _run(self, todo: list, prune: bool) -> None:
        plan = self.plan
        if not todo:
            return
        n_loads, reps = len(plan.loads), plan.replications
        hardest = max(range(n_loads), key=lambda i: plan.loads[i] or 0.0)
        staged = prune and (plan.constraints or self.race is not None) and (n_loads > 1 or reps > 1)
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
                worst = max((k.violation(value(row["_full"], k.metric)) for k in plan.constraints), default=-math.inf)
                if worst > plan.prune_margin:
                    c.pruned = True
                elif self.race is not None:
                    c.raced = self.race(c, row["_full"])
        rest = []
        for c in todo:
            if c.error:
                continue
            if c.pruned or c.raced:
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
            self._fill(c, mine, only=hardest if c.pruned or c.raced else None)

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


class Pending:
    """Candidates submitted to an :class:`Evaluator`; ``wait()`` returns once their figures
    are in (and raises what their runs raised)."""

    def __init__(self, copies: list):
        self.copies = copies
        self.thread = None
        self.failed: BaseException | None = None

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()
        if self.failed is not None:
            raise self.failed
        for c, hit in self.copies:
            if c is not hit:
                for name in ("per_load", "ci95", "runs", "pruned", "raced", "error", "results", "index"):
                    setattr(c, name, getattr(hit, name))


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
