"""Text output: aligned tables, human units, and files written all-or-nothing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Sequence


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one,
    never a half-written one (write to a temporary file beside it, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def table(rows: Sequence[Sequence[object]], header: Sequence[str], align: str | None = None) -> str:
    """A plain aligned table. ``align`` has one letter per column: l or r (default: text
    left, numbers right)."""
    cells = [[str(c) for c in r] for r in rows]
    if align is None:
        align = "".join("r" if rows and isinstance(rows[0][i], (int, float)) else "l" for i in range(len(header)))
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]

    def fmt(r):
        return "  ".join(c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(r, widths, align)).rstrip()

    lines = [fmt(header), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def si(value: float, unit: str, digits: int = 3) -> str:
    """``si(1.6683e6, "pps")`` -> ``"1.668 Mpps"``."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}f} {prefix}{unit}"
    return f"{value:.{digits}f} {unit}"


def bytes_h(n: float) -> str:
    for factor, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= factor:
            return f"{n / factor:.1f} {name}"
    return f"{n:.0f} B"
