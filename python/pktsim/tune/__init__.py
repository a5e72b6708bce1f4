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

from .. import _core, schema_info
from ..scenario import as_scenario
from . import goals, knobs, search
from .goals import GoalError
from .knobs import KnobError
from .knobs import select as _select_knobs

__all__ = ["tune", "TuneError", "GoalError", "KnobError", "parse_loads"]

DEFAULT_LOADS = 5
DEFAULT_REPLICATIONS = 3
# Candidates in a row that add nothing beyond noise before the sampler stops (0: never).
DEFAULT_PATIENCE = 48


class TuneError(ValueError):
    pass


# Bounds on a search's work, checked before it starts: loads per candidate, candidates,
# replications per candidate and load.
MAX_LOADS = 50
MAX_BUDGET = 100_000
MAX_REPLICATIONS = 100


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
        if not 2 <= points <= MAX_LOADS:
            raise TuneError(f"--loads {points}: expected 2 to {MAX_LOADS} loads over a range (each candidate runs at every one)")
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
    patience: int = DEFAULT_PATIENCE,
    sets=None,
    node: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    compare_adaptive: bool = True,
) -> dict:
    """Tune the knobs of ``scenario`` (a path, a Scenario or a dict). Returns the object of
    ``pktsim tune --json``: ``recommended`` and ``current`` (``sets``, ``predicted`` at the
    target load, ``ci95``), ``pareto``, ``commands``, ``sensitivity`` (by knob),
    ``sensitivity_keys``, ``by_load``, ``infeasible_loads``, ``alternatives``, ``trials``
    and ``search`` (how the candidates were found).

    A chain file tunes one node's knobs (``node``: its index; default the node the model
    names as the bottleneck) against the chain's figures (end to end, or a node's:
    ``nodes.1.latency_ns.p99``)."""
    sc = as_scenario(scenario, sets)
    chain = "nodes" in sc.data
    if chain:
        n = len(sc.data["nodes"])
        if node is None:
            from ..model import predict

            node = predict(sc)["bottleneck_node"]
        if not (0 <= node < n):
            raise TuneError(f"--node {node}: the chain has {n} nodes, 0 to {n - 1}")
    elif node is not None:
        raise TuneError(f"--node {node}: {sc.origin} is a single node, not a chain")
    spec = knobs_spec if knobs_spec is not None else knobs
    if not 1 <= budget <= MAX_BUDGET:
        raise TuneError(f"--budget {budget}: expected a number of candidates from 1 to {MAX_BUDGET:,}")
    if not 0 <= seed < 2**32:
        raise TuneError(f"--seed {seed}: expected a seed from 0 to 4294967295")
    if batch < 1:
        raise TuneError(f"--batch {batch}: expected at least 1")
    if replications is not None and not 1 <= replications <= MAX_REPLICATIONS:
        raise TuneError(f"--replications {replications}: expected 1 to {MAX_REPLICATIONS} runs per candidate and load")
    if not 0 <= patience <= MAX_BUDGET:
        raise TuneError(f"--patience {patience}: expected a number of candidates from 0 (search the whole budget) to {MAX_BUDGET:,}")
    if not (prune_margin > 0):
        raise TuneError(f"prune margin {prune_margin}: expected a positive number")
    objs = goals.objectives(minimize, maximize)
    cons = [goals.parse_constraint(t) for t in (subject_to or [])]
    data = sc.data["nodes"][node] if chain else sc.data  # the tuned node's scenario
    sel = _select_knobs(spec, data)
    load_list, target = parse_loads(load, load_range, loads)
    first = next((x for x in load_list if x is not None), None)
    if replications is None:
        replications = _auto_replications(sc, first)
    # Candidates set every tuned key that matters for them; the others are left out of the
    # scenario they run on (a static interval must not stay behind when a candidate turns
    # the adaptive ITR on).
    base, prefix = base_for(sc, sel.keys(), node)
    plan = search.Plan(base, data, sel, objs, cons, load_list, target, replications, jobs, dask, prune_margin, progress, prefix)
    # The metrics must exist: one run of today's configuration tells.
    from ..sim import run_text

    sample = run_text(sc.text, sc.format, sc.origin, sc.base_dir, [*sc.sets, *([("traffic.rate", f"{first:.12g}pps")] if first else [])])
    for o in objs:
        goals.check_metric(o.metric, sample, f"--{o.direction} {o.metric}")
    for c in cons:
        goals.check_metric(c.metric, sample, f"--subject-to {c.text!r}")

    found = search.run(plan, budget, seed, batch, patience)
    current = found["current"]
    best = min(found["candidates"], key=lambda c: search.rank_key(plan, c, current.sets))
    imp = search.importance(plan, found["candidates"])
    put_back: list = []
    if search.feasible(plan, best):
        # Only what pays: least important keys first.
        keys = sel.keys()
        order = sorted(best.sets, key=lambda k: (imp["by_key"].get(k, 0.0), -keys.index(k)))
        found["best"] = best
        best, put_back = search.simplify_best(plan, found, order)
    cands = found["candidates"]
    feasible = [c for c in cands if search.feasible(plan, c)]
    recommended = best if search.feasible(plan, best) else None

    alternatives = []
    if compare_adaptive:
        alternatives = _alternatives(plan, cands, current, recommended, found["evaluator"].count)

    front = _pareto(plan, feasible or [c for c in cands if not c.error and not c.pruned])
    changed = _changed(sel, current.sets, recommended.sets) if recommended else []
    out = {
        "scenario": sc.origin,
        "sets": [f"{k}={v}" for k, v in sc.sets],
        "load_pps": load_list[target] if target >= 0 else None,
        "loads_pps": load_list,
        "objectives": [o.as_json() for o in objs],
        "constraints": [c.as_json() for c in cons],
        "node": node,
        "knobs": [k.name for k in sel.knobs],
        "keys": sel.keys(),
        "recommended": _config(plan, recommended) if recommended else None,
        "current": _config(plan, current),
        "pareto": front,
        "commands": sel.commands(recommended.sets, data, only=changed) if recommended else [],
        "assumed": _assumed(recommended.sets, data, changed) if recommended else [],
        "changed": changed,
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
            "put_back": put_back,
            "pruned": sum(1 for c in cands if c.pruned),
            "raced": sum(1 for c in cands if c.raced),
            "patience": patience,
            "converged": found["converged"],
            "feasible": len(feasible),
            "replications": replications,
            "seed": seed,
            "batch": batch,
            "sampler": ("Optuna TPESampler (multivariate, constraints), then a local polish" if found["mode"] != "exhaustive" else "every candidate")
            + "; then keys put back to today's values where that costs no more than noise",
            "optuna": _optuna_version(),
        },
    }
    if recommended is None:
        out["why_none"] = (
            "no candidate meets every constraint"
            + (f" at every load; none meets them at {', '.join(load_text(x) for x in out['infeasible_loads'])}" if out["infeasible_loads"] else "")
            + f"; the closest: {best.sets} (worst violations "
            + ", ".join(f"{k.text}: {v:+.1%}" for k, v in zip(cons, search.violations(plan, best)))
            + ")"
        )
    return _clean(out)


