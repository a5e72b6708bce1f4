"""The search: candidates (values of the tuned keys) evaluated by the simulator at every
load, with replications where the model is random, proposed by Optuna's TPE sampler
(multi-objective, with the constraints) or, when the space is no larger than the budget,
every candidate in turn; then a local polish around the best.

Determinism: candidates are asked for in batches of a fixed size, evaluated (on local
processes or Dask, in any order) and told back in the order they were asked, so the same
scenario, options and seed give the same recommendation however many workers run them.

Early stopping, three ways (multi-fidelity: a cheap look first, the full evaluation only
where it can change the answer):

* a candidate is first run once at the highest load (where the constraints bite); one that
  misses a constraint there by more than ``prune_margin`` (relative to the bound) is not
  run further and counts as infeasible (``pruned`` in the trials);
* the race: one that misses a constraint in that run by more than the run-to-run noise, or
  (one objective, one load) is worse than the best candidate so far by more than that
  noise, is not replicated (``raced``): its other runs could not make it the answer. The
  noise is four standard deviations of one run, measured on today's configuration's
  replications, and at least ``RACE_FLOOR`` of the value;
* the search itself stops once ``patience`` candidates in a row have added nothing to the
  best (the front, for several objectives) beyond noise (0.5%), and the polish takes over.

The candidates and their evaluation are :mod:`~pktsim.tune.evaluate`; the scores, the
search and the polish are here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from .evaluate import Candidate, Evaluator, Plan
from .knobs import Selection, same, value_text

# ----- scores ------------------------------------------------------------------------------


def objective_values(plan: Plan, c: Candidate) -> list:
    """The objectives' values (the target load's, or the mean over loads); NaN if unknown."""
    out = []
    for o in plan.objectives:
        if plan.target >= 0:
            v = c.per_load[plan.target][o.metric] if c.per_load else math.nan
        else:
            xs = [p[o.metric] for p in c.per_load]
            v = sum(xs) / len(xs) if xs else math.nan
        out.append(v)
    return out


def violations(plan: Plan, c: Candidate) -> list:
    """Per constraint, its worst relative violation over the loads (<= 0: met everywhere)."""
    if c.error:
        return [math.inf] * len(plan.constraints)
    out = []
    for k in plan.constraints:
        known = [k.violation(p[k.metric]) for p in c.per_load if p[k.metric] == p[k.metric]]
        out.append(max(known) if known else math.inf)
    return out


def feasible_at(plan: Plan, c: Candidate, li: int) -> bool:
    if c.error or c.pruned:
        return False
    p = c.per_load[li]
    return all(k.violation(p[k.metric]) <= 0 for k in plan.constraints)


def feasible(plan: Plan, c: Candidate) -> bool:
    return not c.error and not c.pruned and all(v <= 0 for v in violations(plan, c))


def _signed(plan: Plan, vals: list) -> list:
    """Objective values to minimise (NaN last)."""
    out = []
    for o, v in zip(plan.objectives, vals):
        if v != v:
            out.append(math.inf)
        else:
            out.append(v if o.direction == "minimize" else -v)
    return out


def rank_key(plan: Plan, c: Candidate, current: Mapping[str, str]) -> tuple:
    """Best first: feasible, then the objectives in order, then the fewest changes from today's
    configuration, then the order of evaluation."""
    changed = sum(1 for k, v in c.sets.items() if not (k in current and same(k, current[k], v)))
    if feasible(plan, c):
        return (0, *_signed(plan, objective_values(plan, c)), changed, c.index)
    return (1, sum(max(0.0, v) for v in violations(plan, c)), *_signed(plan, objective_values(plan, c)), changed, c.index)


def pareto(points: list) -> list:
    """Indices of the non-dominated points (each a tuple to minimise)."""
    out = []
    for i, p in enumerate(points):
        if any(all(a <= b for a, b in zip(q, p)) and any(a < b for a, b in zip(q, p)) for j, q in enumerate(points) if j != i):
            continue
        out.append(i)
    return out


# ----- the race and the patience -----------------------------------------------------------

# The least margin the race allows a single run (relative): below it a run's noise on a short
# window (20 ms of Poisson traffic: p99 within about 1% from seed to seed) could decide.
RACE_FLOOR = 0.02
# Standard deviations of one run in the race's margin.
RACE_SIGMAS = 4.0
# A candidate adds to the best only by more than this share (the simplification's noise).
GAIN = 0.005


def run_noise(plan: Plan, c: Candidate) -> dict:
    """Each metric's relative standard deviation of one run, from ``c``'s replications at the
    highest load (0 where they agree or are too few)."""
    from .. import _core

    li = max(range(len(plan.loads)), key=lambda i: plan.loads[i] or 0.0)
    out = {}
    for m in plan.metrics:
        mu = c.per_load[li].get(m, math.nan) if c.per_load else math.nan
        h = c.ci95[li].get(m, math.nan) if c.ci95 else math.nan
        n = plan.replications
        if n > 1 and h == h and mu == mu and mu != 0:
            out[m] = h * math.sqrt(n) / _core.student_t95(n - 1) / abs(mu)
        else:
            out[m] = 0.0
    return out


def racer(plan: Plan, noise: Mapping[str, float], incumbent: Callable[[], float | None]):
    """The race's rule (:attr:`Evaluator.race`): why a candidate's first run leaves it no
    chance, or ""."""
    from .goals import value

    def margin(m):
        return max(RACE_FLOOR, RACE_SIGMAS * noise.get(m, 0.0))

    one_load = len(plan.loads) == 1 and len(plan.objectives) == 1

    def race(c: Candidate, row: dict) -> str:
        for k in plan.constraints:
            v = k.violation(value(row, k.metric))
            if v > margin(k.metric):
                return f"{k.text}: {v:+.1%} in its first run"
        best = incumbent()
        if one_load and best is not None:
            o = plan.objectives[0]
            v = value(row, o.metric)
            worse = (v - best) if o.direction == "minimize" else (best - v)
            if v == v and worse > margin(o.metric) * abs(best):
                return f"{o.metric} {worse / abs(best):+.1%} from the best in its first run"
        return ""

    return race


class Front:
    """What the search has found, for its patience: the feasible candidates' objectives not
    dominated (the best one, for one objective), or, while none is feasible, the least
    violation. A candidate improves it when no point of it is as good within ``GAIN``."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.points: list = []
        self.least = math.inf

    def improves(self, c: Candidate) -> bool:
        plan = self.plan
        if c.error:
            return False
        if not feasible(plan, c):
            if self.points:
                return False
            v = sum(max(0.0, x) for x in violations(plan, c))
            if v < self.least - GAIN:
                self.least = v
                return True
            return False
        p = _signed(plan, objective_values(plan, c))
        if any(all(a <= b + GAIN * abs(a) for a, b in zip(q, p)) for q in self.points):
            return False
        self.points = [q for q in self.points if not all(b <= a for a, b in zip(q, p))] + [p]
        return True


