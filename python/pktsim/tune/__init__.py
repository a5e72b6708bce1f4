"""``pktsim tune``: the kernel knobs that meet a latency or loss target at the least CPU (or
any objectives over any constraints), found by simulation, with the commands that apply
them to a Linux host.

>>> from pktsim.tune import tune
>>> t = tune("examples/linux-router-64B.toml", load="300kpps", minimize=["cpu"],
...          subject_to=["latency_ns.p99 <= 50us"], knobs=["nic.itr"])   # doctest: +SKIP
>>> t["recommended"]["sets"], t["commands"]                              # doctest: +SKIP

The knobs and their legal values are declared in :mod:`pktsim.tune.knobs`, the objectives
and constraints in :mod:`pktsim.tune.goals`, the search in :mod:`pktsim.tune.search`, the
files a tune writes in :mod:`pktsim.tune.output`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from .. import _core
from ..scenario import as_scenario
from . import goals, knobs, search
from .goals import GoalError
from .knobs import KnobError
from .knobs import select as _select_knobs

__all__ = ["tune", "TuneError", "GoalError", "KnobError", "parse_loads"]

DEFAULT_LOADS = 5
DEFAULT_REPLICATIONS = 3


class TuneError(ValueError):
    pass


def parse_loads(load=None, load_range=None, points: int = DEFAULT_LOADS) -> tuple:
    """The loads (pps) and the index of the target load (-1: objectives averaged over the
    range). ``load``: "300kpps" or a number in pps; ``load_range``: "LO:HI", ``points``
    loads spaced evenly in log between them (both ends included)."""

    def pps(x, what):
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            v = float(x)
        else:
            try:
                v = _core.parse_quantity("packetrate", str(x).strip())
            except ValueError:
                raise TuneError(f"{what} {x!r}: expected a packet rate, e.g. 300kpps or 1.5Mpps") from None
        if not (v > 0 and math.isfinite(v)):
            raise TuneError(f"{what} {x!r}: expected a packet rate above 0")
        return v

    loads: list = []
    target = -1
    if load_range is not None:
        lo_t, sep, hi_t = str(load_range).partition(":")
        if not sep:
            raise TuneError(f"--load-range {load_range!r}: expected LO:HI, e.g. 50kpps:1Mpps")
        lo, hi = pps(lo_t, "--load-range"), pps(hi_t, "--load-range")
        if hi <= lo:
            raise TuneError(f"--load-range {load_range!r}: expected LO below HI")
        if points < 2:
            raise TuneError(f"--loads {points}: expected at least 2 loads over a range")
        loads = [lo * (hi / lo) ** (i / (points - 1)) for i in range(points)]
        loads = [float(f"{x:.4g}") for x in loads]
    if load is not None:
        v = pps(load, "--load")
        if v not in loads:
            loads.append(v)
            loads.sort()
        target = loads.index(v)
    if not loads:
        return [None], 0
    return loads, target


def _auto_replications(sc, load) -> int:
    """1 when two seeds give the same figures (nothing in the model is random), else
    DEFAULT_REPLICATIONS."""
    from ..sim import run_text

    sets = [("traffic.rate", f"{load:.12g}pps")] if load is not None else []
    a = run_text(sc.text, sc.format, sc.origin, sc.base_dir, [*sc.sets, *sets, ("seed", str(sc.seed))])
    b = run_text(sc.text, sc.format, sc.origin, sc.base_dir, [*sc.sets, *sets, ("seed", str(sc.seed + 1))])
    from ..values import flatten

    fa, fb = flatten(a), flatten(b)
    skip = ("wall_s", "seed", "events")
    same = all(fa.get(k) == fb.get(k) for k in fa if not k.startswith(skip) and isinstance(fa.get(k), (int, float)))
    return 1 if same else DEFAULT_REPLICATIONS


def tune(
    scenario,
    *,
    load=None,
    load_range=None,
    loads: int = DEFAULT_LOADS,
    minimize: Sequence[str] = (),
    maximize: Sequence[str] = (),
    subject_to: Sequence[str] = (),
    knobs_spec: Sequence[str] | None = None,
    knobs: Sequence[str] | None = None,
    budget: int = 500,
    replications: int | None = None,
    seed: int = 1,
    batch: int = 8,
    jobs: int | None = None,
    dask: str | None = None,
    prune_margin: float = 1.0,
    sets=None,
    progress: Callable[[int, int, str], None] | None = None,
    compare_adaptive: bool = True,
) -> dict:
    """Tune the knobs of ``scenario`` (a path, a Scenario or a dict). Returns the object of
    ``pktsim tune --json``: ``recommended`` and ``current`` (``sets``, ``predicted`` at the
    target load, ``ci95``), ``pareto``, ``commands``, ``sensitivity`` (by knob),
    ``sensitivity_keys``, ``by_load``, ``infeasible_loads``, ``alternatives``, ``trials``
    and ``search`` (how the candidates were found)."""
    sc = as_scenario(scenario, sets)
    spec = knobs_spec if knobs_spec is not None else knobs
    if budget < 1:
        raise TuneError(f"--budget {budget}: expected a number of candidates, at least 1")
    if batch < 1:
        raise TuneError(f"--batch {batch}: expected at least 1")
    if replications is not None and replications < 1:
        raise TuneError(f"--replications {replications}: expected at least 1")
    if not (prune_margin > 0):
        raise TuneError(f"prune margin {prune_margin}: expected a positive number")
    objs = goals.objectives(minimize, maximize)
    cons = [goals.parse_constraint(t) for t in (subject_to or [])]
    sel = _select_knobs(spec, sc.data)
    load_list, target = parse_loads(load, load_range, loads)
    first = next((x for x in load_list if x is not None), None)
    if replications is None:
        replications = _auto_replications(sc, first)
    # Candidates set every tuned key that matters for them; the others are left out of the
    # scenario they run on (a static interval must not stay behind when a candidate turns
    # the adaptive ITR on).
    base = without(sc, sel.keys())
    plan = search.Plan(base, sc.data, sel, objs, cons, load_list, target, replications, jobs, dask, prune_margin, progress)
    # The metrics must exist: one run of today's configuration tells.
    from ..sim import run_text

    sample = run_text(sc.text, sc.format, sc.origin, sc.base_dir, [*sc.sets, *([("traffic.rate", f"{first:.12g}pps")] if first else [])])
    for o in objs:
        goals.check_metric(o.metric, sample, f"--{o.direction} {o.metric}")
    for c in cons:
        goals.check_metric(c.metric, sample, f"--subject-to {c.text!r}")

    found = search.run(plan, budget, seed, batch)
    cands, current = found["candidates"], found["current"]
    ranked = sorted(cands, key=lambda c: search.rank_key(plan, c, current.sets))
    best = ranked[0]
    feasible = [c for c in cands if search.feasible(plan, c)]
    recommended = best if search.feasible(plan, best) else None

    alternatives = []
    if compare_adaptive:
        alternatives = _alternatives(plan, cands, current, found["evaluator"].count)

    imp = search.importance(plan, cands)
    front = _pareto(plan, feasible or [c for c in cands if not c.error and not c.pruned])
    data = sc.data
    out = {
        "scenario": sc.origin,
        "sets": [f"{k}={v}" for k, v in sc.sets],
        "load_pps": load_list[target] if target >= 0 else None,
        "loads_pps": load_list,
        "objectives": [o.as_json() for o in objs],
        "constraints": [c.as_json() for c in cons],
        "knobs": [k.name for k in sel.knobs],
        "keys": sel.keys(),
        "recommended": _config(plan, recommended) if recommended else None,
        "current": _config(plan, current),
        "pareto": front,
        "commands": sel.commands(recommended.sets, data) if recommended else [],
        "sensitivity": imp["by_knob"],
        "sensitivity_keys": imp["by_key"],
        "by_load": _by_load(plan, cands, current, recommended),
        "infeasible_loads": [load_list[i] for i in range(len(load_list)) if not any(search.feasible_at(plan, c, i) for c in cands)] if cons else [],
        "alternatives": alternatives,
        "trials": [_trial(plan, c) for c in sorted(cands, key=lambda c: c.index)],
        "search": {
            "mode": found["mode"],
            "space": found["space"],
            "budget": budget,
            "evaluated": found["evaluator"].count,
            "pruned": sum(1 for c in cands if c.pruned),
            "feasible": len(feasible),
            "replications": replications,
            "seed": seed,
            "batch": batch,
            "sampler": "Optuna TPESampler (multivariate, constraints), then a local polish" if found["mode"] != "exhaustive" else "every candidate",
            "optuna": _optuna_version(),
        },
    }
    if recommended is None:
        out["why_none"] = (
            "no candidate meets every constraint"
            + (f" at every load; none meets them at {', '.join(f'{x:.4g} pps' for x in out['infeasible_loads'])}" if out["infeasible_loads"] else "")
            + f"; the closest: {best.sets} (worst violations " + ", ".join(f"{k.text}: {v:+.1%}" for k, v in zip(cons, search.violations(plan, best))) + ")"
        )
    return _clean(out)


def without(sc, keys):
    """The scenario (resolved, with its overrides) without ``keys``: they take their defaults.
    Not validated alone (a static ITR without its interval is not a scenario): only with a
    candidate's values on top."""
    import copy

    from ..scenario import Scenario

    data = copy.deepcopy(sc.data)
    for key in keys:
        *path, last = key.split(".")
        node = data
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)

    def no_nulls(d):
        return {k: no_nulls(v) for k, v in d.items() if v is not None} if isinstance(d, dict) else d

    import json

    data = no_nulls(data)
    return Scenario(json.dumps(data), "json", sc.origin, sc.base_dir, (), data)