def _changed(sel, today: Mapping[str, str], rec: Mapping[str, str]) -> list:
    """The knobs whose keys the recommendation changes (a key that comes to matter or stops
    mattering is a change)."""
    out = []
    for k in sel.knobs:
        for p in k.params:
            a, b = today.get(p.key), rec.get(p.key)
            if (a is None) != (b is None) or (a is not None and not knobs.same(p.key, a, b)):
                out.append(k.name)
                break
    return out


def load_text(x) -> str:
    """A load for messages (None: the scenario's own traffic)."""
    return "the scenario's own load" if x is None else f"{x:.4g} pps"


def base_for(sc, keys, node):
    """The scenario candidates run on, without the tuned keys, and the prefix their keys
    take there: a node's scenario as is; for a chain, the chain with the tuned node's
    scenario written inline (its file's tables and the chain's, resolved), so that a key
    its file sets can be left out."""
    if "nodes" not in sc.data:
        return without(sc, keys), ""
    import copy
    import json
    from pathlib import Path

    from ..scenario import Scenario
    from ..tomlread import tomllib

    doc = tomllib.loads(sc.text) if sc.format == "toml" else json.loads(sc.text)
    # The overrides the chain was loaded with stay, but for the tuned node's tuned keys
    # (its resolved data below carries the rest).
    sets = tuple((k, v) for k, v in sc.sets if not any(k == f"nodes.{node}.{t}" for t in keys))
    inline = without(_node_scenario(sc, node), keys).data
    inline = copy.deepcopy(inline)
    entry = doc["nodes"][node]
    link = dict(inline.get("link") or {})
    delay = (entry.get("link") or {}).get("delay") if isinstance(entry.get("link"), dict) else None
    if delay is not None:
        link["delay"] = delay
    inline["link"] = link
    prof = (inline.get("cost") or {}).get("profile")
    if isinstance(prof, str) and prof not in _core.bundled_profiles() and not Path(prof).is_absolute():
        base = Path(sc.base_dir) / Path(entry.get("file", ".")).parent if isinstance(entry.get("file"), str) else Path(sc.base_dir)
        inline["cost"]["profile"] = str((base / prof).resolve())
    doc["nodes"][node] = inline
    text = json.dumps(doc)
    return Scenario(text, "json", sc.origin, sc.base_dir, sets, sc.data), f"nodes.{node}."


