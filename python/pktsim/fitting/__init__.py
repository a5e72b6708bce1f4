"""``pktsim fit``: the values of a scenario's costs (or any continuous keys) that make the
simulator reproduce what was measured.

>>> import pktsim
>>> f = pktsim.fit("examples/linux-router-64B.toml", "measured.csv", ["host.t_irq", "host.t_poll"])  # doctest: +SKIP
>>> f.values, f.ci95  # doctest: +SKIP

The measurements (:mod:`.data`) are rows of scenario keys (the configuration measured:
a load, an ``rx-usecs``) and results (CPU per frame, a latency percentile, interrupts per
second). The free keys (:mod:`.free`) move within their ranges; scipy's bounded least
squares (:mod:`.engine`) finds the values whose simulations come nearest the measured
results on the *fit rows*, and every other row is then a prediction. The result's rows
follow the ``reproduce`` contract: ``fitted`` on the rows the values were fitted on,
``predicted`` on the rest, with their errors.

Fit on fewer rows than you judge on: by default half the rows (evenly spread over the
file's order, the first and last among them) are fitted and the other half predicted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..scenario import Scenario, as_scenario
from .data import METRICS, DataError, Measured, read
from .engine import Problem, Runner, solve
from .free import Free, parse

__all__ = ["fit", "Fit", "DataError", "METRICS", "fit_rows"]

# Runs of the simulator a fit may make, unless told otherwise.
MAX_RUNS = 2000
DEFAULT_FIT_FRACTION = 0.5


@dataclass
class Fit:
    """A fit's outcome: the fitted values (``values``: key -> ``--set`` text), their 95%
    intervals, every measured value against pktsim's (``rows``), and the scenario with
    the values set (``scenario``)."""

    values: dict[str, str]
    free: list[dict]
    rows: list[dict]
    summary: dict
    scenario: Scenario
    fit_rows: list[int]
    runs: int
    status: dict = field(default_factory=dict)

    @property
    def ci95(self) -> dict[str, str | None]:
        """Each value's 95% half-width as text (None where the data cannot give one)."""
        return {f["key"]: f["ci95_text"] for f in self.free}

    def to_dict(self) -> dict:
        return {
            "values": self.values,
            "free": self.free,
            "rows": self.rows,
            "summary": self.summary,
            "fit_rows": [i + 1 for i in self.fit_rows],
            "runs": self.runs,
            "status": self.status,
        }


def fit_rows(n: int, n_free: int, per_row: Sequence[int], fit_on: Sequence[int] | None = None, fit_fraction: float | None = None) -> list[int]:
    """The rows (0-based) the values are fitted on: ``fit_on`` (1-based, as the file
    counts its rows), else ``fit_fraction`` of them (default a half) evenly spread over the
    file's order, first and last included, but never fewer than the free keys need
    (``per_row``: the measured values each row has)."""
    if fit_on is not None:
        chosen = sorted(set(fit_on))
        bad = [i for i in chosen if not 1 <= i <= n]
        if bad:
            raise DataError(f"--fit-on {bad[0]}: no such row; expected row numbers from 1 to {n}")
        rows = [i - 1 for i in chosen]
    else:
        frac = DEFAULT_FIT_FRACTION if fit_fraction is None else fit_fraction
        if not (isinstance(frac, (int, float)) and 0 < frac <= 1):
            raise DataError(f"--fit-fraction {fit_fraction}: expected a share of the rows above 0 and at most 1")
        k = max(1, math.ceil(frac * n))
        # Enough measured values for the free keys (rows in the order they would be taken).
        while k < n and sum(per_row[i] for i in _spread(n, k)) < n_free:
            k += 1
        rows = _spread(n, k)
    if sum(per_row[i] for i in rows) < n_free:
        raise DataError(f"the fit rows hold {sum(per_row[i] for i in rows)} measured values for {n_free} free keys; expected at least one value per free key")
    return rows


def _spread(n: int, k: int) -> list[int]:
    if k >= n:
        return list(range(n))
    if k == 1:
        return [0]
    return sorted({round(j * (n - 1) / (k - 1)) for j in range(k)})


def _display(metric) -> tuple[float, str]:
    """A metric's factor and unit as a row shows it: times in us, shares in %."""
    if metric.unit == "ns":
        return 1e-3, "us"
    if metric.kind == "percent":
        return 100.0, "%"
    return 1.0, metric.unit


