"""Every reproduction row says what it is (``kind``), and the summary counts only predictions.

Issue 13, item 3: a fitted point, a fit closure, the paper's own arithmetic or a value of
pktsim's own inputs must not pass for a prediction, and pktsim's inputs must not stand in
the ``reported`` column.
"""

import json
import re
import statistics

import pytest
from conftest import ROOT, run_cli

from pktsim import cli
from pktsim.reproduce import KINDS, PAPERS, paper_xdp, summary
from pktsim.reproduce.rows import html_table, row, text_table
from pktsim.scenario import Scenario
from pktsim.scenarios import path

SUMMARY_KEYS = {"predicted", "median_abs_error", "max_abs_error", "relations", "relations_held"}

# Derived rows that keep a figure in ``reported``: each is a number the paper prints (and
# pktsim's value is the paper's own arithmetic on pktsim's inputs). Every other derived row
# has reported = None.
PAPER_FIGURES = {
    ("000", "C_total, 64 B"): 1979,
    ("000", "C_total, 512 B"): 1969,
    ("000", "C_total, 1024 B"): 2056,
    ("000", "C_total, 1500 B"): 2203,
    ("001", "maximum throughput"): 1.0,
    ("001", "maximum throughput per core"): 0.25,
    ("003", "recycling rate as a share of the Gigabit line rate"): 0.95,
    # True by construction, next to the figure the paper prints: the line rate at 1024 and
    # 1500 B, a held-out C_routing restated as C_total and R_max, a full ring over the input
    # rates, a saturated core, and k times a fitted one-core rate.
    ("000", "R_max, 1024 B"): 1.2,
    ("000", "R_max, 1500 B"): 0.82,
    ("000", "C_total, 16384 flows"): 2093,
    ("000", "R_max, 16384 flows"): 3.3e9 / 2093 / 1e6,
    ("003", "latency at saturation, PCI Express / PCI-X (recycling kernel)"): 0.5,
    ("xdp2018", "Linux drop CPU at 5 Mpps"): 100.0,
    **{
        ("xdp2018", f"{label}, {k} cores"): mpps
        for label, table in (
            ("XDP drop", paper_xdp.DROP_XDP),
            ("Linux drop (raw table)", paper_xdp.DROP_LINUX),
            ("XDP_TX forwarding, same NIC", paper_xdp.FWD_TX),
            ("XDP_REDIRECT forwarding, other NIC", paper_xdp.FWD_REDIRECT),
        )
        for k, mpps in table.items()
        if k > 1
    },
}

# The rows issue 13 names, and what they are.
LABELLED = {
    ("000", "C_routing, 1 flows"): "fitted",  # the reference profile
    ("000", "C_routing, 256 flows"): "fitted",  # the FIB model's 2 parameters fitted to these 2 rows
    ("000", "C_routing, 1048576 flows"): "fitted",
    ("000", "C_routing, 16384 flows"): "predicted",  # held out of the fit
    ("000", "C_total, 1 flows"): "fitted",
    ("000", "C_total, 256 flows"): "fitted",
    ("000", "C_total, 16384 flows"): "derived",  # restates the C_routing prediction
    ("000", "C_total, 1048576 flows"): "fitted",
    ("000", "R_max, 1 flows"): "fitted",
    ("000", "R_max, 16384 flows"): "derived",
    ("000", "R_max, 1048576 flows"): "fitted",
    ("000", "R_max measured peak"): "fitted",
    ("000", "FIB size over which the routing cost rises most"): "relation",  # from the fitted curve; V-D not used
    ("000", "R_max ratio, 752,138 routes"): "predicted",
    ("000", "R_max, 64 B"): "fitted",  # Table II was computed from this rate
    ("000", "R_max, 1024 B"): "derived",  # the line rate
    ("002", "maximum forwarding rate implied by Table I"): "derived",
    ("002", "latency of an isolated packet"): "derived",
    ("002", "p50 latency in overload vs the ring bound"): "derived",
    ("002", "maximum forwarding rate"): "fitted",  # t_proc and t_clean come from 1.87 Mpps
    ("002", "minimum latency at 0.0446 Mpps"): "fitted",  # t_off = 8000 - 479 ns
    ("003", "recycling rate as a share of the Gigabit line rate"): "derived",  # the fitted 1390 kpps
    ("003", "standard kernel"): "fitted",
    ("003", "latency at saturation, PCI Express / PCI-X"): "derived",  # ring / the input rates
    ("004", "OpenvSwitch over libpcap, batch 3"): "predicted",
    ("004", "OpenvSwitch over libpcap, batch 50"): "fitted",
    ("xdp2018", "XDP drop, 1 core"): "fitted",  # each path's cost from its 1-core rate
    ("xdp2018", "XDP drop, 4 cores"): "derived",  # 4 x the fitted one-core rate
    ("xdp2018", "XDP drops over 4x as many frames per core as the stack"): "derived",
    ("xdp2018", "Linux drop CPU at 5 Mpps"): "derived",  # above the fitted capacity
    ("xdp2018", "XDP_REDIRECT forwarding, other NIC, 1 core"): "fitted",
    ("xdp2018", "XDP drop CPU at 10 Mpps"): "fitted",  # the interrupt cost, with 1 Mpps
    ("xdp2018", "XDP drop CPU at 5 Mpps"): "predicted",
    ("xdp2018", "XDP drop CPU at 1 Mpps"): "fitted",
    ("xdp2018", "Linux drop CPU at 1 Mpps"): "fitted",  # the stack's per-poll cost
}


