"""``pktsim testbed tune-check DIR``: apply what ``pktsim tune`` recommends to the kernel
and measure whether it improves what the model said it would.

1. :func:`load` reads and checks ``DIR/tune.json`` (the target load, the objectives and
   constraints, the recommended and the current sets with the model's predictions).
2. :func:`plan` maps the sets that differ between current and recommended onto the
   testbed's dut for the chosen path (:data:`KNOBS`): the ingress veth's
   ``napi_defer_hard_irqs`` and ``gro_flush_timeout`` (sysfs), the global sysctls
   ``net.core.netdev_budget``, ``netdev_budget_usecs`` and ``gro_normal_batch``, and on
   ``--path afxdp`` the forwarder's batch size. A key the path cannot apply is refused
   (:class:`Refused`, exit 2) with what the path can apply.
3. :func:`measure` measures the dut at the target load, current and tuned alternating
   (current, tuned, current, tuned, ...) for a few rounds, each a ``runner.repeat``; every
   knob gets back the value it had before on every way out (the sysctls are also written
   into the testbed's lock record, so that the next run restores them after a SIGKILL).
4. :func:`compare` holds the measured improvement of each objective and constraint
   metric against the predicted one: ``improvement = (tuned - current) / current``
   (signed), ``ratio = measured / predicted improvement``; the goal is the measured
   improvement within 25% of the predicted one (``0.75 <= ratio <= 1.25``).

Metrics (:data:`METRICS`) are keys of the ``pktsim run --json`` object, each with its
testbed counterpart. ``cpu_utilization`` is the dut CPU's share spent by the NAPI thread
(and the forwarder on ``afxdp``); the model's counterpart leaves out
``cpu_by_activity.interference`` (time the CPU spent elsewhere, which the thread's
runtime does not contain). veth has no interrupts: ``irq_per_s`` is held against the NAPI
thread's wake-ups per second.

Reading tune.json and its metrics is :mod:`~pktsim.testbed.tunefile`, the dut's knobs
:mod:`~pktsim.testbed.dutknobs`; measuring, comparing and the text and figure are here,
which also gives those modules' names.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from ..reproduce.rows import row, summary
from . import runner
from .dutknobs import AFXDP_BATCH, KNOBS, NOT_ON_VETH, Applied, Change, DutKnob, batch_of, plan, read_knob, write_knob
from .errors import TestbedError
from .tunefile import ALIASES, CONTEXT, METRICS, OPS, Metric, Refused, _num, _show, load, lookup

__all__ = [
    "run",
    "load",
    "plan",
    "measure",
    "compare",
    "text",
    "plot",
    "Refused",
    "lookup",
    "OPS",
    "Metric",
    "METRICS",
    "ALIASES",
    "CONTEXT",
    "DutKnob",
    "KNOBS",
    "NOT_ON_VETH",
    "AFXDP_BATCH",
    "Change",
    "batch_of",
    "read_knob",
    "write_knob",
    "Applied",
    "SOURCE",
    "GOAL",
    "PATHS",
    "ROUNDS",
    "MAX_SHARE",
    "model_capacity",
    "t95",
    "stats",
    "improvement",
    "compare_metric",
    "BURSTY_FRAMES_PER_SEND",
    "offered_traffic",
    "fmt",
]

SOURCE = "testbed"
GOAL = 0.25  # the measured improvement within this share of the predicted one
PATHS = ("stack", "defer", "afxdp")
ROUNDS = (3, 2)  # (full, quick) rounds of current + tuned
# Measured below this share of the dut's capacity: a load above it is refused (see --load-share).
MAX_SHARE = 0.98


# ------------------------------------------------------------------------------ measuring


def model_capacity(tune: dict) -> float:
    """The model's saturation rate (pps) for the tune's scenario and base sets with the
    current sets: the throughput when offered five times the target load."""
    from .. import sim
    from ..scenario import Scenario

    try:
        sc = Scenario.load(tune["scenario"], [tuple(s.split("=", 1)) for s in tune.get("sets", [])])
        sc = sc.with_sets({**tune["current"]["sets"], "traffic.rate": f"{5 * tune['load_pps']:.3f}pps"})
    except (OSError, ValueError) as e:
        raise Refused(f"{tune.get('_file', 'tune.json')}: scenario = {_show(tune['scenario'])}: cannot run it for --load-share ({e})") from None
    return float(sim.run(sc)["throughput_pps"])


def measure(topo, path: str, tune: dict, changes: list[Change], rounds: int, duration_s: float, reps: int, load_share: bool = False, progress=None) -> dict:
    """Capacity, then ``rounds`` x (current, tuned) at the target load; every knob back to
    its value before on every way out."""
    from . import afxdp

    applied = Applied(topo, changes)
    try:
        applied.set("current")
        batches = {s: batch_of(changes, s, tune) for s in ("current", "tuned")} if path == "afxdp" else {}
        cap = _capacity(topo, path, batches.get("current"))
        cap_pps = cap["forwarded_pps"]
        model_cap = model_capacity(tune) if load_share else None
        rate = tune["load_pps"] / model_cap * cap_pps if load_share else tune["load_pps"]
        if rate > MAX_SHARE * cap_pps:
            how = (
                (
                    f"{tune['load_pps'] / 1e3:.1f} kpps is {100 * tune['load_pps'] / model_cap:.0f}% of the model's capacity "
                    f"{model_cap / 1e3:.1f} kpps, {rate / 1e3:.1f} kpps here"
                )
                if load_share
                else f"the target load {tune['load_pps'] / 1e3:.1f} kpps"
            )
            raise Refused(
                f"{how}: above {100 * MAX_SHARE:.0f}% of the dut's measured capacity {cap_pps / 1e3:.1f} kpps (current settings); "
                + ("" if load_share else "--load-share measures at the same share of the dut's capacity as the target is of the model's")
            )
        plan_ = [(k, side) for k in range(rounds) for side in ("current", "tuned")]
        out = {"current": [], "tuned": []}
        for i, (k, side) in enumerate(plan_):
            if progress:
                progress(i, len(plan_), f"round {k + 1} of {rounds}: {side}, {rate / 1e3:.1f} kpps")
            applied.set(side)
            run_id = 1000 + 10 * i
            if path == "afxdp":
                with afxdp.forwarder(topo, batches[side], "sleep", reps * (duration_s + 3) + 10, loops=topo.xdp_loops) as fwd:
                    runs = [runner.measure(topo, rate, duration_s, run_id=run_id + j, app_pid=fwd.pid) for j in range(reps)]
                r = runner.summarize(runs, rate, duration_s)
                r["forwarder"] = fwd.result
            else:
                r = runner.repeat(topo, rate, duration_s, reps, run_id=run_id)
            r["round"] = k
            out[side].append(r)
    finally:
        applied.restore()
    return {
        "capacity_pps": cap_pps,
        "capacity_probe": cap,
        "model_capacity_pps": model_cap,
        "load_share": load_share,
        "rate_pps": rate,
        "before": applied.before,
        "batches": batches,
        **out,
    }


def _capacity(topo, path: str, batch: int | None) -> dict:
    if path != "afxdp":
        return runner.capacity(topo)
    from . import afxdp

    with afxdp.forwarder(topo, batch, "sleep", 20, loops=topo.xdp_loops) as fwd:
        runner.measure(topo, None, runner.WARMUP_S, run_id=998, app_pid=fwd.pid)
        return runner.measure(topo, None, 1.0, run_id=999, app_pid=fwd.pid)


# Two-sided 95% Student t quantiles by degrees of freedom (for more than 30, 1.96 is close enough).
# ------------------------------------------------------------------------------ comparing


_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    25: 2.060,
    30: 2.042,
}


def t95(df: int) -> float:
    keys = [k for k in _T95 if k <= df]
    return _T95[max(keys)] if df <= 30 else 1.96


def stats(values: list[float]) -> dict:
    """Mean, the 95% confidence interval's half-width (None for one value), min and max."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "ci95": None, "min": None, "max": None, "n": 0}
    mean = statistics.fmean(vals)
    ci = t95(len(vals) - 1) * statistics.stdev(vals) / math.sqrt(len(vals)) if len(vals) > 1 else None
    return {"mean": mean, "ci95": ci, "min": min(vals), "max": max(vals), "n": len(vals)}


