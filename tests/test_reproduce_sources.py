"""A predicted row is one whose value could have come out otherwise: nothing it was computed
from is its own reported figure, or another predicted row's.

Every predicted row names the fitted rows it was computed from (``fitted_on``); every
reported figure of a predicted row is then perturbed in its paper's module (the constants
that hold it, or the literal of its ``row()`` call) and the paper reproduced again: no
fitted row, no fit and no prediction may move.
"""

import ast
import copy
import importlib
import inspect
import math

import pytest

from pktsim.reproduce import PAPERS, reproduce

# Predicted rows whose reported figure the module computes from constants rather than
# holding it as one number: the constants' entries it comes from.
COMPUTED = {
    ("000", "R_max ratio, 752,138 routes and 4,000 destinations vs one route"): ("FULL_TABLE", (2, 3)),
}
SCALE = 1.37


def _module(paper):
    return importlib.import_module(f"pktsim.reproduce.{PAPERS[paper].module}")


def _constants(mod) -> dict:
    return {k: v for k, v in vars(mod).items() if k.isupper() and isinstance(v, (dict, tuple, list, int, float)) and not isinstance(v, bool)}


def _scaled(v, targets: set, hits: set):
    """`v` with every number equal to one of `targets` scaled by SCALE (dict keys kept)."""
    if isinstance(v, dict):
        return {k: _scaled(x, targets, hits) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return type(v)(_scaled(x, targets, hits) for x in v)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v) in targets:
        hits.add(float(v))
        return v * SCALE
    return v


def _row_literals(mod) -> set:
    """Numbers written as the reported argument (the second) of a ``row()`` call."""
    out = set()
    for node in ast.walk(ast.parse(inspect.getsource(mod))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "row" and len(node.args) > 1:
            arg = node.args[1]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, (int, float)):
                out.add(float(arg.value))
    return out


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@pytest.fixture(scope="module")
def papers(reproduced_all):
    return {p["paper"]: p for p in reproduced_all}


def test_every_predicted_row_names_the_fitted_rows_it_comes_from(papers):
    for pid, p in papers.items():
        kinds = {r["quantity"]: r["kind"] for r in p["rows"]}
        for r in p["rows"]:
            if r["kind"] != "predicted":
                continue
            assert r.get("fitted_on") or r.get("inputs"), (pid, r["quantity"])
            for q in r.get("fitted_on") or []:
                assert kinds.get(q) == "fitted", (pid, r["quantity"], q)


@pytest.mark.parametrize("paper", [p for p in PAPERS if p != "001"])
def test_perturbing_what_predicted_rows_report_moves_no_fit_and_no_prediction(papers, paper, monkeypatch):
    base = papers[paper]
    predicted = [r for r in base["rows"] if r["kind"] == "predicted"]
    if not predicted:
        pytest.skip(f"{paper} has no predicted rows")
    mod = _module(paper)
    literals = _row_literals(mod)
    consts = _constants(mod)
    targets, computed = set(), {}
    for r in predicted:
        key = (paper, r["quantity"])
        if key in COMPUTED:
            name, idx = COMPUTED[key]
            computed[name] = idx
        elif isinstance(r["reported"], (int, float)):
            targets.add(float(r["reported"]))
    hits: set = set()
    perturbed = {name: _scaled(v, targets, hits) for name, v in consts.items()}
    for name, idx in computed.items():
        perturbed[name] = type(consts[name])(x * SCALE if i in idx else x for i, x in enumerate(consts[name]))
    # Each predicted row's figure was found: in the module's constants, or as the literal
    # its own row() call reports (which nothing else can read).
    missing = targets - hits - literals
    assert not missing, f"{paper}: reported figures of predicted rows found nowhere: {sorted(missing)}"
    if not hits and not computed:
        return  # every figure is a literal of its row() call: nothing else reads it
    for name, v in perturbed.items():
        monkeypatch.setattr(mod, name, copy.deepcopy(v))
    again = reproduce(paper)
    before = {r["quantity"]: r for r in base["rows"]}
    moved = []
    for r in again["rows"]:
        old = before.get(r["quantity"])
        if old is None or r["kind"] not in ("fitted", "predicted"):
            continue
        if not _same(old["predicted"], r["predicted"]):
            moved.append(f"{r['kind']} {r['quantity']}: {old['predicted']} -> {r['predicted']}")
    assert not moved, f"{paper}: perturbing the predicted rows' reported figures moved:\n" + "\n".join(moved)
    assert again.get("fits") == base.get("fits"), paper
    # ... and their reported figures did move (the perturbation reached them).
    for r in again["rows"]:
        if r["kind"] == "predicted" and before[r["quantity"]]["reported"] is not None and float(before[r["quantity"]]["reported"]) in hits:
            assert r["reported"] != before[r["quantity"]]["reported"], r["quantity"]


def test_the_report_says_why_a_row_is_derived_and_what_a_prediction_comes_from(papers):
    from pktsim.reproduce.rows import html_table

    page = html_table(papers["xdp2018"]["rows"])
    assert 'title="derived from 2 x the fitted one-core rate' in page
    assert 'title="computed from the fitted rows: XDP drop, 1 core; XDP drop CPU at 1 Mpps; XDP drop CPU at 10 Mpps"' in page