@pytest.fixture(scope="module")
def papers(reproduced_all):
    return {p["paper"]: p for p in reproduced_all}


@pytest.fixture(scope="module")
def testbed_rows():
    from pktsim.testbed import validate

    return validate.compare(json.loads((ROOT / "tests" / "data" / "testbed-sweep.json").read_text()))


def every_row(papers):
    return [(pid, r) for pid, p in papers.items() for r in p["rows"]]


def test_every_row_of_every_paper_has_a_valid_kind(papers, testbed_rows):
    assert set(papers) == set(PAPERS)
    for pid, r in every_row(papers) + [("testbed", r) for r in testbed_rows["rows"]]:
        assert r.get("kind") in KINDS, (pid, r)
        # The old keys keep working, and agree with kind.
        assert bool(r.get("fitted")) == (r["kind"] == "fitted"), (pid, r)
        if r["kind"] == "relation":
            assert isinstance(r["holds"], bool), (pid, r)
    kinds = {r["kind"] for _, r in every_row(papers)}
    assert kinds == set(KINDS), kinds


@pytest.mark.parametrize(("key", "kind"), LABELLED.items(), ids=[f"{p} {q}" for p, q in LABELLED])
def test_the_rows_the_issue_names_say_what_they_are(papers, key, kind):
    pid, prefix = key
    rows = papers[pid]["rows"]
    rows = [r for r in rows if r["quantity"] == prefix] or [r for r in rows if r["quantity"].startswith(prefix)]
    assert rows, key
    for r in rows:
        assert r["kind"] == kind, r


def test_no_derived_row_reports_pktsims_own_inputs(papers):
    for pid, r in every_row(papers):
        if r["kind"] != "derived":
            continue
        assert r.get("derived_from"), r  # it says how it was derived
        if (pid, r["quantity"]) in PAPER_FIGURES:
            assert r["reported"] == PAPER_FIGURES[(pid, r["quantity"])], r
        else:
            assert r["reported"] is None and r["rel_error"] is None, r


def test_002_inputs_are_nowhere_in_the_reported_column(papers):
    """What 002's Table I (pktsim's inputs) implies is not a reported figure."""
    sc = Scenario.load(path("beifuss2015-napi"))
    ns = lambda v: float(v.removesuffix("ns"))  # noqa: E731
    h = sc.data["host"]
    t_proc, t_clean, t_irq, t_off = ns(h["t_proc"]), ns(h["t_clean"]), ns(h["t_irq"]), ns(sc.data["measure"]["t_off"])
    ring = int(sc.data["nic"]["rx_ring"])
    from_inputs = [1e3 / (t_proc + t_clean), t_irq + t_proc + t_off, (ring - 1) * (t_proc + t_clean) + t_off]
    reported = [r["reported"] for r in papers["002"]["rows"] if isinstance(r["reported"], (int, float))]
    for v in from_inputs:
        assert not any(x == pytest.approx(v, rel=1e-6) for x in reported), v
    # ... but each still stands next to what the simulator makes of it.
    derived = [r["derived_value"] for r in papers["002"]["rows"] if r["kind"] == "derived"]
    assert derived == pytest.approx(from_inputs)


