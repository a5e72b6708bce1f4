"""The ``share`` path's figure (``pktsim testbed validate --path share --plot``, ``pktsim
testbed plot``): per variant, what the reader read and the dut CPU's split against the
offered load, measured and predicted. ``pktsim.testbed.plots`` hands it pyplot, its saver and the
figure's title."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def figure(res: dict, path: str | Path, plt, save: Callable, title: str) -> None:
    """``--path share``: per variant, the rate the reader reads and the dut CPU's split
    against the offered load, measured (points, min-max bars over the runs) and predicted
    (lines) with the model calibrated with the reader on the other CPU."""
    variants = res["measurements"]["variants"]
    fig, axes = plt.subplots(2, len(variants), figsize=(6 * len(variants), 8), squeeze=False)
    titles = {"softirq": "softirq: RPS backlog, NET_RX inline (Linux 6.5 on)", "threaded": "threaded NAPI, SCHED_OTHER nice 0"}
    contexts = (
        ("softirq", "softirq", "C3"),
        ("ksoftirqd", "ksoftirqd", "C4"),
        ("napi_threads", "NAPI thread", "C2"),
        ("app", "reader", "C0"),
        ("hardirq", "hard IRQs", "C7"),
    )
    for col, (name, v) in enumerate(variants.items()):
        pred = res["predictions"][name]
        pts = sorted(v["shared"], key=lambda p: p["offered_pps"])
        x = [p["offered_pps"] / 1e3 for p in pts]
        ax = axes[0][col]
        y = [p["read_pps"] / 1e3 for p in pts]
        lo = [yi - p["spread"]["read_pps"]["min"] / 1e3 for yi, p in zip(y, pts)]
        hi = [p["spread"]["read_pps"]["max"] / 1e3 - yi for yi, p in zip(y, pts)]
        ax.errorbar(x, y, yerr=[lo, hi], fmt="o", color="C0", capsize=3, label="measured, reader on the receiving CPU")
        fine = sorted(pred["fine"] + pred["points"], key=lambda q: q["offered_pps"])
        ax.plot(
            [q["offered_pps"] / 1e3 for q in fine],
            [q["read_pps"] / 1e3 for q in fine],
            "-",
            color="C1",
            label="pktsim, calibrated with the stack and the reader each alone on it",
        )
        top = max(x)
        ax.plot([0, top], [0, top], ":", color="grey", label="offered")
        for key, colour, what in (("measured_onset_pps", "C0", "measured"), ("onset_pps", "C1", "predicted")):
            if pred.get(key):
                ax.axvline(pred[key] / 1e3, ls="--", lw=1, color=colour, label=f"livelock onset, {what} ({pred[key] / 1e3:.0f} kpps)")
        ax.set_ylim(0, max(y + [q["read_pps"] / 1e3 for q in fine]) * 1.7)
        ax.set_ylabel("read by the reader [kpps]")
        ax.set_title(titles.get(name, name), fontsize=10)
        ax = axes[1][col]
        for key, what, colour in contexts:
            meas = [100 * p["cpu"][key] for p in pts]
            model = [100 * q["cpu"][key] for q in sorted(pred["points"], key=lambda q: q["offered_pps"])]
            if max(meas + model) < 0.5:
                continue
            ax.plot(x, meas, "o", color=colour, label=f"{what}, measured")
            ax.plot(x, model, "-", color=colour, label=f"{what}, pktsim")
        ax.set_ylim(0, 135)
        ax.set_yticks(range(0, 101, 20))
        ax.set_ylabel("share of the receiving CPU [%]")
    for a in axes.flat:
        a.set_xlabel("offered [kpps]")
        a.grid(alpha=0.3)
        a.legend(fontsize=7.5, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save(fig, path)
