"""The standard pictures of the papers, from sweep tables (matplotlib; PNG or SVG by suffix).

Each function takes a pandas DataFrame whose rows are load points (a sweep over
``traffic.rate``, or a reproduction's curve) and writes one figure.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from .figstyle import clip_band, finish, legend_title, plain_log
from .textio import atomic_write


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str | Path) -> None:
    plt = _plt()
    buf = io.BytesIO()
    finish(fig)
    fig.tight_layout()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png", dpi=200)
    plt.close(fig)
    atomic_write(path, buf.getvalue())


def _paper(ax, points, xscale: float, yscale: float, label: str = "paper") -> None:
    """The paper's own numbers, (x, y) in base units, as black crosses."""
    if points:
        ax.plot([p[0] * xscale for p in points], [p[1] * yscale for p in points], "kx", markersize=8, markeredgewidth=2, label=label, zorder=5)


def throughput_vs_load(df, path, x: str = "offered_pps", title: str = "", paper=None) -> None:
    """Forwarded vs offered rate; ``paper``: the paper's (offered, forwarded) points in pps."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(df[x] / 1e6, df["throughput_pps"] / 1e6, "o-", label="forwarded")
    _paper(ax, paper, 1e-6, 1e-6)
    lim = max(df[x].max(), df["throughput_pps"].max()) / 1e6
    ax.plot([0, lim], [0, lim], ":", color="grey", label="offered")
    ax.set_xlabel("offered load [Mpps]")
    ax.set_ylabel("throughput [Mpps]")
    if title:
        ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3)
    _save(fig, path)


def loss_vs_load(df, path, x: str = "offered_pps", title: str = "Loss vs offered load") -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(df[x] / 1e6, 100 * df["loss_ratio"], "o-")
    ax.set_xlabel("offered load [Mpps]")
    ax.set_ylabel("loss [%]")
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    _save(fig, path)


def latency_vs_load(
    df, path, x: str = "offered_pps", percentiles: Sequence[str] = ("p25", "p50", "p75", "p99"), prefix: str = "latency_ns_", title: str = "", paper=None
) -> None:
    """Latency percentiles vs offered load; ``paper``: the paper's (offered pps, latency ns) points."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for p in percentiles:
        col = f"{prefix}{p}" if f"{prefix}{p}" in df else f"latency_{p}_ns"
        ax.plot(df[x] / 1e6, df[col] / 1e3, "o-", markersize=3, label=p)
    _paper(ax, paper, 1e-6, 1e-3)
    ax.set_yscale("log")
    plain_log(ax)
    ax.set_xlabel("offered load [Mpps]")
    ax.set_ylabel("latency [µs]")
    if title:
        ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    _save(fig, path)


def irq_and_polls_vs_load(df, path, x: str = "offered_pps", title: str = "", paper_irq=None, paper_polls=None) -> None:
    """IRQ rate (left axis) and polls per packet (right) vs offered load; the paper's
    (offered pps, IRQ/s) and (offered pps, polls per packet) points as crosses."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(df[x] / 1e6, df["irq_per_s"] / 1e3, "o-", color="tab:red", label="IRQ rate")
    _paper(ax, paper_irq, 1e-6, 1e-3, "paper: IRQ rate")
    ax.set_xlabel("offered load [Mpps]")
    ax.set_ylabel("interrupts [k/s]", color="tab:red")
    ax2 = ax.twinx()
    ax2.plot(df[x] / 1e6, df["polls_per_packet"], "s--", color="tab:blue", label="polls per packet")
    if paper_polls:
        ax2.plot(
            [p[0] / 1e6 for p in paper_polls], [p[1] for p in paper_polls], "b+", markersize=10, markeredgewidth=2, label="paper: polls per packet", zorder=5
        )
    ax2.set_ylabel("polls per packet", color="tab:blue")
    if paper_irq or paper_polls:
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    _save(fig, path)


def per_class_latency(df, path, x: str, classes: Sequence[str], strategies: Sequence[str] | None = None, xlabel: str | None = None, title: str = "") -> None:
    """Mean latency per class (``<class>_mean_ns`` or ``per_class_<class>_latency_ns_mean``)
    against `x`, one line per class and strategy."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    groups = [(s, df[df["strategy"] == s]) for s in strategies] if strategies else [("", df)]
    # Colour is the strategy, line style the class.
    styles = ["-", "--", ":", "-."]
    for si_, (s, g) in enumerate(groups):
        for ci_, c in enumerate(classes):
            col = f"{c}_mean_ns" if f"{c}_mean_ns" in g else f"per_class_{c}_latency_ns_mean"
            ax.plot(
                g[x], g[col] / 1e3, styles[ci_ % len(styles)], color=f"C{si_ % 10}", marker="o", markersize=3, label=f"{s}, class {c}" if s else f"class {c}"
            )
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel("mean latency [µs]")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    _save(fig, path)