def improvement(current: float | None, tuned: float | None) -> float | None:
    """(tuned - current) / current, signed (None where current is 0 or either is missing)."""
    if current is None or tuned is None or current == 0:
        return None
    return (tuned - current) / current


def compare_metric(metric: str, m: Metric, pred_cur: dict, pred_tun: dict, cur: list[dict], tun: list[dict]) -> dict:
    """One metric: predicted and measured, current and tuned, and the improvements; the
    measured improvement is the ratio of the means less 1, its interval from the paired
    rounds' improvements."""
    pc, pt = m.predicted(pred_cur), m.predicted(pred_tun)
    mc = stats([m.measured(p) for p in cur])
    mt = stats([m.measured(p) for p in tun])
    paired = [improvement(m.measured(a), m.measured(b)) for a, b in zip(cur, tun)]
    pi = improvement(pc, pt)
    mi = improvement(mc["mean"], mt["mean"])
    mis = stats(paired)
    ratio = mi / pi if mi is not None and pi not in (None, 0) else None
    return {
        "metric": metric,
        "label": m.label,
        "unit": m.unit,
        "scale": m.scale,
        "predicted_current": pc,
        "predicted_tuned": pt,
        "predicted_improvement": pi,
        "measured_current": mc,
        "measured_tuned": mt,
        "measured_improvement": mi,
        "measured_improvement_ci95": mis["ci95"],
        "measured_improvement_rounds": paired,
        "ratio": ratio,
        "within_goal": None if ratio is None else abs(ratio - 1) <= GOAL,
    }