def _clean(o):
    """NaN and infinities as None (JSON has neither)."""
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_clean(v) for v in o]
    if isinstance(o, float) and (o != o or math.isinf(o)):
        return None
    return o


def _optuna_version() -> str:
    import optuna

    return optuna.__version__


def _config(plan: search.Plan, c: search.Candidate) -> dict:
    li = plan.target if plan.target >= 0 else len(plan.loads) - 1
    return {
        "sets": dict(c.sets),
        "predicted": c.results[li] if c.results and c.results[li] is not None else None,
        "ci95": {m: _num(v) for m, v in (c.ci95[li] if c.ci95 else {}).items()},
        "objectives": {o.metric: _num(v) for o, v in zip(plan.objectives, search.objective_values(plan, c))},
        "feasible": search.feasible(plan, c),
        "load_pps": plan.loads[li],
    }


def _num(v):
    return None if v is None or v != v or (isinstance(v, float) and math.isinf(v)) else v


def _trial(plan: search.Plan, c: search.Candidate) -> dict:
    return {
        "index": c.index,
        "origin": c.origin,
        "sets": dict(c.sets),
        "objectives": {o.metric: _num(v) for o, v in zip(plan.objectives, search.objective_values(plan, c))},
        "violations": {k.text: _num(v) for k, v in zip(plan.constraints, search.violations(plan, c))},
        "feasible": search.feasible(plan, c),
        "pruned": c.pruned,
        "runs": c.runs,
        "error": c.error,
        "per_load": [{m: _num(v) for m, v in p.items()} for p in c.per_load],
    }