def reported_vs_predicted(points, path, xlabel: str, ylabel: str, title: str = "", logx: bool = False) -> None:
    """`points`: {series: [(x, reported, predicted[, fitted]), ...]} - markers for the
    paper (hollow where pktsim was fitted to that point), lines for pktsim; the legend
    beside the plot, where it hides no point."""
    plt = _plt()
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(7.5, 4))
    any_fitted = False
    for i, (name, pts) in enumerate(points.items()):
        color = f"C{i}"
        xs = [p[0] for p in pts]
        ax.plot(xs, [p[2] for p in pts], "-", color=color, label=f"{name} (pktsim)")
        fitted = [len(p) > 3 and p[3] for p in pts]
        any_fitted |= any(fitted)
        ax.plot([p[0] for p, f in zip(pts, fitted) if not f], [p[1] for p, f in zip(pts, fitted) if not f], "o", color=color, label=f"{name} (paper)")
        ax.plot([p[0] for p, f in zip(pts, fitted) if f], [p[1] for p, f in zip(pts, fitted) if f], "o", color=color, markerfacecolor="none")
    if logx:
        ax.set_xscale("log")
        plain_log(ax, "x")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    if any_fitted:
        handles.append(Line2D([], [], marker="o", color="gray", markerfacecolor="none", linestyle="none"))
        labels.append("paper, pktsim fitted to it")
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    ax.grid(alpha=0.3)
    _save(fig, path)


def standard_load_plots(df, directory: str | Path, x: str = "offered_pps") -> list[Path]:
    """Throughput, loss, latency and IRQ/poll plots of a load sweep, as PNG files."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = [d / "throughput.png", d / "loss.png", d / "latency.png", d / "irq_polls.png"]
    throughput_vs_load(df, out[0], x)
    loss_vs_load(df, out[1], x)
    latency_vs_load(df, out[2], x)
    irq_and_polls_vs_load(df, out[3], x)
    return out


UNITS = {"pps": (1e6, "Mpps"), "bit/s": (1e9, "Gbit/s"), "B": (1, "B"), "s": (1e-6, "us"), "Hz": (1e9, "GHz")}

# Metric columns: (column, y label, scale)
PANELS = {
    "throughput": [("throughput_pps", "throughput [Mpps]", 1e-6)],
    "loss": [("loss_ratio", "loss [%]", 100.0)],
    "latency": [("latency_ns_p50", "p50 latency [µs]", 1e-3), ("latency_ns_p99", "p99 latency [µs]", 1e-3)],
    "irq_polls": [("irq_per_s", "interrupts [k/s]", 1e-3), ("polls_per_packet", "polls per frame", 1.0)],
    "cpu": [("cpu_utilization", "CPU load [%]", 100.0)],
}


def _key_columns(df) -> list[str]:
    """The swept scenario keys (and `variant`): columns with a dot that are not a metric or
    a key's numeric twin."""
    keys = [c for c in df.columns if "." in c and not c.endswith("_value") and not c.startswith(("per_class_", "latency_"))]
    return (["variant"] if "variant" in df else []) + keys


def _numeric(df, key):
    """A key's values as numbers in base units (its `_value` twin), or None."""
    import pandas as pd

    if f"{key}_value" in df:
        return pd.to_numeric(df[f"{key}_value"], errors="coerce")
    v = pd.to_numeric(df[key], errors="coerce")
    return v if v.notna().all() else None


