"""What every pktsim figure shares: log axes labelled with plain numbers, legend titles
from the keys, and bands kept to what a quantity can be."""

from __future__ import annotations


def plain_log(ax, which: str = "y") -> None:
    """Label a log axis with plain numbers (``0.5``, ``2``, ``400``, not ``5×10^-1``), once
    its data are drawn: over at most about a decade the minor ticks are labelled too (2 to
    9 times a power of ten), over two and a half decades those at 2 and 5, so that every
    axis has a labelled tick near its data."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    base = getattr(axis.get_transform(), "base", 10)

    def plain(v, _pos=None):
        if v <= 0:
            return ""
        return f"{v:g}" if 1e-4 <= v < 1e6 else f"{v:.0e}"

    axis.set_major_formatter(FuncFormatter(plain))
    if base != 10:
        axis.set_minor_formatter(NullFormatter())
        return
    lo, hi = sorted(axis.get_view_interval())
    if lo <= 0 or hi <= 0:
        return
    span = math.log10(hi / lo)
    keep = set(range(2, 10)) if span <= 1.2 else {2, 5} if span <= 2.5 else set()

    def minor(v, _pos=None):
        mantissa = round(v / 10 ** math.floor(math.log10(v) + 1e-9))
        return plain(v) if mantissa in keep else ""

    axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10))))
    axis.set_minor_formatter(FuncFormatter(minor) if keep else NullFormatter())


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
