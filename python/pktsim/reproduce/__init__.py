"""Reproductions of the seed papers: each returns predicted vs reported rows.

Contract (``pktsim reproduce PAPER --json``)::

    {"paper": "...", "rows": [{"quantity": "...", "reported": x, "predicted": y,
                               "rel_error": e, "unit": "...", "source": "..."}]}

Rows may carry ``fitted: true`` (the value was used to fit a parameter, so its error says
how well the fit closes, not how well pktsim predicts) and ``holds`` (for relations).
"""

from __future__ import annotations

from typing import Callable

from . import paper000, paper001, paper002, paper003, paper004

PAPERS: dict[str, tuple[str, Callable[[], dict]]] = {
    "000": (paper000.TITLE, paper000.reproduce),
    "001": (paper001.TITLE, paper001.reproduce),
    "002": (paper002.TITLE, paper002.reproduce),
    "003": (paper003.TITLE, paper003.reproduce),
    "004": (paper004.TITLE, paper004.reproduce),
}


def reproduce(paper: str) -> dict:
    if paper not in PAPERS:
        raise KeyError(paper)
    return PAPERS[paper][1]()


def row(quantity: str, reported, predicted, unit: str, source: str, **extra) -> dict:
    """One predicted-vs-reported row; ``rel_error`` is (predicted - reported) / reported."""
    r = {"quantity": quantity, "reported": reported, "predicted": predicted, "unit": unit, "source": source}
    if isinstance(reported, (int, float)) and isinstance(predicted, (int, float)) and reported != 0:
        r["rel_error"] = (predicted - reported) / reported
    else:
        r["rel_error"] = None
    r.update(extra)
    return r
