"""Running a fit's simulations: every measured row at a set of values of the free keys, in
one batch on local processes or a Dask cluster (the sweep's workers), and the least-squares
problem scipy solves over them.

The residual of a measured value is its relative error, ``(pktsim - measured) /
measured`` (a measured 0 is scaled by its column's largest value), so that CPU per frame
in ns and interrupts per second weigh alike. The Jacobian is taken by forward
differences of ``REL_STEP`` of each free value, all of a step's runs in one batch; every
run has the scenario's seed (common random numbers), so a difference is the cost's effect
and not the sampling's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from ..experiments.tasks import Task, _input_files, files_id, run_task
from ..experiments.workers import _run_dask, _run_processes
from ..scenario import Scenario
from .data import DataError, Measured
from .free import Free

# A forward difference's step, as a share of the free value (or of its typical size).
REL_STEP = 0.05


class Runner:
    """Runs the measured rows of ``m`` at values of ``free`` (one run per row), caching
    what it ran; counts the runs."""

    def __init__(self, sc: Scenario, m: Measured, free: Sequence[Free], jobs: int | None, dask: str | None, progress: Callable[[str], None] | None):
        self.sc, self.m, self.free = sc, m, list(free)
        self.jobs, self.dask, self.progress = jobs, dask, progress
        self.files = _input_files(sc, {}, None)
        self.fid = files_id(sc.base_dir, self.files) if self.files else ""
        self.cache: dict = {}
        self.runs = 0

    def sets(self, i: int, theta: Sequence[float]) -> tuple:
        return (*self.m.x[i], *((f.key, f.text(v)) for f, v in zip(self.free, theta)))

    def results(self, points: Sequence[tuple[int, Sequence[float]]]) -> list[dict]:
        """The full result of row ``i`` at ``theta`` for each ``(i, theta)``; a run that
        fails raises DataError naming the row."""
        keys = [self.sets(i, th) for i, th in points]
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        if todo:
            tasks = [
                Task(n, k, 0, self.sc.seed, self.sc.text, self.sc.format, self.sc.origin, self.sc.base_dir, self.sc.sets, files=self.files, files_id=self.fid)
                for n, k in enumerate(todo)
            ]
            got: dict = {}

            def finished(batch):
                for t, row in batch:
                    got[t.params] = row

            if self.dask is not None:
                _run_dask(self.dask, tasks, finished)
            elif (self.jobs or os.cpu_count() or 1) == 1 or len(tasks) == 1:
                for t in tasks:
                    finished([(t, run_task(t))])
            else:
                _run_processes(min(self.jobs or os.cpu_count() or 1, len(tasks)), tasks, finished)
            self.runs += len(tasks)
            for k in todo:
                row = got[k]
                if row.get("status") != "ok":
                    rows = [i for (i, _), kk in zip(points, keys) if kk == k]
                    at = ", ".join(f"{key}={v}" for key, v in k[len(self.m.x_keys) :])
                    raise DataError(f"{self.m.source}, row {rows[0] + 1} ({self.m.describe(rows[0])}) at {at}: the run failed: {row.get('error')}")
                self.cache[k] = row["_full"]
        return [self.cache[k] for k in keys]

    def predict(self, rows: Sequence[int], theta: Sequence[float]) -> np.ndarray:
        """pktsim's value of each metric (rows x metrics; NaN where it has none)."""
        res = self.results([(i, theta) for i in rows])
        out = np.full((len(rows), len(self.m.metrics)), np.nan)
        for a, r in enumerate(res):
            for b, metric in enumerate(self.m.metrics):
                v = metric.value(r)
                if v is not None:
                    out[a, b] = v
        return out


def scales(m: Measured) -> np.ndarray:
    """Each measured value's scale: itself, or its column's largest (a measured 0)."""
    y = np.array([[np.nan if v is None else v for v in row] for row in m.y], dtype=float)
    col = np.nanmax(np.abs(y), axis=0)
    col[~(col > 0)] = 1.0
    s = np.abs(y)
    return np.where(s > 0, s, col)


