"""``pktsim reproduce all --report DIR``: one HTML page with, per paper, the scenario, the
predicted vs reported numbers with their errors, and the plots that correspond to the
paper's figures (PNG files beside the page)."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from . import __version__, plots
from .reproduce.rows import html_table, summary, summary_text
from .textio import atomic_write


def _figures_000(d: Path, res: dict) -> list[tuple[str, str]]:
    from .calibrate import bar_chart
    from .model import predict
    from .reproduce.paper000 import TABLE_II_SIZES, node

    def groups(profile, flows=1):
        return predict(node(64, profile, flows))["cycles_by_group"]

    from .reproduce.paper000 import TABLE_I

    bar_chart(
        [(f"{s} B", groups(f"raumer2015-{s}B")) for s in TABLE_II_SIZES],
        d / "000-fig7.png",
        "000 Fig. 7 / Table II: cycles per packet by group",
        reported=[TABLE_I[s][2] for s in TABLE_II_SIZES],
    )
    # Fig. 9 / Table IV: each flow count's own groups with the FIB model's routing, the
    # same predictions as the table's C_total rows.
    from .reproduce.paper000 import GROUPS, TABLE_IV

    def table_iv(n):
        others = {g: v for g, v in zip(GROUPS, TABLE_IV[n][0]) if g != "routing"}
        return predict(node(64, "raumer2015-flows-1", n, cycles=others))["cycles_by_group"]

    bar_chart(
        [(f"{n:,} flow{'s' * (n != 1)}", table_iv(n)) for n in TABLE_IV],
        d / "000-fig9.png",
        "000 Fig. 9 / Table IV: cycles by group vs flows",
        reported=[TABLE_IV[n][1] for n in TABLE_IV],
    )
    flows = [2**e for e in range(0, 25)]
    routing = [predict(node(64, "raumer2015-flows-1", f))["cycles_by_group"]["routing"] for f in flows]
    reported = {1: 200, 256: 350, 16384: 406, 1048576: 720}
    plots.reported_vs_predicted(
        {"C_routing": [(f, reported.get(f, float("nan")), c) for f, c in zip(flows, routing)]},
        d / "000-routing.png",
        "flows (= routes)",
        "routing cycles per packet",
        "",
        logx=True,
    )
    return [
        ("000-fig7.png", "000 Fig. 7 / Table II: cycles per packet by group (x: Table I's C_total)"),
        ("000-fig9.png", "000 Fig. 9 / Table IV: cycles by group vs flows (x: Table IV's C_total)"),
        ("000-routing.png", "000 V-C/V-D: routing cycles vs FIB size (markers: Table IV)"),
    ]


def _figures_001(d: Path, res: dict) -> list[tuple[str, str]]:
    rs = pd.DataFrame(res["curves"]["rt_share"])
    ut = pd.DataFrame(res["curves"]["utilisation"])
    rs["rt_share_pct"] = 100 * rs["rt_share"]
    ut["utilisation_pct"] = 100 * ut["utilisation"]
    strategies = ["sq", "rr", "prio", "priowfq"]
    plots.per_class_latency(rs, d / "001-fig5.png", "rt_share_pct", ["rt", "nrt"], strategies, "RT share [%]", "001 Fig. 5: mean latency vs RT share, 80% load")
    plots.per_class_latency(
        ut, d / "001-fig6.png", "utilisation_pct", ["rt", "nrt"], strategies, "utilisation [%]", "001 Fig. 6: mean latency vs utilisation, 30% RT"
    )
    return [
        ("001-fig5.png", "001 Fig. 5: mean latency vs RT share at 80% load (001's figures are lost: its claims are the relations above)"),
        ("001-fig6.png", "001 Fig. 6: mean latency vs utilisation, 30% RT"),
    ]


def _figures_002(d: Path, res: dict) -> list[tuple[str, str]]:
    c = pd.DataFrame(res["curve"])
    top = float(c["offered_pps"].max())
    # 002's own numbers where it gives the load they belong to (VI-A, VI-B).
    plots.latency_vs_load(c, d / "002-fig5.png", title="002 Fig. 5: latency vs offered load, one core", paper=[(44.6e3, 8000.0)])
    plots.irq_and_polls_vs_load(c, d / "002-fig6.png", title="002 Fig. 6: interrupts and polls vs offered load", paper_irq=[(0.5e6, 27e3), (1.0e6, 27e3)])
    plots.throughput_vs_load(c, d / "002-throughput.png", title="002: forwarding rate vs offered load", paper=[(top, 1.87e6)])
    return [
        ("002-fig5.png", "002 Fig. 5: latency percentiles vs offered load (x: 002's p50 of 8 us at 44.6 kpps)"),
        ("002-fig6.png", "002 Fig. 6: IRQs and polls vs load (crosses: up to 27k IRQ/s at 0.5-1.0 Mpps)"),
        ("002-throughput.png", "002: forwarding rate vs offered load (x: the measured 1.87 Mpps maximum)"),
    ]


def _figures_003(d: Path, res: dict) -> list[tuple[str, str]]:
    c = pd.DataFrame(res["curve"])
    c["latency_p25_ns"] = c["latency_p50_ns"]
    sat = next((r["reported"] * 1e3 for r in res["rows"] if r["quantity"].startswith("skb recycling")), 1.39e6)
    plots.latency_vs_load(c, d / "003-fig3.png", percentiles=("p50",), title="003 Fig. 3: median latency vs offered load, skb recycling")
    plots.irq_and_polls_vs_load(
        c.assign(irq_per_s=c["irqs_per_packet"] * c["throughput_pps"]),
        d / "003-fig7.png",
        title="003 Fig. 7: interrupts and rx polls vs offered load",
        paper_polls=[(0.01 * sat, 2.0), (0.9 * sat, 0.22)],
    )
    return [
        ("003-fig3.png", "003 Fig. 3: latency step at saturation (skb recycling; 003 gives no load for its values)"),
        ("003-fig7.png", "003 Fig. 7: IRQs and rx polls vs load (crosses: 2 polls per packet at 1% load, 0.22 at 90%)"),
    ]


def _figures_004(d: Path, res: dict) -> list[tuple[str, str]]:
    series = {}
    for r in res["rows"]:
        if r["source"] != "004 Fig. 6":
            continue
        lib = r["quantity"].split(" over ")[1].split(",")[0]
        b = int(r["quantity"].rsplit(" ", 1)[1])
        series.setdefault(lib, []).append((b, r["reported"], r["predicted"], r["kind"] == "fitted"))
    plots.reported_vs_predicted(
        series, d / "004-fig6.png", "batch size", "throughput [kpps]", "004 Fig. 6: OpenvSwitch throughput vs batch size, 64 B, one core", logx=True
    )
    return [("004-fig6.png", "004 Fig. 6: throughput vs batch size (markers: 004; fitted at 2 and 50)")]


def _figures_xdp(d: Path, res: dict) -> list[tuple[str, str]]:
    cores: dict[str, list] = {}
    for r in res["rows"]:
        if r["unit"] == "Mpps":
            label, n = r["quantity"].rsplit(", ", 1)
            cores.setdefault(label, []).append((int(n.split()[0]), r["reported"], r["predicted"], r["kind"] == "fitted"))
    plots.reported_vs_predicted(cores, d / "xdp2018-cores.png", "cores", "rate [Mpps]", "xdp2018 Figs. 3, 5: drop and forwarding rate vs cores, 64 B")
    cpu: dict[str, list] = {}
    for c in res["curve"]:
        cpu.setdefault(f"{c['path']} drop", []).append((c["offered_pps"] / 1e6, c["reported_pct"], c["cpu_pct"], c.get("kind") == "fitted"))
    plots.reported_vs_predicted(
        cpu,
        d / "xdp2018-cpu.png",
        "offered load [Mpps]",
        "CPU load of the core [%]",
        "xdp2018 Fig. 4: CPU load of one core vs offered load, drop test",
        logx=True,
    )
    return [
        (
            "xdp2018-cores.png",
            "xdp2018 Figs. 3 and 5: drop and forwarding rate vs cores (markers: the paper; 1 core fitted; the PCI Express bus caps the NIC above 4 cores)",
        ),
        ("xdp2018-cpu.png", "xdp2018 Fig. 4: CPU load vs offered load in the drop test (markers: the paper; one interrupt cost fitted on XDP at 5 Mpps)"),
    ]


FIGURES = {"000": _figures_000, "001": _figures_001, "002": _figures_002, "003": _figures_003, "004": _figures_004, "xdp2018": _figures_xdp}

SCENARIOS = {"001": "meyer2014-rt", "002": "beifuss2015-napi"}

STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; font-size: 13px; margin: 1em 0; }
td, th { border: 1px solid #ccc; padding: 3px 6px; text-align: left; }
tr.fitted td, tr.derived td { color: #777; }
tr.bad td { background: #fde2e2; }
p.summary { font-size: 13px; }
img { max-width: 520px; margin: 4px; border: 1px solid #eee; }
pre { background: #f6f6f6; padding: 8px; font-size: 12px; max-height: 300px; overflow: auto; }
"""