def fit(
    scenario: Scenario | str | Any,
    data: Any,
    free: Sequence[str] | str,
    *,
    x: Sequence[str] | None = None,
    y: Sequence[str] | None = None,
    fit_on: Sequence[int] | None = None,
    fit_fraction: float | None = None,
    sets=None,
    jobs: int | None = None,
    dask: str | None = None,
    max_runs: int = MAX_RUNS,
    progress: Callable[[str], None] | None = None,
) -> Fit:
    """Fit the ``free`` keys of ``scenario`` (``"host.t_irq,host.t_poll=0ns:2us"`` or a
    list) to the measurements in ``data`` (a CSV path, a DataFrame or a list of dicts; see
    :mod:`pktsim.fitting.data`). ``x`` and ``y`` narrow the columns taken as configuration
    and as results; ``fit_on`` (row numbers from 1) or ``fit_fraction`` choose the fit
    rows. Runs go to local processes (``jobs``) or a Dask cluster (``dask``); at most
    ``max_runs`` simulations. Raises :class:`DataError` (a ``ValueError``) naming the file,
    row, column or key for bad input; Ctrl-C stops it (KeyboardInterrupt) with nothing
    written."""
    sc = as_scenario(scenario, sets)
    specs = [s for s in (free.split(",") if isinstance(free, str) else free) if str(s).strip()]
    if not specs:
        raise DataError("--free: no key to fit; expected e.g. --free host.t_irq,host.t_poll")
    m: Measured = read(data, x, y)
    keys = [str(s).partition("=")[0].strip() for s in specs]
    clash = [k for k in keys if k in m.x_keys]
    if clash:
        raise DataError(f"--free {clash[0]}: it is a column of {m.source} (a measured configuration); a key is either measured or fitted")
    if len(set(keys)) != len(keys):
        raise DataError(f"--free {next(k for k in keys if keys.count(k) > 1)}: given twice; expected each key once")
    frees: list[Free] = [parse(str(s), sc.data) for s in specs]
    if not isinstance(max_runs, int) or max_runs < 1:
        raise DataError(f"max_runs = {max_runs!r}: expected a whole number of simulations of at least 1")
    per_row = [sum(v is not None for v in row) for row in m.y]
    rows = fit_rows(len(m), len(frees), per_row, fit_on, fit_fraction)
    runner = Runner(sc, m, frees, jobs, dask, progress)
    problem = Problem(runner, rows)
    if progress:
        progress(f"fitting {', '.join(keys)} on {len(rows)} of {len(m)} rows ({problem.size} measured values)")
    out = solve(problem, max_runs)
    theta = out["theta"]
    values = {f.key: f.text(v) for f, v in zip(frees, theta)}
    pred = runner.predict(range(len(m)), theta)
    result_rows = _rows(m, pred, set(rows))
    from ..reproduce.rows import summary

    free_out = []
    for k, f in enumerate(frees):
        half = out["ci95"][k]
        free_out.append(
            {
                "key": f.key,
                "unit": f.unit,
                "start": f.start,
                "value": float(theta[k]),
                "text": values[f.key],
                "ci95": half,
                "ci95_text": None if half is None else f.text(half, 2),
                "lo": f.lo,
                "hi": f.hi if math.isfinite(f.hi) else None,
                "at_bound": out["at_bound"][k],
                "identifiable": out["identifiable"][k],
                "kind": "fitted",
            }
        )
    status = {k: out[k] for k in ("status", "message", "iterations", "dof", "rms_rel_error")}
    return Fit(values, free_out, result_rows, summary(result_rows), sc.with_sets(list(values.items())), rows, runner.runs, status)


def _rows(m: Measured, pred, fitted: set) -> list[dict]:
    from ..reproduce.rows import row

    out = []
    for i in range(len(m)):
        for j, metric in enumerate(m.metrics):
            got = m.y[i][j]
            if got is None:
                continue
            scale, unit = _display(metric)
            p = pred[i, j]
            out.append(
                row(
                    f"{metric.name}, {m.describe(i)}",
                    got * scale,
                    None if math.isnan(p) else float(p) * scale,
                    unit,
                    f"{m.source}, row {i + 1}",
                    "fitted" if i in fitted else "predicted",
                    data_row=i + 1,
                    metric=metric.name,
                    config=dict(m.x[i]),
                )
            )
    return out