def compare(tune: dict, ms: dict) -> dict:
    """Rows (the ``reproduce`` contract: measured in ``reported``, the model in
    ``predicted``) and the per-metric comparison, with the goal."""
    cur, tun = ms["current"], ms["tuned"]
    pc, pt = tune["current"]["predicted"], tune["recommended"]["predicted"]
    roles = [(o["metric"], "objective", f"{o['direction']} {o['metric']}") for o in tune["objectives"]]
    roles += [(c["metric"], "constraint", c.get("text") or f"{c['metric']} {c['op']} {c['bound']:g}") for c in tune["constraints"]]
    seen = set()
    metrics, rows = [], []
    for name, role, text in roles + [(k, "context", "") for k in CONTEXT]:
        if name in seen:
            continue
        seen.add(name)
        m = METRICS.get(name) if role != "context" else CONTEXT[name]
        try:
            c = compare_metric(name, m, pc, pt, cur, tun)
        except (KeyError, TypeError, ZeroDivisionError):
            continue  # a context figure the prediction does not carry
        c.update(role=role, text=text)
        for side, key in (("current", "predicted_current_ci95"), ("recommended", "predicted_tuned_ci95")):
            ci = (tune[side].get("ci95") or {}).get(name)  # the tune's interval over its replications
            c[key] = ci if _num(ci) else None
        if role == "constraint":
            con = next(x for x in tune["constraints"] if x["metric"] == name)
            got = c["measured_tuned"]["mean"]
            c["bound"] = con["bound"]
            c["holds_measured"] = None if got is None else OPS[con["op"]](got, con["bound"])
        metrics.append(c)
        s = c["scale"]
        fit = {"kind": "derived", "derived_from": "the model's cpu_utilization, less interference, over its throughput"} if name == "cpu_per_frame" else {}
        rows.append(row(f"{c['label']}, current", _sc(c["measured_current"]["mean"], s), _sc(c["predicted_current"], s), c["unit"], SOURCE, **fit))
        rows.append(row(f"{c['label']}, tuned", _sc(c["measured_tuned"]["mean"], s), _sc(c["predicted_tuned"], s), c["unit"], SOURCE, **fit))
        rows.append(
            row(
                f"{c['label']}, improvement (tuned vs current)",
                _sc(c["measured_improvement"], 100),
                _sc(c["predicted_improvement"], 100),
                "%",
                SOURCE,
                kind="derived",
                derived_from="(tuned - current) / current of the two rows above",
                role=role,
                ratio=c["ratio"],
                within_goal=c["within_goal"],
            )
        )
    goal = [c for c in metrics if c["role"] == "objective"]
    return {
        "rows": rows,
        "summary": summary(rows),
        "metrics": metrics,
        "goal": {
            "text": f"measured improvement within {100 * GOAL:.0f}% of the predicted one (0.75 <= measured / predicted <= 1.25)",
            "met": bool(goal) and all(c["within_goal"] for c in goal),
            "objectives": {c["metric"]: c["within_goal"] for c in goal},
        },
        "constraints_hold_measured": all(c.get("holds_measured") is not False for c in metrics if c["role"] == "constraint"),
    }