def _axis_label(key: str, values) -> tuple[str, float]:
    """Axis label with its unit, and the factor from base units to the axis."""
    if key == "offered_pps":
        return "offered load [Mpps]", 1e-6
    unit = None
    if key == "link.rate" or key.endswith("bps"):
        unit = "bit/s"
    elif "frequency" in key:
        unit = "Hz"
    elif key.endswith("rate") or key.startswith("traffic.rate"):
        unit = "pps"
    elif key.endswith(("size", "_ring", "weight", "budget", "flows", "cores", "routes", "_irqs", "quota")):
        return key, 1.0
    elif any(w in key for w in ("t_", "timeout", "interval", "latency", "slice", "warmup", "duration")):
        unit = "s"
    if unit and unit in UNITS:
        scale, shown = UNITS[unit]
        return f"{key} [{shown}]", 1.0 / scale
    return key, 1.0


def _ci95(values):
    import math

    from . import _core

    n = len(values)
    if n < 2:
        return 0.0
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    return _core.student_t95(n - 1) * sd / math.sqrt(n)


def sweep_figures(
    df,
    directory: str | Path,
    x: str | None = None,
    fmt: str = "png",
    dpi: int = 300,
    size: tuple[float, float] = (3.5, 2.6),
    capacity_pps: float | None = None,
    hue: str | Sequence[str] | None = None,
):
    """The figures of a sweep table, right for its grid.

    x is the swept key (numerically, in its unit) unless the sweep is over the offered load
    (then the offered load); every other swept key (and a `variant`) is a line of its own,
    colour first, then line style; replications are the mean with a 95% confidence band;
    `hue` (a column or several) chooses the lines instead (other keys are then averaged
    over); `capacity_pps` (the model's loss-free capacity) is marked when x is the load. Interrupt
    and poll panels that are zero throughout (server mode, busy polling) are left out. Returns
    ``{name: (path, figure)}`` for the files written (fmt: png, svg or pdf)."""
    import re

    plt = _plt()
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ok = df[df["status"] == "ok"] if "status" in df else df
    keys = _key_columns(ok)
    if x is None:
        x = "offered_pps" if (not keys or "traffic.rate" in keys) else next((k for k in keys if k != "variant"), keys[0])
    others = [k for k in keys if k != x and not (x == "offered_pps" and k == "traffic.rate")]
    if hue is not None:
        others = [hue] if isinstance(hue, str) else list(hue)
        missing = [h for h in others if h not in ok]
        if missing:
            raise ValueError(f"hue {', '.join(missing)}: no such column; expected one of {', '.join(keys) or 'the swept keys'}")
    if x == "offered_pps" and "traffic.rate" in keys:
        # The swept load (replications share it), not each run's measured offered rate.
        xnum = _numeric(ok, "traffic.rate")
        if xnum is None:
            xnum = ok.groupby("traffic.rate")["offered_pps"].transform("mean")
    elif x == "offered_pps":
        xnum = ok["offered_pps"]
    else:
        xnum = _numeric(ok, x)
    categorical = xnum is None
    if categorical:
        cats = list(dict.fromkeys(ok[x]))
        xnum = ok[x].map({c: i for i, c in enumerate(cats)})
    xlabel, xscale = _axis_label(x, xnum)
    work = ok.assign(_x=xnum * xscale)
    groups = list(work.groupby(others, sort=False)) if others else [((), work)]
    styles = ["-", "--", ":", "-."]
    panels = dict(PANELS)
    classes = sorted({m.group(1) for c in ok.columns if (m := re.match(r"per_class_(.+)_latency_ns_mean$", c))})
    if len(classes) > 1:
        panels["per_class_latency"] = [(f"per_class_{c}_latency_ns_mean", f"mean latency, {c} [µs]", 1e-3) for c in classes]
    written = {}
    for name, series in panels.items():
        # Interrupts and polls that are zero throughout (server, busy-poll) get no panel.
        series = [(col, lab, sc) for col, lab, sc in series if col in ok and ok[col].dtype.kind in "fi" and (name != "irq_polls" or ok[col].abs().sum() > 0)]
        if not series:
            continue
        fig, axes = plt.subplots(1, len(series), figsize=(size[0] * len(series), size[1]), squeeze=False)
        for ax, (col, ylabel, yscale) in zip(axes[0], series):
            # Colour for the first key, line style for the second; the legend's title
            # names the keys and its labels are their values.
            firsts = list(dict.fromkeys((k if isinstance(k, tuple) else (k,))[:1] for k, _ in groups))
            seconds = list(dict.fromkeys(k[1] for k, _ in groups if isinstance(k, tuple) and len(k) > 1))
            for gkey, g in groups:
                gkey = gkey if isinstance(gkey, tuple) else (gkey,)
                label = ", ".join(str(v) for v in gkey) or None
                stats = g.groupby("_x")[col].agg(list).sort_index()
                xs = list(stats.index)
                mean = [sum(v) / len(v) * yscale for v in stats]
                ci = [_ci95([u * yscale for u in v]) for v in stats]
                color = f"C{firsts.index(gkey[:1]) % 10}"
                style = styles[seconds.index(gkey[1]) % len(styles)] if len(gkey) > 1 and gkey[1] in seconds else "-"
                ax.plot(xs, mean, style, marker="o", markersize=3, color=color, label=label)
                if any(c > 0 for c in ci):
                    lo, hi = clip_band(col, [m - c for m, c in zip(mean, ci)], [m + c for m, c in zip(mean, ci)])
                    ax.fill_between(xs, lo, hi, color=color, alpha=0.2, linewidth=0)
            if name == "loss" and not ok[col].abs().sum():
                # No loss anywhere: a panel at 0, not one on a range of rounding noise.
                ax.set_ylim(-0.05, 1.0)
                ax.text(0.5, 0.5, "no loss at any point", transform=ax.transAxes, ha="center", va="center", fontsize=7, color="0.4")
            if capacity_pps and x == "offered_pps":
                ax.axvline(capacity_pps * xscale, color="grey", linestyle=":", linewidth=1, label="model capacity")
            if categorical:
                ax.set_xticks(range(len(cats)))
                ax.set_xticklabels(cats, rotation=20)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            if col.startswith("latency_") or col.startswith("per_class_"):
                ax.set_yscale("log")
                plain_log(ax)
            ax.grid(alpha=0.3)
        handles, labels = axes[0][0].get_legend_handles_labels()
        if labels:
            named = [h for h, lab in zip(handles, labels) if lab != "model capacity"]
            axes[0][-1].legend(fontsize=6, frameon=False, title=legend_title(others) if named and others else None, title_fontsize=6)
        path = d / f"{name}.{fmt}"
        buf = io.BytesIO()
        finish(fig)
        fig.tight_layout()
        fig.savefig(buf, format=fmt, dpi=dpi)
        atomic_write(path, buf.getvalue())
        written[name] = (path, fig)
        plt.close(fig)
    return written


