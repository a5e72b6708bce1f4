"""What a tune writes: the text report, ``tuned.toml`` (a scenario ``pktsim run`` takes as
it is), ``apply.sh`` (the commands for a Linux host), ``pareto.png`` and ``tune.json``."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..scenario import Scenario
from ..scenariofile import scenario_file
from ..textio import atomic_write, si, table
from . import goals
from .knobs import get_path as _get
from .knobs import same


def _fmt(metric: str, v, digits: int = 4) -> str:
    """A figure with its unit (``digits`` significant: 2 for a confidence half-width)."""
    if v is None or (isinstance(v, float) and (v != v or math.isinf(v))):
        return "-"
    u = goals.unit(metric)
    if u == "ns":
        return _time(v, digits)
    if u in ("pps", "bit/s"):
        return si(v, u, 3 if digits > 2 else 1)
    if u == "1/s":
        for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(v) >= factor:
                return f"{v / factor:.{digits}g} {prefix}/s"
        return f"{v:.{digits}g} /s"
    if u == "cores":
        return f"{v:.{digits}g} cores"
    return f"{v:.{digits}g}"


def _time(ns: float, digits: int = 4) -> str:
    for factor, name in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if abs(ns) >= factor:
            return f"{ns / factor:.{digits}g} {name}"
    return f"{ns:.{digits}g} ns"


def text(t: dict) -> str:
    """The report ``pktsim tune`` prints."""
    out = []
    s = t["search"]
    loads = ", ".join(_fmt("x_pps", x) for x in t["loads_pps"] if x is not None) or "the scenario's own load"
    goal = ", ".join(f"{o['direction']} {o['metric']}" for o in t["objectives"])
    cons = "; ".join(c["text"] for c in t["constraints"]) or "none"
    out.append(f"pktsim tune: {t['scenario']} at {loads}: {goal}, subject to {cons}")
    stopped = f"; stopped after {s['patience']} in a row gained nothing" if s.get("converged") else ""
    raced = f", {s['raced']} run once (no chance left after one run)" if s.get("raced") else ""
    out.append(
        f"searched {s['evaluated']} candidates ({s['mode']}; space {s['space'] if s['space'] else 'larger than the budget'}, budget {s['budget']}{stopped}), "
        f"{s['replications']} replication(s) each, {s['pruned']} stopped early{raced}, {s['feasible']} meet the constraints"
    )
    rec, cur = t["recommended"], t["current"]
    if rec is None:
        out.append("")
        out.append(f"no recommendation: {t.get('why_none', 'no candidate meets the constraints')}")
    else:
        keys = list(dict.fromkeys([*cur["sets"], *rec["sets"]]))
        rows = []
        for k in keys:
            a, b = cur["sets"].get(k), rec["sets"].get(k)
            unchanged = a is not None and b is not None and same(k, a, b)
            rows.append((k, a or "(does not matter)", "(as today)" if unchanged else (b or "(does not matter)")))
        out.append("")
        out.append(table(rows, ["key", "today", "recommended"]))
        metrics = [o["metric"] for o in t["objectives"]] + [c["metric"] for c in t["constraints"]]
        for extra in ("throughput_pps", "loss_ratio", "latency_ns.p50", "latency_ns.p99", "cpu_cores", "irq_per_s"):
            if extra not in metrics:
                metrics.append(extra)
        where = f" at {_fmt('x_pps', rec['load_pps'])}" if rec.get("load_pps") else ""
        rows = []
        for m in metrics:
            a, b = _metric(cur, m), _metric(rec, m)
            ca, cb = (cur.get("ci95") or {}).get(m), (rec.get("ci95") or {}).get(m)
            change = f"{(b - a) / abs(a):+.1%}" if a and b is not None and a == a and b == b else "-"
            rows.append((m, _fmt(m, a) + (f" ± {_fmt(m, ca, 2)}" if ca else ""), _fmt(m, b) + (f" ± {_fmt(m, cb, 2)}" if cb else ""), change))
        if t["constraints"]:
            rows.append(("meets the constraints", "yes" if cur.get("feasible") else "no", "yes" if rec.get("feasible") else "no", ""))
        out.append("")
        out.append(f"predicted{where} (mean ± 95% CI over replications):")
        out.append(table(rows, ["figure", "today", "recommended", "change"]))
        out.append("")
        if t["commands"]:
            out.append("apply (DEV: the device):")
            out.extend("  " + c for c in t["commands"])
        else:
            out.append("nothing to change: today's configuration is the recommendation")
        if t.get("assumed"):
            out.append(f"(apply.sh also sets the {len(t['assumed'])} other settings the prediction assumes, as the scenario has them)")
        if s.get("put_back"):
            out.append("kept as today (changing them gains no more than noise): " + ", ".join(s["put_back"]))
    if len(t["loads_pps"]) > 1:
        out.append("")
        rows = []
        for r in t["by_load"]:
            row = [_fmt("x_pps", r["load_pps"]), "yes" if r["any_feasible"] else "NO"]
            for name in ("current", "recommended"):
                if name in r:
                    row.append(
                        ("met" if r.get(name + "_feasible") else "missed")
                        + " "
                        + ", ".join(_fmt(m, r[name].get(m)) for m in [o["metric"] for o in t["objectives"]])
                    )
                else:
                    row.append("-")
            rows.append(row)
        out.append("by load (constraints met? objective):")
        out.append(table(rows, ["load", "any config meets them", "today", "recommended"]))
        if t["infeasible_loads"]:
            out.append(
                "no configuration meets the constraints at "
                + ", ".join(_fmt("x_pps", x) if x is not None else "the scenario's own load" for x in t["infeasible_loads"])
            )
    if t["alternatives"]:
        out.append("")
        out.append("moderation alternatives, every other key as recommended (objective at each load; * = constraints missed):")
        m0 = t["objectives"][0]["metric"]
        m1 = t["constraints"][0]["metric"] if t["constraints"] and t["constraints"][0]["metric"] != m0 else None
        rows = []
        for a in t["alternatives"]:
            cells = [
                (_fmt(m0, p.get(m0)) + (f", {m1.split('.')[-1]} {_fmt(m1, p.get(m1))}" if m1 else "") + ("" if p["feasible"] or not t["constraints"] else " *"))
                for p in a["per_load"]
            ]
            rows.append([a["name"], ", ".join(f"{k}={v}" for k, v in a["sets"].items()), *cells])
        out.append(table(rows, ["alternative", "sets", *[_fmt("x_pps", x) if x else "load" for x in t["loads_pps"]]]))
    if t["sensitivity"]:
        out.append("")
        out.append(
            "what mattered (share in reaching the best tenth of "
            + t["objectives"][0]["metric"]
            + "): "
            + ", ".join(f"{k} {v:.0%}" for k, v in sorted(t["sensitivity_keys"].items(), key=lambda kv: -kv[1]))
        )
    return "\n".join(out)


def _metric(cfg: dict, m: str):
    p = cfg.get("predicted")
    if not p:
        return None
    try:
        return goals.value(p, m)
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def tuned_toml(t: dict, scenario: Scenario, out_dir: Path) -> str:
    """The scenario file with the recommended values (and the target load) set: the user's
    own tables and keys; the tuned keys, as recommended (a tuned key the recommendation
    leaves out, e.g. the interval of an adaptive ITR, is removed); the ``--set`` overrides
    the tune ran with."""
    from . import base_for, without

    rec = t["recommended"]
    tuned_keys = t["keys"]
    tuned_sets = list(rec["sets"].items())
    load_set = [("traffic.rate", f"{t['load_pps']:.12g}pps")] if t.get("load_pps") else []
    if t.get("node") is not None:
        return _tuned_chain(t, scenario, out_dir, base_for(scenario, tuned_keys, t["node"]), tuned_sets, load_set)
    tuned_sets += load_set
    tuned = without(scenario, tuned_keys).with_sets(tuned_sets)
    return scenario_file(scenario, tuned_keys, tuned_sets, tuned, _header(t, scenario), out_dir / "tuned.toml")


def _header(t: dict, scenario: Scenario) -> list:
    rec = t["recommended"]
    where = f" (node {t['node']})" if t.get("node") is not None else ""
    head = [
        f"# {scenario.origin}{where} tuned by pktsim tune",
        "#   "
        + ", ".join(f"{o['direction']} {o['metric']}" for o in t["objectives"])
        + (", subject to " + "; ".join(c["text"] for c in t["constraints"]) if t["constraints"] else ""),
    ]
    for k in dict.fromkeys([*t["current"]["sets"], *rec["sets"]]):
        head.append(f"#   {k} = {rec['sets'].get(k, '(left out: it does not matter)')} (was {t['current']['sets'].get(k, 'not set')})")
    return head


def _tuned_chain(t: dict, scenario: Scenario, out_dir: Path, base_prefix: tuple, tuned_sets: list, load_set: list) -> str:
    """A chain's tuned file: the chain with the tuned node written inline (its scenario as
    the chain resolved it, the tuned keys as recommended)."""
    import os

    import tomli_w

    base, prefix = base_prefix
    node = t["node"]
    tuned = base.with_sets([(prefix + k, v) for k, v in tuned_sets] + load_set)
    doc = json.loads(base.text)
    for key, _ in tuned_sets:
        value = _get(tuned.data["nodes"][node], key)
        if value is None:
            continue
        *path, last = key.split(".")
        entry = doc["nodes"][node]
        for p in path:
            entry = entry.setdefault(p, {})
        entry[last] = value
    if load_set:
        doc.setdefault("traffic", {})["rate"] = _get(tuned.data["nodes"][0], "traffic.rate")
    for key, _value in scenario.sets:
        if not key.startswith("nodes."):  # chain-level overrides the tune ran with
            *path, last = key.split(".")
            entry = doc
            for p in path:
                entry = entry.setdefault(p, {})
            entry[last] = _get(tuned.data["nodes"][0], key)
    for entry in doc["nodes"]:
        f = entry.get("file")
        if isinstance(f, str) and not Path(f).is_absolute():
            entry["file"] = os.path.relpath(Path(scenario.base_dir, f).resolve(), out_dir.resolve())
    text_out = "\n".join(_header(t, scenario)) + "\n\n" + tomli_w.dumps(doc)
    back = Scenario.from_toml(text_out, origin=str(out_dir / "tuned.toml"), base_dir=out_dir)
    if json.dumps(back.data["nodes"], sort_keys=True) != json.dumps(tuned.data["nodes"], sort_keys=True):
        raise RuntimeError("tuned.toml does not read back as the tuned chain")
    return text_out


def _sh_quote(command: str) -> str:
    """A command as text inside a double-quoted shell string ($DEV still expands)."""
    return command.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")


def apply_sh(t: dict) -> str:
    rec = t["recommended"]
    lines = [
        "#!/bin/sh",
        f"# pktsim tune's recommendation for {t['scenario']}: " + ", ".join(f"{k}={v}" for k, v in rec["sets"].items()),
        "# Run as root on the host: sh apply.sh DEV   (lines starting with # are settings of the application)",
        "set -e",
        "DEV=${1:?usage: sh apply.sh DEV}",
    ]
    assumed = t.get("assumed") or []
    if any("$NAPI_ID" in c for c in [*t["commands"], *assumed]):
        lines.append("NAPI_ID=${NAPI_ID:?set NAPI_ID to the NAPI id of the queue (ynl --family netdev --dump napi-get)}")
    lines += ["", "# What the recommendation changes:"] + (t["commands"] or ["# (nothing: today's configuration is the recommendation)"])
    if assumed:
        lines += ["", "# What the prediction assumes and the recommendation keeps (the scenario's values):"]
        lines += ["# set here too, so that the host is the one predicted; a device that has no such setting"]
        lines += ["# (veth has no ethtool rings or channels) keeps its own, and the script says so."]
        lines += [c if c.startswith("#") else f'{c} || echo "apply.sh: not set on $DEV: {_sh_quote(c)}" >&2' for c in assumed]
    return "\n".join(lines) + "\n"


def pareto_png(t: dict, path: Path) -> None:
    """Every candidate evaluated on the two figures of the front, the front, today's
    configuration and the recommendation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = list(t["pareto"][0]["objectives"]) if t["pareto"] else [o["metric"] for o in t["objectives"]]
    li = t["loads_pps"].index(t["load_pps"]) if t.get("load_pps") in t["loads_pps"] else None
    fig, ax = plt.subplots(figsize=(7.5, 5))

    def xy(per_load):
        if li is not None:
            p = per_load[li]
            vals = [p.get(m) for m in metrics]
        else:
            vals = []
            for m in metrics:
                xs = [p.get(m) for p in per_load if p.get(m) is not None]
                vals.append(sum(xs) / len(xs) if xs else None)
        return vals

    def scale(m, v):
        u = goals.unit(m)
        return v / 1e3 if u == "ns" else v

    def label(m):
        u = goals.unit(m)
        return f"{m} [{'µs' if u == 'ns' else u}]" if u else m

    groups = {True: ([], []), False: ([], [])}
    for tr in t["trials"]:
        if tr["error"] or tr["pruned"]:
            continue
        vals = xy(tr["per_load"])
        if any(v is None for v in vals):
            continue
        g = groups[bool(tr["feasible"])]
        g[0].append(scale(metrics[0], vals[0]))
        g[1].append(scale(metrics[-1], vals[-1]))
    if groups[False][0]:
        ax.scatter(groups[False][0], groups[False][1], s=14, c="0.7", label="candidates missing a constraint")
    if groups[True][0]:
        ax.scatter(groups[True][0], groups[True][1], s=14, c="tab:blue", label="candidates meeting the constraints")
    if t["pareto"] and len(metrics) > 1:
        fx = [scale(metrics[0], f["objectives"][metrics[0]]) for f in t["pareto"]]
        fy = [scale(metrics[-1], f["objectives"][metrics[-1]]) for f in t["pareto"]]
        order = sorted(range(len(fx)), key=lambda i: fx[i])
        ax.plot([fx[i] for i in order], [fy[i] for i in order], "-", c="tab:blue", lw=1.2, label="Pareto front")
    for c in t["constraints"]:
        if c["metric"] == metrics[-1] and len(metrics) > 1:
            ax.axhline(scale(c["metric"], c["bound"]), ls="--", c="tab:red", lw=1, label=f"bound: {c['text']}")
        elif c["metric"] == metrics[0]:
            ax.axvline(scale(c["metric"], c["bound"]), ls="--", c="tab:red", lw=1, label=f"bound: {c['text']}")
    for name, cfg, style in (
        ("today", t["current"], dict(marker="X", c="black", s=110)),
        ("recommended", t["recommended"], dict(marker="*", c="tab:red", s=220)),
    ):
        if not cfg or not cfg.get("predicted"):
            continue
        vals = [_metric(cfg, m) for m in metrics]
        if li is None:
            tr = next((x for x in t["trials"] if x["sets"] == cfg["sets"]), None)
            if tr:
                vals = xy(tr["per_load"])
        if any(v is None for v in vals):
            continue
        if name == "today":
            text_label = "today (the scenario as it is)"
        else:
            diff = {k: v for k, v in cfg["sets"].items() if not (k in t["current"]["sets"] and same(k, t["current"]["sets"][k], v))}
            text_label = "recommended: " + (", ".join(f"{k.split('.')[-1]}={v}" for k, v in diff.items()) or "as today")
        ax.scatter([scale(metrics[0], vals[0])], [scale(metrics[-1], vals[-1])], zorder=5, label=text_label, **style)
    ys = groups[True][1] + groups[False][1]
    if ys and min(ys) > 0 and max(ys) / min(ys) > 30:
        ax.set_yscale("log")
    # A few costly candidates far along x would crowd the rest into the left edge: the
    # axis ends past most of them (and past today and the recommendation), and those
    # beyond are drawn on its edge as arrows, with how far they go.
    xs = sorted(groups[True][0] + groups[False][0])
    if len(xs) >= 5:
        keep = [scale(metrics[0], v) for v in (_metric(t["current"], metrics[0]), _metric(t["recommended"] or {}, metrics[0])) if v is not None]
        edge = max([xs[int(0.8 * (len(xs) - 1))], *keep])
        lo = xs[0]
        right = edge + 0.25 * max(edge - lo, 1e-12)
        if xs[-1] > right + 0.5 * (right - lo):
            beyond = [(x, y) for g in groups.values() for x, y in zip(*g) if x > right]
            ax.set_xlim(lo - 0.05 * (right - lo), right)
            ax.scatter([right] * len(beyond), [y for _, y in beyond], marker=">", s=40, c="0.3", clip_on=False, zorder=6)
            ax.annotate(
                f"{len(beyond)} beyond, up to {xs[-1]:.3g}",
                (0.96, 0.04),
                xycoords="axes fraction",
                ha="right",
                va="bottom",
                fontsize=7,
                color="0.3",
            )
    from ..figstyle import finish

    finish(fig)
    ax.set_xlabel(label(metrics[0]))
    ax.set_ylabel(label(metrics[-1]))
    where = f"at {si(t['load_pps'], 'pps')}" if t.get("load_pps") else "mean over the loads"
    ax.set_title(f"pktsim tune: {len(t['trials'])} candidates, {where}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)


class Drawer:
    """DIR/pareto.png drawn by a process forked when the tune starts (:mod:`pktsim.forked`):
    importing matplotlib (about 0.7 s) then happens while the search runs, on the CPU time
    its workers leave, not after it. Where it cannot, the figure is drawn here."""

    def __init__(self):
        from ..forked import Forked
        from ..plots import _plt

        self.child = Forked(warm=_plt)

    def draw(self, t: dict, path: Path) -> None:
        self.child.send(pareto_png, t, path)
        ok, _ = self.child.result()
        if not ok:
            pareto_png(t, path)  # here: its error, if any, is raised where the user sees it

    def close(self) -> None:
        self.child.close()


def write(t: dict, scenario: Scenario, out_dir: str | Path, drawer: Drawer | None = None) -> list:
    """Write DIR/tune.json, and with a recommendation DIR/tuned.toml, DIR/apply.sh,
    DIR/pareto.png (by ``drawer`` if given); returns the paths written."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    written = []
    doc = dict(t)
    doc["scenario"] = str(Path(scenario.origin).resolve()) if Path(scenario.origin).is_file() else scenario.origin
    atomic_write(d / "tune.json", json.dumps(doc, indent=1, allow_nan=False, default=_nan_none) + "\n")
    written.append(d / "tune.json")
    if t["recommended"]:
        atomic_write(d / "tuned.toml", tuned_toml(t, scenario, d))
        atomic_write(d / "apply.sh", apply_sh(t))
        (d / "apply.sh").chmod(0o755)
        written += [d / "tuned.toml", d / "apply.sh"]
    if drawer is not None:
        drawer.draw(t, d / "pareto.png")
    else:
        pareto_png(t, d / "pareto.png")
    written.append(d / "pareto.png")
    return written


def _nan_none(o):
    raise TypeError(f"not JSON: {type(o).__name__}")
