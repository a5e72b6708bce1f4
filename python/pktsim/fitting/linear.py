"""The costs that are linear in what a run counted: measured CPU per frame as a sum of
per-event costs times events per frame (a frame, a poll, a wake-up, a call). One least
squares serves every such calibration in pktsim (the testbed's paths); ``pktsim fit``
(:mod:`pktsim.fitting`) moves costs through the simulator where the events themselves
depend on them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations

import numpy as np


def costs(A, y, names: Sequence[str], kept: Iterable[str] = (), free: Iterable[str] = ()) -> dict[str, float]:
    """The least-squares costs ``x`` of ``A x ≈ y`` (a column of ``A`` per name): of the
    fits on each subset of the columns that holds every ``kept`` one, the closest whose
    costs are all at least 0 (those named in ``free`` may be negative); the costs left out
    are 0. With nothing kept this is the non-negative least squares; keeping the
    per-frame cost says a path always has one (a fit that would rather drop it is the
    data's noise). Exact: the subsets are enumerated (a calibration has a few columns).
    All 0 when no subset has such a fit."""
    A = np.asarray(A, dtype=float)
    y = np.asarray(y, dtype=float)
    names = list(names)
    kept_ = [n for n in names if n in set(kept)]
    rest = [n for n in names if n not in set(kept)]
    free = set(free)
    best: tuple[float, dict] | None = None
    for k in range(len(rest), -1, -1):
        for extra in combinations(rest, k):
            active = [n for n in names if n in kept_ or n in extra]
            if not active:
                continue
            cols = [names.index(n) for n in active]
            x, *_ = np.linalg.lstsq(A[:, cols], y, rcond=None)
            if any(v < 0 and n not in free for n, v in zip(active, x)):
                continue
            residual = float(np.sum((A[:, cols] @ x - y) ** 2))
            if best is None or residual < best[0] - 1e-12 * max(1.0, residual):
                best = (residual, dict(zip(active, map(float, x))))
    out = dict.fromkeys(names, 0.0)
    if best is not None:
        out.update(best[1])
    return out
