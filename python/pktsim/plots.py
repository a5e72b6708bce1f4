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
    part: tuple[int, int] = (0, 1),
):
    """The figures of a sweep table, right for its grid.

    x is the swept key (numerically, in its unit) unless the sweep is over the offered load
    (then the offered load); every other swept key (and a `variant`) is a line of its own,
    colour first, then line style; replications are the mean with a 95% confidence band;
    `hue` (a column or several) chooses the lines instead (other keys are then averaged
    over); `capacity_pps` (the model's loss-free capacity) is marked when x is the load. Interrupt
    and poll panels that are zero throughout (server mode, busy polling) are left out. Returns
    ``{name: (path, figure)}`` for the files written (fmt: png, svg or pdf); with ``part``
    (k, n), only every n-th figure from the k-th."""
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
    drawable = 0
    for name, series in panels.items():
        # Interrupts and polls that are zero throughout (server, busy-poll) get no panel.
        series = [(col, lab, sc) for col, lab, sc in series if col in ok and ok[col].dtype.kind in "fi" and (name != "irq_polls" or ok[col].abs().sum() > 0)]
        if not series:
            continue
        drawable += 1
        if (drawable - 1) % part[1] != part[0]:
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
    """The figures of a sweep table (see :func:`sweep_figures`), as a list of paths: every
    other one drawn by a child forked for the purpose, on the other CPU (:mod:`pktsim.forked`),
    once matplotlib is imported (an import in each process would cost more than it gains)."""
    from .forked import Forked

    args = (df, directory, x, fmt, dpi, size, capacity_pps, hue)
    _plt()

    def theirs():
        return {name: p for name, (p, _) in sweep_figures(*args, part=(1, 2)).items()}

    with Forked(theirs) as child:
        drawn = {name: p for name, (p, _) in sweep_figures(*args, part=(0, 2) if child.started else (0, 1)).items()}
        if child.started:
            ok, got = child.result()
            drawn.update(got if ok else theirs())
    order = [*PANELS, "per_class_latency"]
    return [drawn[name] for name in sorted(drawn, key=order.index)]
