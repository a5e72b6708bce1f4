"""Reproductions of the seed papers: each returns predicted vs reported rows.

Contract (``pktsim reproduce PAPER --json``)::

    {"paper": "...", "rows": [{"quantity": "...", "reported": x, "predicted": y,
                               "rel_error": e, "unit": "...", "source": "..."}]}

Rows may carry ``fitted: true`` (the value was used to fit a parameter, so its error says
how well the fit closes, not how well pktsim predicts) and ``holds`` (for relations).
A row is built by :func:`pktsim.reproduce.rows.row` and shown by ``rows.text_table`` /
``rows.html_table``; that module stands alone (the paper modules import it, not this one).
"""

from __future__ import annotations

from typing import Callable

from . import paper000, paper001, paper002, paper003, paper004
from .rows import row

__all__ = ["PAPERS", "reproduce", "row"]

# Paper id -> (title, the function that reproduces it).
PAPERS: dict[str, tuple[str, Callable[[], dict]]] = {
    "000": (paper000.TITLE, paper000.reproduce),
    "001": (paper001.TITLE, paper001.reproduce),
    "002": (paper002.TITLE, paper002.reproduce),
    "003": (paper003.TITLE, paper003.reproduce),
    "004": (paper004.TITLE, paper004.reproduce),
}


def reproduce(paper: str) -> dict:
    """The result of one paper's reproduction (``pktsim reproduce PAPER --json``)."""
    if paper not in PAPERS:
        raise KeyError(paper)
    return PAPERS[paper][1]()

