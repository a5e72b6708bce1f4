"""Rows of a reproduction, predicted next to reported, and the tables that show them.

A row is a dict with, in this order, ``quantity``, ``reported`` (what the paper or the
measurement says), ``predicted`` (what pktsim says), ``unit``, ``source`` and
``rel_error`` = (predicted - reported) / reported (None when either is not a number or
reported is 0), then any extra keys the caller gives:

* ``fitted: True``: the reported value was used to fit a parameter, so the error says how
  well the fit closes, not how well pktsim predicts;
* ``holds: bool``: for relations (``"65536..262144"``, ``"RT = n-RT"``), whether it holds;
* ``tail: True``: a tail figure (p99) that includes delays the model leaves out;
* anything else the reproduction wants to carry (``bottleneck``...).

The paper reproductions (``reproduce/paper*.py``), ``pktsim testbed validate``, the
``reproduce`` command and the HTML report all use these; this module depends on none of
them, so each can be used alone (``from pktsim.reproduce.rows import row, text_table``).
"""

from __future__ import annotations

import html
from typing import Iterable, Mapping

from ..textio import table


def row(quantity: str, reported, predicted, unit: str, source: str, **extra) -> dict:
    """One predicted-vs-reported row; ``rel_error`` is (predicted - reported) / reported."""
    r = {"quantity": quantity, "reported": reported, "predicted": predicted, "unit": unit, "source": source}
    if isinstance(reported, (int, float)) and isinstance(predicted, (int, float)) and reported != 0:
        r["rel_error"] = (predicted - reported) / reported
    else:
        r["rel_error"] = None
    r.update(extra)
    return r


def number(x) -> str:
    """A reported or predicted value in a text table: 4 significant digits below 100, one
    decimal above; "-" for None; text as it is."""
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) < 100 else f"{x:.1f}"
    return str(x)


def text_table(rows: Iterable[Mapping]) -> str:
    """The aligned text table of ``pktsim reproduce`` and ``pktsim testbed validate``:
    quantity, reported, predicted, unit, error, notes (fitted, tail, holds), source."""
    out = []
    for r in rows:
        err = "" if r["rel_error"] is None else f"{100 * r['rel_error']:+.2f}%"
        note = []
        if r.get("fitted"):
            note.append("fitted")
        if r.get("tail"):
            note.append("tail")
        if "holds" in r:
            note.append("holds" if r["holds"] else "DOES NOT HOLD")
        out.append([r["quantity"], number(r["reported"]), number(r["predicted"]), r["unit"], err, ", ".join(note), r["source"]])
    return table(out, ["quantity", "reported", "predicted", "unit", "error", "", "source"], "lrrlrll")


def html_table(rows: Iterable[Mapping]) -> str:
    """The same rows as an HTML ``<table>`` (the report's); a relation that does not hold is
    marked ``class="bad"``."""
    head = "<tr><th>quantity</th><th>reported</th><th>predicted</th><th>unit</th><th>error</th><th></th><th>source</th></tr>"
    body = []
    for r in rows:
        err = "" if r.get("rel_error") is None else f"{100 * r['rel_error']:+.2f}%"
        note = []
        if r.get("fitted"):
            note.append("fitted")
        if "holds" in r:
            note.append("holds" if r["holds"] else "does not hold")
        cls = ' class="bad"' if r.get("holds") is False else ""

        def num(x):
            return f"{x:.4g}" if isinstance(x, float) else html.escape(str(x))

        body.append(
            f"<tr{cls}><td>{html.escape(r['quantity'])}</td><td>{num(r['reported'])}</td><td>{num(r['predicted'])}</td>"
            f"<td>{html.escape(r['unit'])}</td><td>{err}</td><td>{', '.join(note)}</td><td>{html.escape(r.get('source', ''))}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"