def sweep_plots(
    df,
    directory: str | Path,
    x: str | None = None,
    fmt: str = "png",
    dpi: int = 300,
    size: tuple[float, float] = (3.5, 2.6),
    capacity_pps: float | None = None,
    hue=None,
) -> list[Path]:
    """The figures of a sweep table (see :func:`sweep_figures`), as a list of paths."""
    return [p for p, _ in sweep_figures(df, directory, x, fmt, dpi, size, capacity_pps, hue).values()]


def _testbed_title(res: dict) -> str:
    m, setup = res.get("machine", {}), res.get("setup", {})
    path = res.get("path", "stack")
    dial = {
        "xdp": f"native XDP redirect, program loop {setup.get('loops', '?')} turns",
        "defer": f"threaded NAPI with deferral, {setup.get('rules', '?')} nftables rules",
        "afxdp": f"AF_XDP copy mode, XSK program loop {setup.get('loops', '?')} turns",
        "share": f"a UDP reader on the receiving CPU, {setup.get('rules', '?')} nftables input rules",
    }.get(path, f"{setup.get('rules', '?')} nftables rules")
    # Two lines: one would be wider than the figure with a long CPU model or dial.
    return f"pktsim testbed --path {path}: measured vs predicted\n{m.get('cpu_model', '?')}, {m.get('cpus', '?')} CPUs, Linux {m.get('kernel', '?')}; {dial}"