# Frames per send batch above which the generator offered bursts: on a quiet machine it
# sends 1.01 at 30% load and up to 1.36 at 90% (docs/validation-defer.json).
BURSTY_FRAMES_PER_SEND = 1.5


def offered_traffic(ms: dict) -> dict:
    """How the offered traffic looked across every run of the check: the generator's frames
    per send batch (about 1 on time; more when it ran late and caught up in bursts, which
    the kernel batches without deferral while the model's source keeps a constant rate),
    its longest lateness and the foreign load (CPUs); ``disturbed`` when other tasks used
    more than ``runner.FOREIGN_WARN`` of a CPU or the sends came in bursts."""
    runs = [x for side in ("current", "tuned") for p in ms[side] for x in p.get("runs", [])]
    fpb = [x["generator_frames_per_batch"] for x in runs if x.get("generator_frames_per_batch")]
    late = [x["generator_max_late_ns"] for x in runs if x.get("generator_max_late_ns") is not None]
    foreign = [x["foreign_cpu"] for x in runs if x.get("foreign_cpu") is not None]
    out = {
        "frames_per_send_batch": statistics.fmean(fpb) if fpb else None,
        "max_late_ns": max(late) if late else None,
        "foreign_cpu": statistics.fmean(foreign) if foreign else None,
    }
    out["disturbed"] = (out["foreign_cpu"] or 0.0) > runner.FOREIGN_WARN or (out["frames_per_send_batch"] or 0.0) > BURSTY_FRAMES_PER_SEND
    return out


def _sc(v, s):
    return None if v is None else v * s


def run(
    directory: str,
    path: str,
    rules: int,
    routes: int,
    quick: bool,
    duration_s: float | None,
    reps: int | None,
    rounds: int | None,
    load_share: bool = False,
    progress=None,
) -> dict:
    """The whole check: load and plan (refused before anything is built), build the
    path's topology, measure, compare."""
    from . import paths, validate

    tune = load(directory)
    changes = plan(tune, path)
    rounds = ROUNDS[quick] if rounds is None else rounds
    if not 1 <= rounds <= 20:
        raise Refused(f"--rounds {rounds}: expected from 1 to 20 rounds of current and tuned")
    try:  # every bound checked before anything is built
        duration_s, reps = validate.plan(quick, duration_s, reps)
        runner.check(tune["load_pps"] if not load_share else None, duration_s, reps)
        topo = paths.topology(path, rules, routes, None)
    except Refused:
        raise
    except TestbedError as e:
        raise Refused(str(e)) from None
    with topo:
        ms = measure(topo, path, tune, changes, rounds, duration_s, reps, load_share=load_share, progress=progress)
    setup = {"path": path, "duration_s": duration_s, "repetitions": reps, "rounds": rounds, "quick": quick, "load_share": load_share}
    setup.update(loops=topo.xdp_loops) if path == "afxdp" else setup.update(rules=rules, routes=routes)
    return {
        "paper": "testbed",
        "path": path,
        "title": f"pktsim tune's recommendation applied to the kernel ({path} path)",
        "tune": {k: tune.get(k) for k in ("scenario", "sets", "load_pps", "objectives", "constraints", "knobs")} | {"file": tune["_file"]},
        "changes": [
            {
                "key": c.key,
                "where": c.knob.where,
                "name": c.knob.name,
                "current": c.current_text,
                "tuned": c.tuned_text,
                "current_value": c.current,
                "tuned_value": c.tuned,
                "before_run": ms["before"].get(c.key),
            }
            for c in changes
        ],
        **compare(tune, ms),
        "offered_traffic": offered_traffic(ms),
        "setup": setup,
        "machine": validate.machine(),
        "measurements": ms,
    }


