"""The figure of a run's time series (``pktsim run --plot``): how the offered load, the
interrupts and polls, the moderation interval, the frames per poll and the idle wake-ups
move over the window."""

from __future__ import annotations

from pathlib import Path

from .plots import _plt, _save


def time_series(r: dict, path: str | Path, title: str = "") -> None:
    """A run's time series (``measure.interval``) over the window, a panel each: offered and
    forwarded rate; interrupts and polls per second (polls the deferral timer started among
    them); the moderation interval the interrupts fired at (ITR, DIM's level) and the frames
    per poll; and the wake-ups from an idle state with their mean exit latency (which names
    the state) — so that a step of load shows how the policies react."""
    import numpy as np

    plt = _plt()
    series = r.get("series") or []
    step = r.get("series_interval_s") or 0.0
    if not series or step <= 0:
        raise ValueError("the run has no time series: set measure.interval (e.g. --set measure.interval=1ms)")
    t_ms = np.arange(len(series)) * step * 1e3
    col = lambda k: np.array([float(b.get(k, 0.0)) for b in series])  # noqa: E731
    per_s = lambda k: col(k) / step  # noqa: E731
    ratio = lambda a, b: np.divide(col(a), col(b), out=np.full(len(series), np.nan), where=col(b) > 0)  # noqa: E731
    fig, axes = plt.subplots(4, 1, figsize=(7.5, 9.0), sharex=True)
    # Counts per second, a line each (those marked optional only where they happened).
    for ax, (unit, scale, lines) in zip(
        axes[:2],
        [
            ("rate [Mpps]", 1e6, [("offered", "offered", False), ("forwarded", "forwarded", False), ("dropped", "dropped", True)]),
            ("events [k/s]", 1e3, [("irqs", "interrupts", False), ("polls", "polls", False), ("deferred_polls", "polls by the deferral timer", True)]),
        ],
    ):
        for key, label, optional in lines:
            if not optional or col(key).sum() > 0:
                ax.step(t_ms, per_s(key) / scale, where="post", label=label)
        ax.set_ylabel(unit)
        ax.legend(loc="best", fontsize=8)
    ax = axes[2]
    itr = ratio("itr_sum_ns", "irqs") / 1e3
    if np.nansum(itr) > 0:
        ax.step(t_ms, itr, where="post", color="C3", label="moderation interval at an interrupt")
        ax.set_ylabel("interval [µs]")
    else:
        ax.set_yticks([])
        ax.set_ylabel("no interrupt\nmoderation")
    twin = ax.twinx()
    twin.step(t_ms, ratio("rx_polled", "polls"), where="post", color="C4", label="frames per poll")
    twin.set_ylabel("frames per poll")
    lines = ax.get_lines() + twin.get_lines()
    ax.legend(lines, [x.get_label() for x in lines], loc="upper left", fontsize=7, framealpha=0.8)
    ax = axes[3]
    ax.step(t_ms, per_s("wakeups") / 1e3, where="post", color="C5", label="wake-ups from an idle state")
    ax.set_ylabel("wake-ups [k/s]")
    twin = ax.twinx()
    twin.step(t_ms, ratio("exit_latency_sum_ns", "wakeups") / 1e3, where="post", color="C6", label="mean exit latency")
    twin.set_ylabel("exit latency [µs]")
    lines = ax.get_lines() + twin.get_lines()
    ax.legend(lines, [x.get_label() for x in lines], loc="upper left", fontsize=7, framealpha=0.8)
    ax.set_xlabel("time in the window [ms]")
    fig.suptitle(title or f"{r.get('name', '')}: {step * 1e3:g} ms buckets", fontsize=10)
    _save(fig, path)