# ----- the search --------------------------------------------------------------------------


def vectorized_log_ndtr() -> bool:
    """Give Optuna's TPE scipy's ``log_ndtr`` for log Phi: Optuna 5.0 computes it one scalar
    at a time through ``numpy.frompyfunc`` (1.2 M calls, 8 s of a 400-trial tune of
    ``examples/napi-deferral.toml``, while the workers wait for the next batch). The values
    agree within 1e-12 (tests/test_tune.py holds it) and a tune takes the same trials. True
    where it is in place; an Optuna without that function is left as it is."""
    try:
        import numpy as np
        import optuna.samplers._tpe._truncnorm as truncnorm
        from scipy.special import log_ndtr
    except ImportError:
        return False
    if not callable(getattr(truncnorm, "_log_ndtr", None)):
        return False
    if getattr(truncnorm._log_ndtr, "_pktsim", False):
        return True

    def _log_ndtr(a):
        return log_ndtr(np.asarray(a, dtype=float))

    _log_ndtr._pktsim = True
    _log_ndtr.optunas = truncnorm._log_ndtr  # (kept: the test holds the two equal)
    truncnorm._log_ndtr = _log_ndtr
    return True


def run(plan: Plan, budget: int, seed: int, batch: int = 8, patience: int = 0) -> dict:
    """Search; returns the evaluated candidates and how they were found. ``patience``: stop
    the sampler after that many candidates in a row add nothing (0: use the budget)."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    data = plan.data
    sel = plan.selection
    current = Candidate(sel.current(data), origin="current")
    ev = Evaluator(plan)
    done: list = []
    try:
        ev.evaluate([current])
        done.append(current)
        if plan.replications > 1:
            ev.race = racer(plan, run_noise(plan, current), lambda: _incumbent(plan, done))
        space = sel.enumerate(data, limit=max(budget, 1))
        report = plan.progress
        if len(space) <= budget:
            mode = "exhaustive"
            todo = [Candidate(s, origin="exhaustive") for s in space]
            for i in range(0, len(todo), batch * max(1, ev.workers)):
                part = todo[i : i + batch * max(1, ev.workers)]
                ev.evaluate(part)
                done.extend(part)
                if report:
                    report(min(ev.count, budget), budget, f"{len(done) - 1} of {len(todo)} candidates")
        else:
            mode = "tpe"
            reserve = min(max(8, budget // 5), budget // 2)
            directions = [o.direction for o in plan.objectives]
            vectorized_log_ndtr()
            startup = min(max(10, budget // 10), 50)
            sampler = optuna.samplers.TPESampler(
                seed=seed,
                multivariate=True,
                group=True,
                constant_liar=True,
                n_startup_trials=startup,
            )
            study = optuna.create_study(directions=directions, sampler=sampler)
            _tell(study, plan, current, sel, data)
            front, stall, converged = Front(plan), 0, False
            front.improves(current)

            def ask() -> tuple:
                trials = [study.ask() for _ in range(batch)]
                return trials, [Candidate(_suggest(t, sel, data), origin="search") for t in trials]

            # The sampler proposes the next batch while this one runs (the running trials
            # count as pending for it: constant_liar); each batch is told back before the
            # one after the next is asked, whatever the runs' timing.
            nxt = ask() if ev.count < budget - reserve else None
            asks = batch if nxt else 0
            while nxt is not None:
                trials, cands = nxt
                running = ev.submit(cands)
                nxt = None
                if ev.count < budget - reserve and asks < 20 * budget:
                    nxt = ask()
                    asks += batch
                running.wait()
                for trial, c in zip(trials, cands):
                    for i, v in enumerate(_finite(violations(plan, c))):
                        trial.set_constraint(f"c{i}", v)
                    study.tell(trial, _finite(objective_values(plan, c), plan))
                    if all(c.index != d.index for d in done):
                        done.append(c)
                    stall = 0 if front.improves(c) else stall + 1
                if report:
                    report(min(ev.count, budget), budget, "searching")
                if patience and stall >= patience and asks >= startup + patience:
                    converged = True
                    break
            mode = "tpe+polish"
        # Polish: neighbours of the best in each key, while the budget lasts (keeping one
        # candidate per tuned key for the simplification).
        best = min(done, key=lambda c: rank_key(plan, c, current.sets))
        limit = max(budget - len(sel.params), ev.count)
        improved = True
        while improved and ev.count < limit:
            improved = False
            for cand in _neighbours(best, sel, data):
                if ev.count >= limit:
                    break
                cand.origin = "polish"
                ev.evaluate([cand])
                if all(cand.index != d.index for d in done):
                    done.append(cand)
                if rank_key(plan, cand, current.sets) < rank_key(plan, best, current.sets):
                    best, improved = cand, True
                    if report:
                        report(min(ev.count, budget), budget, "polishing")
                    break
        result = {"candidates": done, "current": current, "mode": mode, "space": len(space) if len(space) <= budget else None, "evaluator": ev, "best": best}
        result["converged"] = mode != "exhaustive" and converged
    except BaseException:
        ev.close(abort=True)  # Ctrl-C: running candidates are abandoned, not waited for
        raise
    ev.close()
    return result


def _incumbent(plan: Plan, done: list) -> float | None:
    """The best objective among the candidates evaluated in full that meet the constraints."""
    o = plan.objectives[0]
    vals = [objective_values(plan, c)[0] for c in done if not c.raced and feasible(plan, c)]
    vals = [v for v in vals if v == v]
    if not vals:
        return None
    return min(vals) if o.direction == "minimize" else max(vals)


def evaluate_more(plan: Plan, cands: list, start: int) -> None:
    """Evaluate extra candidates (the alternatives compared over the load range)."""
    ev = Evaluator(plan)
    ev.count = start
    try:
        ev.evaluate(cands, prune=False)
    except BaseException:
        ev.close(abort=True)
        raise
    ev.close()


def simplify_best(plan: Plan, found: dict, order: Sequence[str]) -> tuple:
    """:func:`simplify` on a finished search's best candidate."""
    ev = found["evaluator"]
    try:
        best, kept = simplify(plan, found["best"], found["current"], ev, order)
    except BaseException:
        ev.close(abort=True)
        raise
    ev.close()
    for c in ev.cache.values():
        if all(c.index != d.index for d in found["candidates"]):
            found["candidates"].append(c)
    return best, kept


