"""A fit's figure: for each fitted result, the measured values (hollow where the fit took
them, filled where pktsim predicted them) and pktsim's, against the measured
configuration."""

from __future__ import annotations

import io
from pathlib import Path

from ..textio import atomic_write
from ..values import numeric_value

# A result's axis: factor from the rows' unit, and the label.
LABELS = {
    "cpu_per_frame": "CPU per frame [µs]",
    "throughput_pps": "throughput [Mpps]",
    "handled_pps": "frames handled [Mpps]",
    "loss_ratio": "loss [%]",
    "cpu_utilization": "CPU [%]",
    "irq_per_s": "interrupts [k/s]",
    "irqs_per_packet": "interrupts per frame",
    "polls_per_packet": "polls per frame",
    "softirqs_per_packet": "softirqs per frame",
    "packets_per_poll": "frames per poll",
}
SCALE = {"throughput_pps": 1e-6, "handled_pps": 1e-6, "irq_per_s": 1e-3}


def _x_axis(f) -> tuple[str, list[float], bool]:
    """The first configuration key whose values are all numbers (its label with a unit),
    else the row number."""
    rows = sorted({r["data_row"] for r in f.rows})
    first = {r["data_row"]: r["config"] for r in f.rows}
    keys = list(first[rows[0]]) if rows else []
    for key in keys:
        vals = [numeric_value(key, first[i][key]) for i in rows]
        if all(v is not None for v in vals):
            if key == "traffic.rate":
                return "offered load [kpps]", [v / 1e3 for v in vals], True
            if any(w in key for w in ("t_", "interval", "timeout", "latency", "usecs")):
                return f"{key} [µs]", [v * 1e6 for v in vals], True
            return key, vals, True
    return "measured row", [float(i) for i in rows], False


def fit_figure(f, path: str | Path, fmt: str = "png", dpi: int = 300, size: tuple[float, float] = (3.5, 2.6)) -> None:
    """One panel per fitted result (see the module)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    metrics = list(dict.fromkeys(r["metric"] for r in f.rows))
    xlabel, xs, _ = _x_axis(f)
    x_of = dict(zip(sorted({r["data_row"] for r in f.rows}), xs))
    fig, axes = plt.subplots(1, len(metrics), figsize=(size[0] * len(metrics), size[1]), squeeze=False)
    for ax, name in zip(axes[0], metrics):
        rows = sorted((r for r in f.rows if r["metric"] == name), key=lambda r: x_of[r["data_row"]])
        unit = rows[0]["unit"]
        k = SCALE.get(name, 1.0)
        label = LABELS.get(name) or (f"{name.replace('latency_ns.', 'latency ')} [µs]" if unit == "us" else f"{name} [{unit}]" if unit else name)
        px = [x_of[r["data_row"]] for r in rows if r["predicted"] is not None]
        ax.plot(px, [r["predicted"] * k for r in rows if r["predicted"] is not None], "-", color="C0", marker=".", label="pktsim")
        for fitted, face in ((False, "black"), (True, "none")):
            pts = [r for r in rows if (r["kind"] == "fitted") == fitted]
            ax.plot([x_of[r["data_row"]] for r in pts], [r["reported"] * k for r in pts], "o", color="black", markerfacecolor=face, linestyle="none")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    handles = [
        Line2D([], [], color="C0", marker=".", label="pktsim (fitted values)"),
        Line2D([], [], color="black", marker="o", linestyle="none", label="measured, predicted"),
        Line2D([], [], color="black", marker="o", markerfacecolor="none", linestyle="none", label="measured, fitted on"),
    ]
    axes[0][-1].legend(handles=handles, fontsize=6, frameon=False)
    fig.suptitle("fitted: " + ", ".join(f"{v['key']} = {v['text']}" for v in f.free), fontsize=7)
    buf = io.BytesIO()
    fig.tight_layout()
    suffix = Path(path).suffix.lstrip(".").lower()
    fig.savefig(buf, format=suffix if suffix in ("png", "svg", "pdf") else fmt, dpi=dpi)
    plt.close(fig)
    atomic_write(path, buf.getvalue())