def _node_scenario(sc, node):
    """Node ``node`` of a chain as a scenario of its own (resolved data, not validated again)."""
    import json

    from ..scenario import Scenario

    data = sc.data["nodes"][node]
    return Scenario(json.dumps(data), "json", sc.origin, sc.base_dir, (), data)


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
        "raced": c.raced,
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
    front = [
        {
            "sets": dict(keep[i][0].sets),
            "objectives": {m: v for (m, _), v in zip(metrics, keep[i][1])},
            "index": keep[i][0].index,
            "feasible": search.feasible(plan, keep[i][0]),
        }
        for i in idx
    ]
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


def _alternatives(plan: search.Plan, cands: list, current, recommended, start: int) -> list:
    """The adaptive alternatives (the driver's adaptive ITR, each DIM profile, hard-IRQ
    deferral) against the best static moderation (off, or rx-usecs on a doubling grid, with
    no deferral), every other key as recommended, at every load."""
    keys = set(plan.selection.keys())
    if "nic.itr.mode" not in keys and "nic.napi.defer_hard_irqs" not in keys:
        return []
    data = plan.data
    sel = plan.selection
    rest = {k: v for k, v in (recommended or current).sets.items() if not k.startswith(("nic.itr.", "nic.napi."))}
    no_defer = {"nic.napi.defer_hard_irqs": "0"} if "nic.napi.defer_hard_irqs" in keys else {}

    def cand(sets, origin="alternative"):
        chosen = search.complete({**rest, **sets}, sel, data)
        if "nic.itr.profile" in sets:  # a DIM table the scenario's device may not have: asked for here
            chosen["nic.itr.profile"] = sets["nic.itr.profile"]
        return search.Candidate(chosen, origin=origin)

    # rx-usecs on a doubling grid (2us, 4us, ...), and the largest the driver takes.
    grid = [us for us in knobs.RX_USECS if int(us[:-2]) & (int(us[:-2]) - 1) == 0]
    grid += [knobs.RX_USECS[-1]] if grid[-1] != knobs.RX_USECS[-1] else []
    static = []
    if "nic.itr.mode" in keys:
        static.append(cand({"nic.itr.mode": "off", **no_defer}))
        for us in grid:
            static.append(cand({"nic.itr.mode": "static", "nic.itr.interval": us, **no_defer}))
    elif "nic.itr.interval" in keys:
        for us in grid:
            static.append(cand({"nic.itr.interval": us, **no_defer}))
    else:
        static.append(cand(dict(no_defer)))
    extra: list = []
    if "nic.itr.mode" in keys:
        extra.append(("adaptive ITR (ixgbe dynamic)", cand({"nic.itr.mode": "dynamic", **no_defer})))
        for prof in schema_info.values("nic.itr.profile"):
            extra.append((f"DIM {prof}", cand({"nic.itr.mode": "dim", "nic.itr.profile": prof, **no_defer})))
    if "nic.napi.defer_hard_irqs" in keys:
        itr_off = {"nic.itr.mode": "off"} if "nic.itr.mode" in keys else {}
        for n, us in ((2, 20), (2, 50), (10, 50)):
            extra.append(
                (
                    f"deferral {n} x {us}us" + (", ITR off" if itr_off else ""),
                    cand({**itr_off, "nic.napi.defer_hard_irqs": str(n), "nic.napi.gro_flush_timeout": f"{us}us"}),
                )
            )
    search.evaluate_more(plan, static + [c for _, c in extra], start)
    best_static = min(static, key=lambda c: search.rank_key(plan, c, current.sets))
    rows = [("best static", best_static), *extra]
    if recommended is not None:
        rows.append(("recommended", recommended))
    out = []
    for name, c in rows:
        out.append(
            {
                "name": name,
                "sets": {k: v for k, v in c.sets.items() if k.startswith(("nic.itr.", "nic.napi."))},
                "feasible": search.feasible(plan, c),
                "error": c.error,
                "per_load": [
                    {"load_pps": plan.loads[i], "feasible": search.feasible_at(plan, c, i), **{m: _num(v) for m, v in c.per_load[i].items()}}
                    for i in range(len(plan.loads))
                ],
            }
        )
    return out


def _assumed(chosen: Mapping[str, str], data: dict, changed: Sequence[str]) -> list:
    """The commands that set every other knob that applies to the scenario to the value the
    prediction assumes (today's, as the scenario has it): a host set otherwise (another
    ``rx-usecs``, ring or budget) is not the host predicted."""
    try:
        every = _select_knobs(None, data)
    except KnobError:
        return []
    return every.commands(chosen, data, only=[k.name for k in every.knobs if k.name not in changed])
