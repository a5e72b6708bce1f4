"""Rows of a reproduction, predicted next to reported, and the tables that show them.

A row is a dict with, in this order, ``quantity``, ``reported`` (what the paper or the
measurement says), ``predicted`` (what pktsim says), ``unit``, ``source``,
``rel_error`` = (predicted - reported) / reported (None when either is not a number or
reported is 0) and ``kind``, then any extra keys the caller gives.

``kind`` says what the row is, and so what its error means:

* ``predicted``: a model output from inputs that did not use this row, and that could
  have come out otherwise; its error is how well pktsim predicts. Only these rows enter
  the summary's error figures. Such a row names what it was computed from:
  ``fitted_on`` (the quantities of its paper's fitted rows) and ``inputs`` (other inputs,
  text).
* ``fitted``: a calibration point, or any row its own fit closes (the value comes back out
  of a parameter that was set from it, or holds by construction); its error says how well
  the fit closes. These rows also carry ``fitted: True``.
* ``derived``: true by construction: the paper's own arithmetic, a value computed from
  pktsim's inputs, or one that could not have come out otherwise (a line rate, k times a
  fitted rate, a saturated core). Such a row says how in ``derived_from`` (text); a value
  that pktsim's inputs give is never put in ``reported`` (which is then None) but in
  ``derived_value``, next to what the model makes of it in ``predicted``. ``reported``
  holds only a figure the paper prints.
* ``relation``: a qualitative claim of the paper; ``holds`` says whether pktsim keeps it.

Other keys: ``holds: bool`` (relations, and fitted rows that check a range),
``tail: True`` (a tail figure, p99, that includes delays the model leaves out), and
anything else the reproduction wants to carry (``bottleneck``...).

:func:`summary` condenses a list of rows (the ``summary`` of ``reproduce --json``).

The paper reproductions (``reproduce/paper*.py``), ``pktsim testbed validate``, the
``reproduce`` command and the HTML report all use these; this module depends on none of
them, so each can be used alone (``from pktsim.reproduce.rows import row, text_table``).
"""

from __future__ import annotations

import html
import statistics
from collections.abc import Iterable, Mapping

from ..textio import table

KINDS = ("predicted", "fitted", "derived", "relation")
# A row whose |rel_error| exceeds this is flagged in the text table and the report.
FLAG_ABOVE = 0.10


def row(quantity: str, reported, predicted, unit: str, source: str, kind: str | None = None, **extra) -> dict:
    """One predicted-vs-reported row; ``rel_error`` is (predicted - reported) / reported.

    ``kind`` defaults from the older keys: ``fitted=True`` -> fitted, a ``holds`` key ->
    relation, otherwise predicted. A fitted row always carries ``fitted: True``."""
    if kind is None:
        kind = "fitted" if extra.get("fitted") else "relation" if "holds" in extra else "predicted"
    if kind not in KINDS:
        raise ValueError(f"row {quantity!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
    if kind == "relation" and "holds" not in extra:
        raise ValueError(f"row {quantity!r}: a relation needs holds")
    if kind == "fitted":
        extra["fitted"] = True
    r = {"quantity": quantity, "reported": reported, "predicted": predicted, "unit": unit, "source": source}
    if _num(reported) and _num(predicted) and reported != 0:
        r["rel_error"] = (predicted - reported) / reported
    else:
        r["rel_error"] = None
    r["kind"] = kind
    r.update(extra)
    return r


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def summary(rows: Iterable[Mapping]) -> dict:
    """What a list of rows amounts to: ``predicted`` (how many predicted rows),
    ``median_abs_error`` and ``max_abs_error`` (over the predicted rows that have an error;
    None if none has), ``relations`` and ``relations_held``; then ``fitted`` and ``derived``
    (rows left out of the error figures), ``predicted_with_error`` (the rows the error
    figures are over), ``worst`` (the quantity with the largest error) and ``flagged``
    (predicted rows whose |error| > 10%)."""
    rows = list(rows)
    pred = [r for r in rows if r.get("kind") == "predicted"]
    errs = [(abs(r["rel_error"]), r["quantity"]) for r in pred if r.get("rel_error") is not None]
    rel = [r for r in rows if r.get("kind") == "relation"]
    worst = max(errs, default=None)
    return {
        "predicted": len(pred),
        "median_abs_error": statistics.median(e for e, _ in errs) if errs else None,
        "max_abs_error": worst[0] if worst else None,
        "relations": len(rel),
        "relations_held": sum(1 for r in rel if r.get("holds") is True),
        "fitted": sum(1 for r in rows if r.get("kind") == "fitted"),
        "derived": sum(1 for r in rows if r.get("kind") == "derived"),
        "predicted_with_error": len(errs),
        "worst": worst[1] if worst else None,
        "flagged": sum(1 for e, _ in errs if e > FLAG_ABOVE),
    }


def summary_text(s: Mapping, label: str = "summary") -> str:
    """The summary lines printed under a reproduce table."""
    if s["predicted_with_error"]:
        errs = f"|error| median {100 * s['median_abs_error']:.2f}%, worst {100 * s['max_abs_error']:.2f}% ({s['worst']})" + (
            f"; {s['flagged']} above {100 * FLAG_ABOVE:.0f}%" if s["flagged"] else ""
        )
    else:
        errs = "no error to summarise"
    lines = [
        f"{label}: {s['predicted']} predicted row{'' if s['predicted'] == 1 else 's'}: {errs}",
        f"{' ' * len(label)}  relations held: {s['relations_held']} of {s['relations']}; left out of the errors: {s['fitted']} fitted, {s['derived']} derived",
    ]
    return "\n".join(lines)


def number(x) -> str:
    """A reported or predicted value in a text table: 4 significant digits below 100, one
    decimal above; "-" for None; text as it is."""
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) < 100 else f"{x:.1f}"
    return str(x)