class Problem:
    """The least-squares problem over the fit rows: residuals and their Jacobian."""

    def __init__(self, runner: Runner, rows: Sequence[int]):
        self.runner, self.rows = runner, list(rows)
        m = runner.m
        self.y = np.array([[np.nan if v is None else v for v in m.y[i]] for i in self.rows], dtype=float)
        self.scale = scales(m)[self.rows]
        self.mask = ~np.isnan(self.y)
        self.jac_at: np.ndarray | None = None
        self.said: list = []  # the values a step was reported at

    @property
    def size(self) -> int:
        return int(self.mask.sum())

    def residuals_of(self, pred: np.ndarray) -> np.ndarray:
        r = (pred - self.y) / self.scale
        r = r[self.mask]
        # A metric pktsim has no value for (no frame handled): as far off as it can be.
        return np.where(np.isnan(r), 1.0, r)

    def residuals(self, theta: np.ndarray) -> np.ndarray:
        r = self.residuals_of(self.runner.predict(self.rows, theta))
        say = self.runner.progress
        if say and not any(np.array_equal(theta, t) for t in self.said):
            self.said.append(np.array(theta))
            at = ", ".join(f"{f.key}={f.text(v)}" for f, v in zip(self.runner.free, theta))
            say(f"step {len(self.said)}: {at}: rms relative error {100 * np.sqrt(np.mean(r**2)):.2f}% ({self.runner.runs} simulations)")
        return r

    def steps(self, theta: np.ndarray) -> list[float]:
        out = []
        for f, v in zip(self.runner.free, theta):
            h = REL_STEP * max(abs(v), f.typical)
            out.append(h if v + h <= f.hi else -h)
        return out

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        """Forward differences, every step's runs in one batch."""
        hs = self.steps(theta)
        thetas = [theta]
        for k, h in enumerate(hs):
            t = np.array(theta, dtype=float)
            t[k] += h
            thetas.append(t)
        self.runner.results([(i, t) for t in thetas for i in self.rows])
        res = [self.residuals_of(self.runner.predict(self.rows, t)) for t in thetas]
        cols = [(r - res[0]) / h for r, h in zip(res[1:], hs)]
        self.jac_at = np.column_stack(cols) if cols else np.zeros((len(res[0]), 0))
        return self.jac_at


def solve(problem: Problem, max_runs: int) -> dict:
    """scipy's bounded least squares (trust-region reflective) from the free keys' starts;
    then each value's 95% interval from the Jacobian at the solution
    (``s^2 (J^T J)^-1``, Student's t on the residual degrees of freedom)."""
    from scipy import optimize, stats

    free = problem.runner.free
    x0 = np.array([f.start for f in free], dtype=float)
    lo = np.array([f.lo for f in free])
    hi = np.array([f.hi for f in free])
    # trf keeps its iterates strictly inside the bounds: a start on one moves off it.
    x0 = np.clip(x0, lo, hi)
    per_step = (len(free) + 1) * len(problem.rows)
    res = optimize.least_squares(
        problem.residuals,
        x0,
        jac=problem.jacobian,
        bounds=(lo, hi),
        x_scale=np.array([f.typical for f in free]),
        max_nfev=max(3, max_runs // max(1, per_step)),
        xtol=1e-4,
        ftol=1e-6,
        gtol=1e-8,
    )
    theta = res.x
    J = problem.jacobian(theta)
    r = problem.residuals(theta)
    dof = problem.size - len(free)
    half = [None] * len(free)
    identifiable = [bool(np.any(np.abs(J[:, k]) > 1e-12)) for k in range(len(free))]
    if dof > 0:
        s2 = float(r @ r) / dof
        cov = s2 * np.linalg.pinv(J.T @ J)
        t = float(stats.t.ppf(0.975, dof))
        half = [float(t * np.sqrt(max(cov[k, k], 0.0))) if identifiable[k] else None for k in range(len(free))]
    at_bound = [bool(np.isclose(v, f.lo, rtol=1e-6, atol=1e-9) or np.isclose(v, f.hi, rtol=1e-6, atol=1e-9)) for v, f in zip(theta, free)]
    return {
        "theta": theta,
        "ci95": half,
        "identifiable": identifiable,
        "at_bound": at_bound,
        "dof": dof,
        "rms_rel_error": float(np.sqrt(np.mean(r**2))) if len(r) else 0.0,
        "status": int(res.status),
        "message": str(res.message),
        "iterations": int(res.nfev),
    }
