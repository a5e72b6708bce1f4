"""What every pktsim figure shares: log axes labelled with plain numbers, legend titles
from the keys, and bands kept to what a quantity can be."""

from __future__ import annotations


def plain_log(ax, which: str = "y") -> None:
    """Label a log axis with plain numbers (``0.5``, ``2``, ``400``, not ``5×10^-1``), once
    its data are drawn, with labelled ticks near the data however narrow the range: over
    more than two and a half decades at the powers of ten, over more than about one at
    1, 2 and 5 times them, over less at 1, 1.5, 2, 3, 4, 5, 6 and 8 times them, and over a
    range too narrow for any of those (125 to 135) at round linear steps."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis

    def plain(v, _pos=None):
        if v <= 0:
            return ""
        return f"{v:g}" if 1e-4 <= v < 1e6 else f"{v:.0e}"

    axis.set_major_formatter(FuncFormatter(plain))
    axis.set_minor_formatter(NullFormatter())
    base = getattr(axis.get_transform(), "base", 10)
    lo, hi = sorted(axis.get_view_interval())
    if base != 10 or lo <= 0 or hi <= 0:
        return
    span = math.log10(hi / lo)
    subs = (1.0,) if span > 2.5 else (1.0, 2.0, 5.0) if span > 1.2 else (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)
    locator = LogLocator(base=10, subs=subs, numticks=30)
    inside = [t for t in locator.tick_values(lo, hi) if lo <= t <= hi]
    if len(inside) < 2:
        locator = MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10])
    axis.set_major_locator(locator)


def legend_title(keys) -> str:
    """The legend's title for lines told apart by ``keys`` (their values are the labels)."""
    return ", ".join(str(k) for k in keys)


# What a quantity can be, by its column: a band (a confidence interval) is cut there.
PHYSICAL = {"loss_ratio": (0.0, 100.0), "cpu_utilization": (0.0, 100.0)}


def clip_band(col: str, lo: list[float], hi: list[float]) -> tuple[list[float], list[float]]:
    """A band's edges kept to the quantity's range (loss and CPU in % within 0 to 100, and
    every count, rate and latency at least 0)."""
    a, b = PHYSICAL.get(col, (0.0, float("inf")))
    return [min(max(x, a), b) for x in lo], [min(max(x, a), b) for x in hi]


def finish(fig) -> None:
    """Before a figure is saved: every log axis labelled with plain numbers (its data are
    drawn by then)."""
    for ax in fig.axes:
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if axis.get_scale() == "log":
                plain_log(ax, which)