def notes(r: Mapping, does_not_hold: str = "DOES NOT HOLD") -> list[str]:
    """The notes column: tail, holds, what the inputs give (derived), a large error."""
    out = []
    if r.get("tail"):
        out.append("tail")
    if "holds" in r:
        out.append("holds" if r["holds"] else does_not_hold)
    if r.get("derived_value") is not None:
        out.append(f"inputs give {number(r['derived_value'])}")
    if r.get("rel_error") is not None and abs(r["rel_error"]) > FLAG_ABOVE:
        out.append(f"|error| > {100 * FLAG_ABOVE:.0f}%")
    return out


def text_table(rows: Iterable[Mapping]) -> str:
    """The aligned text table of ``pktsim reproduce`` and ``pktsim testbed validate``:
    quantity, reported, predicted, unit, error, kind, notes (tail, holds, a derived row's
    value from pktsim's inputs, |error| > 10%), source."""
    out = []
    for r in rows:
        err = "" if r["rel_error"] is None else f"{100 * r['rel_error']:+.2f}%"
        out.append([r["quantity"], number(r["reported"]), number(r["predicted"]), r["unit"], err, r.get("kind", ""), ", ".join(notes(r)), r["source"]])
    return table(out, ["quantity", "reported", "predicted", "unit", "error", "kind", "check", "source"], "lrrlrlll", optional=(7, 6))


def _why(r: Mapping) -> str:
    """The kind cell's tooltip: how a derived row's value comes about, or the fitted rows a
    prediction comes from."""
    if r.get("derived_from"):
        text = f"derived from {r['derived_from']}"
    elif r.get("fitted_on"):
        text = "computed from the fitted rows: " + "; ".join(r["fitted_on"])
    else:
        return ""
    return f' title="{html.escape(text, quote=True)}"'


def html_table(rows: Iterable[Mapping]) -> str:
    """The same rows as an HTML ``<table>`` (the report's), with each row's kind (also its
    ``class``); a relation that does not hold and a row whose |error| > 10% are also
    marked ``bad``."""
    head = "<tr><th>quantity</th><th>reported</th><th>predicted</th><th>unit</th><th>error</th><th>kind</th><th>check</th><th>source</th></tr>"
    body = []
    for r in rows:
        err = "" if r.get("rel_error") is None else f"{100 * r['rel_error']:+.2f}%"
        kind = html.escape(r.get("kind", ""))
        bad = r.get("holds") is False or (r.get("rel_error") is not None and abs(r["rel_error"]) > FLAG_ABOVE)
        cls = f' class="{kind}{" bad" if bad else ""}"'

        def num(x):
            return "-" if x is None else f"{x:.4g}" if isinstance(x, float) else html.escape(str(x))

        body.append(
            f"<tr{cls}><td>{html.escape(r['quantity'])}</td><td>{num(r['reported'])}</td><td>{num(r['predicted'])}</td>"
            f"<td>{html.escape(r['unit'])}</td><td>{err}</td><td{_why(r)}>{kind}</td><td>{html.escape(', '.join(notes(r, 'does not hold')))}</td>"
            f"<td>{html.escape(r.get('source', ''))}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"
