"""Reproductions of the seed papers: each returns predicted vs reported rows.

Contract (``pktsim reproduce PAPER --json``)::

    {"paper": "...", "title": "...",
     "rows": [{"quantity": "...", "reported": x, "predicted": y, "unit": "...", "source": "...",
               "rel_error": e, "kind": "predicted" | "fitted" | "derived" | "relation", ...}],
     "summary": {"predicted": n, "median_abs_error": m, "max_abs_error": w,
                 "relations": r, "relations_held": h, ...},
     ...}

``kind`` says what a row is (see :mod:`pktsim.reproduce.rows`): a prediction, a fitted
point (also ``fitted: true``), a derived value (the paper's own arithmetic or pktsim's
inputs; such a value is never in ``reported``) or a relation (with ``holds``). ``summary``
(:func:`summary`) counts the predicted rows and gives their median and largest
|rel_error| (fitted and derived rows are left out), and how many relations hold.

``pktsim reproduce all --json`` prints a list with one such object per paper, as it always
has; the summary over all papers is ``summary(row for p in papers for row in p["rows"])``
(the last lines of the text output).

A row is built by :func:`pktsim.reproduce.rows.row` and shown by ``rows.text_table`` /
``rows.html_table``; that module stands alone (the paper modules import it, not this one).
"""

from __future__ import annotations

from collections.abc import Callable

from . import paper000, paper001, paper002, paper003, paper004, paper_xdp
from .rows import KINDS, row, summary

__all__ = ["AUTHORS", "KINDS", "PAPERS", "paper_id", "reproduce", "row", "summary"]

# Paper id -> (title, the function that reproduces it).
PAPERS: dict[str, tuple[str, Callable[[], dict]]] = {
    "000": (paper000.TITLE, paper000.reproduce),
    "001": (paper001.TITLE, paper001.reproduce),
    "002": (paper002.TITLE, paper002.reproduce),
    "003": (paper003.TITLE, paper003.reproduce),
    "004": (paper004.TITLE, paper004.reproduce),
    # Beyond the seed papers: published figures of today's receive path.
    "xdp2018": (paper_xdp.TITLE, paper_xdp.reproduce),
}


# First authors: a paper can be named by number, by author, or author and year
# ("raumer2015", "Meyer").
AUTHORS = {"raumer": "000", "meyer": "001", "beifuss": "002", "bolla": "003", "rizzo": "004", "hoiland": "xdp2018", "høiland": "xdp2018", "xdp": "xdp2018"}


def paper_id(name: str) -> str | None:
    """The paper's number for ``name`` ("000", "raumer", "raumer2015", "Raumer et al."), or None."""
    if name in PAPERS:
        return name
    import re

    m = re.match(r"^([^\W\d_]+)", name.strip().lower())
    return AUTHORS.get(m.group(1)) if m else None


def reproduce(paper: str) -> dict:
    """The result of one paper's reproduction (``pktsim reproduce PAPER --json``), with its
    ``summary``. ``paper`` is a number ("001") or a first author ("meyer2014")."""
    paper = paper_id(paper) or paper
    if paper not in PAPERS:
        raise KeyError(paper)
    res = PAPERS[paper][1]()
    res["summary"] = summary(res["rows"])
    return res