def _finite(vals: list, plan: Plan | None = None) -> list:
    out = []
    for i, v in enumerate(vals):
        if v != v or math.isinf(v):
            big = 1e300
            if plan is not None and plan.objectives[i].direction == "maximize":
                big = -1e300
            out.append(big)
        else:
            out.append(v)
    return out


def _suggest(trial, sel: Selection, data: dict) -> dict:
    chosen: dict = {}
    for p in sel.params:
        if not p.active(chosen, data):
            continue
        if p.ordered and len(p.values) > 1:
            chosen[p.key] = p.values[trial.suggest_int(p.key, 0, len(p.values) - 1)]
        else:
            chosen[p.key] = trial.suggest_categorical(p.key, list(p.values))
    return sel.active(chosen, data)


def _tell(study, plan: Plan, c: Candidate, sel: Selection, data: dict) -> None:
    """Today's configuration as a finished trial (when its values are legal values)."""
    import optuna

    params, dists = {}, {}
    for p in sel.params:
        if p.key not in c.sets:
            continue
        idx = next((i for i, v in enumerate(p.values) if same(p.key, v, c.sets[p.key])), None)
        if idx is None:
            return
        params[p.key], dists[p.key] = _optuna_param(p, idx)
    cons = {f"c{i}": v for i, v in enumerate(_finite(violations(plan, c)))}
    study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, values=_finite(objective_values(plan, c), plan), constraints=cons or None))