# ------------------------------------------------------------------------------ text and figure


def fmt(v, scale=1.0, digits=3) -> str:
    if v is None:
        return "-"
    x = v * scale
    return f"{x:.{digits}g}" if abs(x) < 10**digits else f"{x:.0f}"


def text(res: dict) -> str:
    """The comparison as a table: one line per metric."""
    from ..textio import table

    out = []
    for c in res["metrics"]:
        s = c["scale"]

        def meas(st, s=s):
            if st["mean"] is None:
                return "-"
            return fmt(st["mean"], s) + (f" +-{fmt(st['ci95'], s, 2)}" if st["ci95"] is not None else "")

        pct = lambda v: "-" if v is None else f"{100 * v:+.1f}%"  # noqa: E731
        mi = pct(c["measured_improvement"]) + (f" +-{100 * c['measured_improvement_ci95']:.1f}" if c["measured_improvement_ci95"] is not None else "")
        goal = "" if c["role"] != "objective" or c["within_goal"] is None else ("yes" if c["within_goal"] else "NO")
        if c["role"] == "constraint" and c.get("holds_measured") is not None:
            goal = "holds" if c["holds_measured"] else "VIOLATED"
        out.append(
            [
                f"{c['label']} [{c['unit']}]" if c["unit"] else c["label"],
                c["role"],
                fmt(c["predicted_current"], s),
                fmt(c["predicted_tuned"], s),
                pct(c["predicted_improvement"]),
                meas(c["measured_current"]),
                meas(c["measured_tuned"]),
                mi,
                "-" if c["ratio"] is None else f"{c['ratio']:.2f}",
                goal,
            ]
        )
    head = ["metric", "role", "pred current", "pred tuned", "pred change", "meas current", "meas tuned", "meas change", "meas/pred", "goal"]
    return table(out, head, "llrrrrrrrl")


def plot(res: dict, path: str | Path) -> None:
    """One panel per metric: predicted and measured (the mean over the rounds, with its 95%
    interval), current and tuned, in the metric's unit; each panel's title gives the two
    changes and measured / predicted."""
    from ..plots import _plt, _save

    plt = _plt()
    ms = res["metrics"]
    ncol = min(3, len(ms))
    nrow = -(-len(ms) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow + 0.6), squeeze=False)
    w = 0.38
    for ax, c in zip(axes.flat, ms):
        s = c["scale"]
        pred = [_sc(c["predicted_current"], s), _sc(c["predicted_tuned"], s)]
        meas = [_sc(c["measured_current"]["mean"], s), _sc(c["measured_tuned"]["mean"], s)]
        err = [_sc(c[k]["ci95"], s) or 0 for k in ("measured_current", "measured_tuned")]
        ax.bar([-w / 2, 1 - w / 2], [v or 0 for v in pred], w, color="C1", label="predicted (tune.json)")
        ax.bar([w / 2, 1 + w / 2], [v or 0 for v in meas], w, yerr=err, capsize=4, color="C0", label="measured (95% interval over rounds)")
        ax.set_xticks([0, 1])
        ax.set_xticklabels(["current", "tuned"])
        ax.set_ylabel(f"{c['label']} [{c['unit']}]" if c["unit"] else c["label"], fontsize=8)
        pct = lambda v: "-" if v is None else f"{100 * v:+.0f}%"  # noqa: E731
        ratio = "" if c["ratio"] is None else f" ({c['ratio'] + 0.0:.2f}x)"
        ax.set_title(f"{c['role']}: change pred {pct(c['predicted_improvement'])}, meas {pct(c['measured_improvement'])}{ratio}", fontsize=8)
        if c.get("bound") is not None:
            ax.axhline(c["bound"] * s, ls="--", color="C3", lw=1, label="constraint bound")
            ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(ms) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    t, m = res["tune"], res["measurements"]
    goal = "met" if res["goal"]["met"] else "NOT met"
    fig.suptitle(
        f"tune-check, {res['path']} path, measured at {m['rate_pps'] / 1e3:.1f} kpps (target {t['load_pps'] / 1e3:.1f} kpps): "
        f"goal (measured change within 25% of the predicted) {goal}",
        fontsize=9,
    )
    _save(fig, path)