def testbed_validation(res: dict, path: str | Path) -> None:
    """Measured (points, min-max bars over the runs) vs predicted (lines) for a
    ``pktsim testbed validate`` result: CPU per frame, forwarded rate, loss and latency
    medians against the offered load (against the deferral timeout for ``--path defer``)."""
    if res.get("path") == "defer":
        return _testbed_defer(res, path)
    if res.get("path") == "afxdp":
        return _testbed_afxdp(res, path)
    if res.get("path") == "share":
        from .testbed.shareplot import figure

        return figure(res, path, _plt(), _save, _testbed_title(res))
    plt = _plt()
    sw = res["measurements"]
    pts = sorted(sw["points"], key=lambda p: p["offered_pps"])
    preds = sorted(res["predictions"][: len(pts)], key=lambda p: p["offered_pps"])
    x = [p["offered_pps"] / 1e3 for p in pts]
    xp = [p["offered_pps"] / 1e3 for p in preds]
    fitted = set(res["calibration"].get("from_loads", []))

    def measured(ax, key, scale, sub=None):
        def val(p):
            v = p[key][sub] if sub else p[key]
            return None if v is None else v * scale

        ys = [val(p) for p in pts]
        lo, hi = [], []
        for p, y in zip(pts, ys):
            sp = p.get("spread", {}).get(f"{key}.{sub}" if sub else key)
            lo.append(0 if sp is None or y is None else y - sp["min"] * scale)
            hi.append(0 if sp is None or y is None else sp["max"] * scale - y)
        ax.errorbar(x, ys, yerr=[lo, hi], fmt="o", color="C0", capsize=3, label="measured")
        fx = [xi for xi, p in zip(x, pts) if p.get("load") in fitted]
        fy = [yi for yi, p in zip(ys, pts) if p.get("load") in fitted]
        ax.plot(fx, fy, "o", mfc="none", mec="k", ms=11, label="calibration loads (costs)")

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    ax = axes[0][0]
    measured(ax, "dut_ns_per_packet", 1e-3)
    ax.plot(xp, [p["dut_ns_per_packet"] / 1e3 for p in preds], "-", color="C1", label="pktsim")
    ax.set_ylabel("dut CPU per forwarded frame [µs]")
    ax = axes[0][1]
    measured(ax, "forwarded_pps", 1e-3)
    ax.plot(xp, [p["forwarded_pps"] / 1e3 for p in preds], "-", color="C1", label="pktsim")
    ax.plot([0, max(x)], [0, max(x)], ":", color="grey", label="offered")
    ax.set_ylabel("forwarded [kpps]")
    ax = axes[1][0]
    measured(ax, "loss_ratio", 100)
    ax.plot(xp, [100 * p["loss_ratio"] for p in preds], "-", color="C1", label="pktsim")
    ax.set_ylabel("loss [%]")
    ax = axes[1][1]
    measured(ax, "latency_ns", 1e-3, "p50")
    ax.plot(xp, [p["latency_ns"]["p50"] / 1e3 for p in preds], "-", color="C1", label="pktsim p50")
    ax.plot(x, [p["latency_ns"]["p99"] / 1e3 if p["latency_ns"]["p99"] else None for p in pts], "v", color="C2", label="measured p99")
    ax.plot(xp, [p["latency_ns"]["p99"] / 1e3 for p in preds], "--", color="C2", label="pktsim p99")
    ax.set_yscale("log")
    ax.set_ylabel("latency at dut egress [µs]")
    for a in axes.flat:
        a.set_xlabel("offered [kpps]")
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(_testbed_title(res), fontsize=10)
    _save(fig, path)