def _optuna_param(p, idx: int) -> tuple:
    """A key's value (its position among the legal values) as Optuna records it, with its
    distribution: a position for ordered keys (as :func:`_suggest` samples them), the
    value for choices."""
    import optuna

    if p.ordered and len(p.values) > 1:
        return idx, optuna.distributions.IntDistribution(0, len(p.values) - 1)
    return p.values[idx], optuna.distributions.CategoricalDistribution(list(p.values))


def _neighbours(c: Candidate, sel: Selection, data: dict) -> list:
    """Candidates one step from ``c`` in one key (the next value up and down of an ordered
    key, every other value of a choice)."""
    out = []
    for p in sel.params:
        if p.key not in c.sets:
            continue
        i = next((i for i, v in enumerate(p.values) if same(p.key, v, c.sets[p.key])), None)
        if i is None:
            continue
        steps = [i - 1, i + 1] if p.ordered else [j for j in range(len(p.values)) if j != i]
        for j in steps:
            if 0 <= j < len(p.values):
                out.append(Candidate(complete({**c.sets, p.key: p.values[j]}, sel, data)))
    return out


def complete(chosen: Mapping[str, str], sel: Selection, data: dict) -> dict:
    """A candidate from some keys' values: keys that come to matter take today's value (if
    legal, else their first), keys that stop mattering go."""
    chosen = dict(chosen)
    for q in sel.params:
        if q.key not in chosen and q.active(chosen, data):
            today = value_text(data, q.key)
            chosen[q.key] = next((v for v in q.values if same(q.key, v, today)), q.values[0])
    return sel.active(chosen, data)


