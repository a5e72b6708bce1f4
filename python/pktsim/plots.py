"""The standard pictures of the papers, from sweep tables (matplotlib; PNG or SVG by suffix).

Each function takes a pandas DataFrame whose rows are load points (a sweep over
``traffic.rate``, or a reproduction's curve) and writes one figure.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

from .textio import atomic_write


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str | Path) -> None:
    plt = _plt()
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png", dpi=110)
    plt.close(fig)
    atomic_write(path, buf.getvalue())


def throughput_vs_load(df, path, x: str = "offered_pps", title: str = "Throughput vs offered load") -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(df[x] / 1e6, df["throughput_pps"] / 1e6, "o-", label="forwarded")
    lim = max(df[x].max(), df["throughput_pps"].max()) / 1e6
    ax.plot([0, lim], [0, lim], ":", color="grey", label="offered")
    ax.set_xlabel("offered load [Mpps]")
    ax.set_ylabel("throughput [Mpps]")
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
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _save(fig, path)


def latency_vs_load(df, path, x: str = "offered_pps", percentiles: Sequence[str] = ("p25", "p50", "p75", "p99"), prefix: str = "latency_ns_", title: str = "Latency percentiles vs offered load") -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for p in percentiles:
        col = f"{prefix}{p}" if f"{prefix}{p}" in df else f"latency_{p}_ns"
        ax.plot(df[x] / 1e6, df[col] / 1e3, "o-", markersize=3, label=p)
    ax.set_yscale("log")
    ax.set_xlabel("offered load [Mpps]")
    ax.set_ylabel("latency [us]")
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    _save(fig, path)


def irq_and_polls_vs_load(df, path, x: str = "offered_pps", title: str = "Interrupts and polls vs offered load") -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(df[x] / 1e6, df["irq_per_s"] / 1e3, "o-", color="tab:red", label="IRQ rate")
    ax.set_xlabel("offered load [Mpps]")
    ax.set_ylabel("interrupts [k/s]", color="tab:red")
    ax2 = ax.twinx()
    ax2.plot(df[x] / 1e6, df["polls_per_packet"], "s--", color="tab:blue", label="polls per packet")
    ax2.set_ylabel("polls per packet", color="tab:blue")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _save(fig, path)


def per_class_latency(df, path, x: str, classes: Sequence[str], strategies: Sequence[str] | None = None, xlabel: str | None = None, title: str = "") -> None:
    """Mean latency per class (``<class>_mean_ns`` or ``per_class_<class>_latency_ns_mean``)
    against `x`, one line per class and strategy."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    groups = [(s, df[df["strategy"] == s]) for s in strategies] if strategies else [("", df)]
    styles = {"rt": "-", "nrt": "--"}
    for s, g in groups:
        for c in classes:
            col = f"{c}_mean_ns" if f"{c}_mean_ns" in g else f"per_class_{c}_latency_ns_mean"
            ax.plot(g[x], g[col] / 1e3, styles.get(c, "-"), marker="o", markersize=3, label=f"{s} {c}".strip())
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel("mean latency [us]")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    _save(fig, path)


def reported_vs_predicted(points, path, xlabel: str, ylabel: str, title: str = "", logx: bool = False) -> None:
    """`points`: {series: [(x, reported, predicted), ...]} - markers for the paper, lines for pktsim."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (name, pts) in enumerate(points.items()):
        color = f"C{i}"
        xs = [p[0] for p in pts]
        ax.plot(xs, [p[2] for p in pts], "-", color=color, label=f"{name} (pktsim)")
        ax.plot(xs, [p[1] for p in pts], "o", color=color, label=f"{name} (paper)")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
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


def sweep_plots(df, directory: str | Path, x: str | None = None) -> list[Path]:
    """The standard plots of a sweep table (replications averaged): load plots against
    offered load, and per-class mean latency against the swept key when the table has more
    than one class."""
    import re

    from .experiments import summarize

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    keys = [c for c in df.columns if "." in c]  # swept scenario keys, e.g. traffic.rate
    ok = df[df["status"] == "ok"] if "status" in df else df
    metrics = [c for c in ok.columns if c.endswith(("_pps", "_ratio", "_per_s", "_per_packet", "utilization")) or c.startswith(("latency_ns_", "per_class_"))]
    metrics = [m for m in metrics if m in ok and ok[m].dtype.kind in "fi"]
    mean = summarize(ok, keys, metrics)
    mean = mean.rename(columns={f"{m}_mean": m for m in metrics})
    x = x or ("offered_pps" if "traffic.rate" in keys or not keys else keys[0])
    mean = mean.sort_values(x) if x in mean else mean
    written = standard_load_plots(mean, d, "offered_pps")
    classes = sorted({m.group(1) for c in mean.columns if (m := re.match(r"per_class_(.+)_latency_ns_mean$", c))})
    if len(classes) > 1:
        xs = x if x in mean else keys[0]
        path = d / "per_class_latency.png"
        per_class_latency(mean, path, xs, classes, xlabel=xs, title="Mean latency per class")
        written.append(path)
    return written