def _testbed_afxdp(res: dict, path: str | Path) -> None:
    """``--path afxdp``: CPU per frame and forwarding rate against the batch size, measured
    (min-max bars over the runs) and the batching law fitted at two batch sizes."""
    plt = _plt()
    pts = sorted(res["measurements"]["points"], key=lambda p: p["batch"])
    cal = res["calibration"]
    fitted = set(cal["from_batches"])
    b = [p["batch"] for p in pts]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))

    def measured(ax, key, scale):
        ys = [p[key] * scale if p[key] else None for p in pts]
        lo = [0 if not p.get("spread", {}).get(key) or y is None else y - p["spread"][key]["min"] * scale for p, y in zip(pts, ys)]
        hi = [0 if not p.get("spread", {}).get(key) or y is None else p["spread"][key]["max"] * scale - y for p, y in zip(pts, ys)]
        ax.errorbar(b, ys, yerr=[lo, hi], fmt="o", color="C0", capsize=3, label="measured")
        ax.plot([x for x in b if x in fitted], [y for x, y in zip(b, ys) if x in fitted], "o", mfc="none", mec="k", ms=11, label="calibration batch sizes")

    preds = {q["batch"]: q for q in res["predictions"]}
    ax = axes[0]
    measured(ax, "dut_ns_per_packet", 1e-3)
    ax.plot(
        b,
        [preds[x]["dut_ns_per_packet"] / 1e3 for x in b],
        "-",
        color="C1",
        label=f"t_frame + t_call / b ({cal['t_frame_ns'] / 1e3:.2f} + {cal['t_call_ns'] / 1e3:.2f} us / b)",
    )
    ax.set_ylabel("dut CPU per forwarded frame [µs]")
    ax = axes[1]
    measured(ax, "forwarded_pps", 1e-3)
    ax.plot(b, [preds[x]["forwarded_pps"] / 1e3 for x in b], "-", color="C1", label="pktsim (law)")
    ax.set_ylabel("forwarded, dut overloaded [kpps]")
    ax = axes[2]
    ax.plot(b, [p["frames_per_batch"] for p in pts], "o-", color="C0", label="frames per batch (forwarder)")
    ax.plot(b, [preds[x].get("frames_per_call") for x in b], "s--", color="C2", label="frames per sendto (at most 32)")
    ax.plot(b, b, ":", color="grey", label="batch size B")
    ax.set_yscale("log", base=2)
    ax.set_ylabel("frames [per batch, per call]")
    for a in axes:
        a.set_xscale("log", base=2)
        a.set_xlabel("batch size B [frames]")
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(_testbed_title(res), fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def _testbed_defer(res: dict, path: str | Path) -> None:
    """``--path defer``: each figure against gro_flush_timeout (0: deferral off), one
    colour per load; measured points (min-max bars over the runs), predicted lines."""
    plt = _plt()
    pairs = [(p, q) for p, q in zip(res["measurements"]["points"], res["predictions"]) if not p.get("calibration")]
    loads = sorted({p["load"] for p, _ in pairs})
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    panels = [
        (axes[0][0], "dut CPU per forwarded frame [µs]", lambda p: p["dut_ns_per_packet"] / 1e3 if p["dut_ns_per_packet"] else None, "dut_ns_per_packet", 1e-3),
        (axes[0][1], "frames per poll", lambda p: p["packets_per_poll"], "packets_per_poll", 1.0),
        (axes[1][0], "NAPI thread wake-ups per frame", lambda p: 1 / p["packets_per_wakeup"] if p["packets_per_wakeup"] else None, None, 1.0),
        (axes[1][1], "latency p50 at dut egress [µs]", lambda p: p["latency_ns"]["p50"] / 1e3 if p["latency_ns"]["p50"] else None, "latency_ns.p50", 1e-3),
    ]
    for ax, label, f, spread_key, scale in panels:
        for i, load in enumerate(loads):
            sel = sorted(((p, q) for p, q in pairs if p["load"] == load), key=lambda pq: pq[0]["gro_flush_timeout_ns"])
            x = [p["gro_flush_timeout_ns"] / 1e3 for p, _ in sel]
            ys = [f(p) for p, _ in sel]
            lo, hi = [], []
            for (p, _), y in zip(sel, ys):
                sp = p.get("spread", {}).get(spread_key) if spread_key else None
                lo.append(0 if sp is None or y is None else max(0.0, y - sp["min"] * scale))
                hi.append(0 if sp is None or y is None else max(0.0, sp["max"] * scale - y))
            kpps = sel[0][0]["offered_pps"] / 1e3 if sel else 0
            ax.errorbar(x, ys, yerr=[lo, hi], fmt="o", color=f"C{i}", capsize=3, label=f"measured, {100 * load:.0f}% load ({kpps:.0f} kpps)")
            ax.plot(x, [f(q) for _, q in sel], "-", color=f"C{i}", label=f"pktsim, {100 * load:.0f}% load")
        ax.set_ylabel(label)
        ax.set_xlabel("gro_flush_timeout [µs] (napi_defer_hard_irqs 2; 0: deferral off)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[1][1].set_yscale("log")
    cal = res.get("calibration", {})
    src = cal.get("t_timer_from")
    what = "calibrated with deferral off; every point here is predicted"
    if src:
        # The point the deferral timer's cost was fitted on: an open marker on the CPU panel.
        fit = [p for p, _ in pairs if p["load"] == src["load"] and p["gro_flush_timeout_ns"] == src["gro_flush_timeout_ns"]]
        for p in fit:
            axes[0][0].plot(
                [p["gro_flush_timeout_ns"] / 1e3], [p["dut_ns_per_packet"] / 1e3], "o", ms=12, mfc="none", color="k", label="fitted: the deferral timer's cost"
            )
        axes[0][0].legend(fontsize=7)
        what = (
            f"calibrated with deferral off, and the deferral timer's cost ({cal['t_timer_ns'] / 1e3:.1f} µs) on the CPU at "
            f"{src['gro_flush_timeout_ns'] / 1e3:.0f} µs and {100 * src['load']:.0f}% load (circled); every other point is predicted"
        )
    fig.suptitle(_testbed_title(res) + "\n" + what, fontsize=10)
    _save(fig, path)


def testbed_probe(res: dict, path: str | Path) -> None:
    """``pktsim testbed probe``: the gaps an idle spinning thread on the dut CPU saw — where
    they fall in the tick's period, and the distribution of their lengths (the tick's and
    the rest's) as a survival function."""
    import numpy as np

    plt = _plt()
    g = np.array(res["raw"].get("listed") or [], dtype=float).reshape(-1, 2)
    t = res.get("tick")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    ax = axes[0]
    if t and len(g):
        period = t["period_ns"]
        ax.hist((g[:, 0] % period) / 1e3, bins=100, color="C0")
        ax.set_xlabel(f"gap start within the tick period [µs] ({t['hz']} Hz)")
    ax.set_ylabel("gaps")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax = axes[1]
    if len(g):
        if t:
            per = t["period_ns"]
            starts = g[:, 0] % per
            mode = np.argmax(np.histogram(starts, bins=100, range=(0, per))[0])
            phase = (mode + 0.5) * per / 100
            d = np.abs(((starts - phase) / per + 0.5) % 1.0 - 0.5)
            groups = [("tick", g[d <= 0.02, 1], "C1"), ("the rest", g[d > 0.02, 1], "C2")]
        else:
            groups = [("all gaps", g[:, 1], "C0")]
        for name, lens, color in groups:
            if len(lens):
                x = np.sort(lens) / 1e3
                ax.step(x, 1 - np.arange(len(x)) / len(x), where="post", color=color, label=f"{name} ({len(x)} gaps, {len(x) / res['observed_s']:.0f}/s)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    ax.set_xlabel("gap length [µs]")
    ax.set_ylabel("share of gaps longer")
    ax.grid(alpha=0.3, which="both")
    raw = res["raw"]
    fig.suptitle(
        f"pktsim testbed probe: CPU {raw['cpu']} at SCHED_FIFO {raw['priority']}, {res['observed_s']:.1f} s observed, "
        f"{100 * res['stolen_share']:.2f}% of the CPU taken (gaps over {res['threshold_ns'] / 1e3:g} us)",
        fontsize=10,
    )
    fig.tight_layout()
    _save(fig, path)
