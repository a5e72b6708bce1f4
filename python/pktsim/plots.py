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


def testbed_validation(res: dict, path: str | Path) -> None:
    """Measured (points, min-max bars over the runs) vs predicted (lines) for a
    ``pktsim testbed validate`` result: CPU per frame, forwarded rate, loss and latency
    medians against the offered load."""
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
    ax.set_ylabel("dut CPU per forwarded frame [us]")
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
    ax.set_ylabel("latency at dut egress [us]")
    for a in axes.flat:
        a.set_xlabel("offered [kpps]")
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    m = res.get("machine", {})
    setup = res.get("setup", {})
    fig.suptitle(f"pktsim testbed: measured vs predicted ({m.get('cpu_model', '?')}, {m.get('cpus', '?')} CPUs, Linux {m.get('kernel', '?')}; {setup.get('rules', '?')} nftables rules)", fontsize=10)
    _save(fig, path)