# Marks the page once every figure has loaded (read back by the report test in a browser).
CHECK = """
<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-images-ok', ok);
});
</script>
"""


def build(directory: str | Path, papers: list[str]) -> Path:
    from .reproduce import PAPERS, reproduce
    from .scenarios import path as scenario_path

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>pktsim reproductions</title><style>{STYLE}</style>{CHECK}</head><body>"]
    parts.append(f"<h1>pktsim {html.escape(__version__)}: the seed papers, reproduced</h1>")
    parts.append(
        "<p>Each section: the scenario, every number the paper reports next to pktsim's prediction with the relative error "
        "and the row's kind: <em>predicted</em> (from inputs that did not use the row), <em>fitted</em> (a calibration "
        "point or a row its own fit closes: its error says how well the fit closes), <em>derived</em> (the paper's own "
        "arithmetic or a value of pktsim's inputs, never shown as reported) or <em>relation</em> (a claim that holds or "
        "not); then the summary of the predicted rows and the plots that correspond to the paper's figures.</p>"
    )
    results = [reproduce(paper) for paper in papers]
    everything = [r for res in results for r in res["rows"]]
    # The summary first, then a table of contents.
    label = "summary (all papers)" if len(papers) > 1 else "summary"
    parts.append(f"<p class='summary' id='summary'><strong>{html.escape(summary_text(summary(everything), label)).replace(chr(10), '<br>')}</strong></p>")
    toc = "".join(
        f"<li><a href='#p{res['paper']}'>{res['paper']}: {html.escape(PAPERS[res['paper']][0])}</a> — "
        f"{html.escape(summary_text(res['summary'], '').splitlines()[0].lstrip(': '))}</li>"
        for res in results
    )
    parts.append(f"<nav><ul>{toc}</ul></nav>")
    for paper, res in zip(papers, results):
        parts.append(f"<h2 id='p{paper}'>{paper}: {html.escape(PAPERS[paper][0])}</h2>")
        if paper in SCENARIOS:
            parts.append(
                f"<details><summary>scenario ({SCENARIOS[paper]}.toml)</summary><pre>{html.escape(scenario_path(SCENARIOS[paper]).read_text())}</pre></details>"
            )
        parts.append(html_table(res["rows"]))
        parts.append(f"<p class='summary'>{html.escape(summary_text(res['summary'], 'summary')).replace(chr(10), '<br>')}</p>")
        for fname, caption in FIGURES[paper](d, res):
            parts.append(
                f"<figure style='display:inline-block'><img src='{fname}' alt='{html.escape(caption)}'><figcaption>{html.escape(caption)}</figcaption></figure>"
            )
    parts.append("</body></html>")
    index = d / "index.html"
    atomic_write(index, "\n".join(parts))
    return index