def _pareto(plan: search.Plan, cands: list) -> list:
    """The non-dominated candidates over the objectives; with one objective, over it and the
    first constraint's metric (e.g. CPU against p99)."""
    metrics = [(o.metric, o.direction) for o in plan.objectives]
    if len(metrics) == 1 and plan.constraints:
        k = plan.constraints[0]
        if k.metric != metrics[0][0]:
            metrics.append((k.metric, "minimize" if k.op in ("<=", "<") else "maximize"))
    li = plan.target

    def val(c, m):
        if li >= 0:
            return c.per_load[li][m]
        xs = [p[m] for p in c.per_load]
        return sum(xs) / len(xs)

    pts, keep = [], []
    for c in cands:
        vals = [val(c, m) for m, _ in metrics]
        if any(v != v for v in vals):
            continue
        pts.append(tuple(v if d == "minimize" else -v for v, (_, d) in zip(vals, metrics)))
        keep.append((c, vals))
    idx = search.pareto(pts)
    front = [{"sets": dict(keep[i][0].sets), "objectives": {m: v for (m, _), v in zip(metrics, keep[i][1])}, "index": keep[i][0].index,
              "feasible": search.feasible(plan, keep[i][0])} for i in idx]
    front.sort(key=lambda f: list(f["objectives"].values()))
    return front