def simplify(plan: Plan, best: Candidate, current: Candidate, ev: Evaluator, order: Sequence[str]) -> tuple:
    """Put keys back to today's values, one at a time (``order``: least important first),
    while the candidate still meets the constraints and every objective stays within noise
    of the best (its 95% CI, and at least 0.5%): a recommendation changes only what pays.
    Returns the simplest candidate and the keys put back."""
    kept = []
    for key in order:
        if key not in best.sets or (key in current.sets and same(key, current.sets[key], best.sets[key])):
            continue
        chosen = dict(best.sets)
        if key in current.sets:
            chosen[key] = current.sets[key]
        else:
            chosen.pop(key)
        cand = Candidate(complete(chosen, plan.selection, plan.data), origin="simplify")
        if cand.key() == best.key():
            continue
        ev.evaluate([cand], prune=False)
        if feasible(plan, cand) or not feasible(plan, best):
            if feasible(plan, cand) == feasible(plan, best) and _within_noise(plan, cand, best):
                best = cand
                kept.append(key)
    return best, kept


def _within_noise(plan: Plan, cand: Candidate, best: Candidate) -> bool:
    li = plan.target if plan.target >= 0 else None
    for o, a, b in zip(plan.objectives, objective_values(plan, cand), objective_values(plan, best)):
        if a != a or b != b:
            return False
        half = 0.0
        if li is not None:
            for c in (cand, best):
                h = c.ci95[li].get(o.metric, math.nan)
                half = max(half, h if h == h else 0.0)
        tol = max(half, 0.005 * abs(b))
        worse = (a - b) if o.direction == "minimize" else (b - a)
        if worse > tol:
            return False
    return True


def importance(plan: Plan, cands: list) -> dict:
    """Each tuned key's share in reaching the best tenth of the first objective over the
    candidates evaluated (Optuna's PED-ANOVA: how much more concentrated the key's values
    are among the best candidates than among all), by knob and by key."""
    import optuna

    sel = plan.selection
    data = plan.data
    usable = [c for c in cands if not c.error and not c.pruned and all(v == v for v in objective_values(plan, c))]
    keys = [p.key for p in sel.params]
    if len(usable) < 3 or not keys:
        return {"by_knob": {}, "by_key": {}}
    if len(keys) == 1:
        return {"by_knob": {sel.knobs[0].name: 1.0}, "by_key": {keys[0]: 1.0}}
    study = optuna.create_study(direction="minimize")
    o = plan.objectives[0]
    for c in usable:
        params, dists = {}, {}
        for p in sel.params:
            # Keys that do not matter for a candidate carry the scenario's value (or the first).
            v = c.sets.get(p.key)
            if v is None:
                cur = value_text(data, p.key)
                v = next((x for x in p.values if same(p.key, x, cur)), p.values[0])
            idx = next((i for i, x in enumerate(p.values) if same(p.key, x, v)), None)
            if idx is None:
                break  # today's configuration, off the knob's grid (rx_ring 1000): not a point of it
            params[p.key], dists[p.key] = _optuna_param(p, idx)
        if len(params) < len(sel.params):
            continue
        y = objective_values(plan, c)[0]
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=y if o.direction == "minimize" else -y))
    try:
        imp = optuna.importance.get_param_importances(study, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    except (RuntimeError, ValueError):
        return {"by_knob": {}, "by_key": {}}
    by_key = {k: float(imp.get(k, 0.0)) for k in keys}
    by_knob: dict = {}
    for k in sel.knobs:
        by_knob[k.name] = sum(by_key.get(p.key, 0.0) for p in k.params)
    return {"by_knob": by_knob, "by_key": by_key}