def test_003_line_rate_share_is_not_a_prediction(papers):
    r = next(r for r in papers["003"]["rows"] if r["quantity"] == "recycling rate as a share of the Gigabit line rate")
    assert r["kind"] == "derived" and r["derived_value"] == pytest.approx(1390e3 / (1e9 / 672))


def hand_summary(rows):
    pred = [r for r in rows if r["kind"] == "predicted"]
    errs = sorted(abs(r["rel_error"]) for r in pred if r["rel_error"] is not None)
    n = len(errs)
    median = None if not n else errs[n // 2] if n % 2 else (errs[n // 2 - 1] + errs[n // 2]) / 2
    rel = [r for r in rows if r["kind"] == "relation"]
    return {
        "predicted": len(pred),
        "median_abs_error": median,
        "max_abs_error": errs[-1] if errs else None,
        "relations": len(rel),
        "relations_held": sum(r["holds"] for r in rel),
    }


def test_each_papers_summary_is_the_hand_computation_over_its_rows(papers):
    for pid, p in papers.items():
        assert SUMMARY_KEYS <= set(p["summary"]), pid
        got = {k: p["summary"][k] for k in SUMMARY_KEYS}
        want = hand_summary(p["rows"])
        assert got == pytest.approx(want), pid
    # Pooled over all papers (what the text output ends with).
    rows = [r for _, r in every_row(papers)]
    assert {k: summary(rows)[k] for k in SUMMARY_KEYS} == pytest.approx(hand_summary(rows))
    # 000: the held-out 16,384-flow C_routing and the full-table row.
    assert papers["000"]["summary"]["predicted"] == 2
    assert papers["001"]["summary"]["relations"] == 9


def test_fitted_and_derived_rows_stay_out_of_the_error_figures():
    base = [
        row("a", 100.0, 101.0, "x", "s"),
        row("b", 100.0, 104.0, "x", "s"),
        row("c", 100.0, 110.0, "x", "s"),
        row("r", "claim", "yes", "", "s", holds=True),
        row("r2", "claim", "no", "", "s", holds=False),
    ]
    s = summary(base)
    assert (s["predicted"], s["relations"], s["relations_held"]) == (3, 2, 1)
    assert s["median_abs_error"] == pytest.approx(0.04) and s["max_abs_error"] == pytest.approx(0.10)
    noisy = base + [
        row("f", 100.0, 900.0, "x", "s", fitted=True),
        row("g", 100.0, 900.0, "x", "s", kind="fitted", holds=False),
        row("d", None, 900.0, "x", "s", kind="derived", derived_from="inputs", derived_value=1.0),
        row("e", 100.0, 900.0, "x", "s", kind="derived", derived_from="the paper's arithmetic"),
    ]
    assert {k: summary(noisy)[k] for k in SUMMARY_KEYS} == {k: s[k] for k in SUMMARY_KEYS}
    assert summary(noisy)["fitted"] == 2 and summary(noisy)["derived"] == 2
    assert statistics.median([0.01, 0.04, 0.10]) == s["median_abs_error"]


def test_row_kinds_default_from_the_old_keys_and_reject_nonsense():
    assert row("q", 1.0, 1.0, "x", "s")["kind"] == "predicted"
    assert row("q", 1.0, 1.0, "x", "s", fitted=True)["kind"] == "fitted"
    assert row("q", "a", "b", "", "s", holds=True)["kind"] == "relation"
    assert row("q", 1.0, 1.0, "x", "s", kind="fitted")["fitted"] is True
    with pytest.raises(ValueError, match="kind"):
        row("q", 1.0, 1.0, "x", "s", kind="guessed")
    with pytest.raises(ValueError, match="holds"):
        row("q", "a", "b", "", "s", kind="relation")


def test_json_contract_of_one_paper_and_of_all(papers):
    one = json.loads(run_cli("reproduce", "000", "--json").stdout)
    assert isinstance(one, dict) and SUMMARY_KEYS <= set(one["summary"])
    assert {"paper", "title", "rows", "summary"} <= set(one)
    for r in one["rows"]:
        assert {"quantity", "reported", "predicted", "unit", "source", "rel_error", "kind"} <= set(r)
    # all: a list, one object per paper, each the one-paper contract with its summary.
    for p in papers.values():
        assert {"paper", "title", "rows", "summary"} <= set(p)
    assert one["summary"] == papers["000"]["summary"]


def test_text_output_ends_with_the_summary_and_flags_large_errors(monkeypatch, capsys):
    import pktsim.reproduce as rep

    for slow in set(rep.PAPERS) - {"000", "002"}:
        monkeypatch.delitem(rep.PAPERS, slow)
    assert cli.main(["reproduce", "all"]) == 0
    out = capsys.readouterr().out
    lines = out.rstrip().splitlines()
    assert lines[-2].startswith("summary (all papers): 3 predicted rows: |error| median ")
    assert "relations held: 4 of 4" in lines[-1] and "18 fitted, 11 derived" in lines[-1]
    assert "summary (000): 2 predicted rows" in out and "summary (002): 1 predicted row:" in out
    # Each paper's rows are its own measurements: 003's polls per packet are not 002's.
    assert "003 Fig. 7" not in out
    irq = next(line for line in lines if line.startswith("IRQ rate at 0.5-1.0 Mpps"))
    assert "|error| > 10%" in irq and "predicted" in irq
    fitted = next(line for line in lines if line.startswith("C_routing, 256 flows"))
    assert "fitted" in fitted and "|error| > 10%" not in fitted
    isolated = next(line for line in lines if line.startswith("latency of an isolated packet"))
    assert "derived" in isolated and "inputs give 8202.0" in isolated


def test_report_table_shows_each_rows_kind(papers):
    page = html_table(papers["002"]["rows"])
    for r in papers["002"]["rows"]:
        # (The kind cell of a derived or predicted row says why in its tooltip.)
        assert re.search(rf"<td( title=\"[^\"]*\")?>{r['kind']}</td>", page), r
    assert 'class="derived"' in page and 'class="fitted"' in page and 'class="predicted bad"' in page
    assert "kind" in text_table(papers["000"]["rows"]).splitlines()[0]


def test_validate_rows_are_fitted_at_the_calibration_loads_and_summarised(testbed_rows):
    rows = testbed_rows["rows"]
    loads = testbed_rows["calibration"]["from_loads"]
    cpu = [r for r in rows if r["quantity"].startswith("dut CPU per frame, ")]
    fitted = [r for r in cpu if r["kind"] == "fitted"]
    assert len(fitted) == len(loads) and len(cpu) > len(fitted)
    assert {k: testbed_rows["summary"][k] for k in SUMMARY_KEYS} == pytest.approx(hand_summary(rows))


def test_html_report_shows_kinds_and_the_summary(tmp_path):
    from pktsim.report import build

    page = build(tmp_path, ["000"]).read_text()
    assert "<th>kind</th>" in page and "<td>fitted</td>" in page
    assert re.search(r'<td title="derived from [^"]*">derived</td>', page) and re.search(r'<td title="computed from [^"]*">predicted</td>', page)
    assert "<p class='summary'>summary: 2 predicted rows" in page


def test_html_report_says_how_it_was_made_links_full_size_figures_and_shows_each_papers_scenario(tmp_path):
    from pktsim.report import build, provenance

    page = build(tmp_path, ["000"], command="pktsim reproduce 000 --report r/").read_text()
    block = page[page.index("<table class='provenance'") : page.index("</table>", page.index("<table class='provenance'"))]
    for what in ("made", "pktsim", "command", "host", "Python", "pktsim reproduce 000 --report r/", "numpy", "matplotlib"):
        assert what in block, what
    p = provenance()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", p["date"]) and p["commit"]
    # Every figure is a link to its full-size file.
    figs = re.findall(r"<a href='([^']+)' title='full size'><img src='([^']+)'", page)
    assert figs and all(a == b and (tmp_path / a).is_file() for a, b in figs)
    assert "scenario (built from the fitted values)" in page


def test_every_paper_in_the_report_shows_a_scenario_pktsim_takes(reproduced_all, reproduced_report):
    """The report showed the scenario of 2 of 6 papers; the others' are built from their
    reproductions' fitted values, and each is a valid scenario."""
    from pktsim.reproduce import PAPERS
    from pktsim.scenario import Scenario

    assert sorted(res["paper"] for res in reproduced_all) == sorted(PAPERS)
    for res in reproduced_all:
        key = res["paper"]
        name, text = PAPERS[key].scenario_text(res)
        assert text, key
        Scenario.from_toml(text, origin=f"<{key}>")
    page = (reproduced_report[0] / "index.html").read_text()
    assert page.count("<details><summary>scenario (") == len(PAPERS)
    assert "id='provenance'" in page and "reproduce all --json --report" in page