def _by_load(plan: search.Plan, cands: list, current, recommended) -> list:
    """Per load: today's and the recommended configuration's figures, and whether any
    candidate met the constraints there."""
    rows = []
    for li, load in enumerate(plan.loads):
        row = {"load_pps": load, "any_feasible": any(search.feasible_at(plan, c, li) for c in cands) if plan.constraints else True}
        for name, c in (("current", current), ("recommended", recommended)):
            if c is None:
                continue
            row[name] = {m: _num(v) for m, v in c.per_load[li].items()}
            row[name + "_ci95"] = {m: _num(v) for m, v in c.ci95[li].items()}
            row[name + "_feasible"] = search.feasible_at(plan, c, li) if plan.constraints else True
        rows.append(row)
    return rows


def _alternatives(plan: search.Plan, cands: list, current, start: int) -> list:
    """The adaptive alternatives (the driver's adaptive ITR, each DIM profile, hard-IRQ
    deferral) against the best static moderation found, at every load."""
    sel_names = {k.name for k in plan.selection.knobs}
    keys = set(plan.selection.keys())
    if "nic.itr.mode" not in keys and "nic.napi.defer_hard_irqs" not in keys:
        return []

    def get(c, key):
        return c.sets.get(key, knobs.value_text(plan.data, key))

    def is_static(c):
        return get(c, "nic.itr.mode") in ("static", "off") and get(c, "nic.napi.defer_hard_irqs") in ("0", "")

    ranked = sorted([c for c in cands if not c.error and not c.pruned], key=lambda c: search.rank_key(plan, c, current.sets))
    static = next((c for c in ranked if is_static(c)), None)
    if static is None:
        return []
    base = {k: v for k, v in static.sets.items()}
    named = [("best static", static)]
    extra = []
    if "nic.itr.mode" in keys:
        dyn = {k: v for k, v in base.items() if not k.startswith("nic.itr.")}
        extra.append(("adaptive ITR (ixgbe dynamic)", {**dyn, "nic.itr.mode": "dynamic"}))
        for prof in ("mlx5-eqe", "mlx5-cqe", "ice"):
            extra.append((f"DIM {prof}", {**dyn, "nic.itr.mode": "dim", "nic.itr.profile": prof}))
    if "nic.napi.defer_hard_irqs" in keys or "nic.napi" in sel_names:
        deferred = next((c for c in ranked if get(c, "nic.napi.defer_hard_irqs") not in ("0", "")), None)
        if deferred is not None:
            named.append(("best with deferral", deferred))
        else:
            d = {k: v for k, v in base.items() if not k.startswith("nic.itr.")}
            extra.append(("deferral 2 x 50us, ITR off", {**d, "nic.itr.mode": "off", "nic.napi.defer_hard_irqs": "2", "nic.napi.gro_flush_timeout": "50us"}))
    more = [search.Candidate(s, origin="alternative") for _, s in extra]
    if more:
        search.evaluate_more(plan, more, start)  # in full: no early stop
    out = []
    for (name, c) in named + [(n, m) for (n, _), m in zip(extra, more)]:
        out.append({
            "name": name,
            "sets": dict(c.sets),
            "feasible": search.feasible(plan, c),
            "error": c.error,
            "per_load": [{"load_pps": plan.loads[i], "feasible": search.feasible_at(plan, c, i), **{m: _num(v) for m, v in c.per_load[i].items()}} for i in range(len(plan.loads))],
        })
    return out
