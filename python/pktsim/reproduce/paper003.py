"""003 (Bolla et al., Analyzing and Optimizing the Linux Networking Stack).

003 measures a Linux 2.6.16 router (NAPI, e1000 Gigabit boards) forwarding 64 B frames on
one core, with the standard kernel and with skb recycling (buffers recycled instead of
allocated and freed). Over PCI Express: about 840 kpps standard and 1390 kpps with
recycling ("about 150-175%" of the standard rate, "nearly the 95% of full Gigabit speed").
003 gives no cost profile, so pktsim calibrates the node from these two rates (marked
``fitted``): 3.0 GHz (the Xeon 5050's clock; 003 does not state it), the non-memory groups
shaped like 000's 64 B profile, and the alloc and free groups sized so that dropping them
(recycling) moves 840 to 1390 kpps. That the memory groups must then be 40% of the
standard cost, against 19% on 000's Linux 3.7 machine, is itself a finding: 2.6.16's skb
allocation was twice as heavy.

What is then derived: the share of the Gigabit line rate that the fitted 1390 kpps is
(003: "nearly 95%"; 1390 / 1488 kpps is 003's own arithmetic) and the memory groups' share.

What is then predicted, not fitted:

* the latency "step" at saturation: flat below, the full rx ring above (003 Fig. 3);
* PCI Express "halves the latency at saturation" against PCI-X: with recycling, PCI-X
  forwards 830 kpps (003), and the model's ring-bound latency scales with the cost per
  packet;
* 003's counters: the rx ring polled about twice per packet at low load, far less near
  saturation (003: 0.22), IRQs to ~0 at saturation. 003's e1000 port receives and
  transmits on one board, so rx and tx share one interrupt.

Assumed where 003 is silent: e1000 rings of 256 descriptors, poll weight 64, dynamic
interrupt moderation with a bulk rate of 8000/s, Linux 2.6's net_rx_action loop.
"""

from __future__ import annotations

from pathlib import Path

from ..sim import run
from .rows import row

TITLE = "Bolla et al., Analyzing and Optimizing the Linux Networking Stack"
FREQ_HZ = 3.0e9
GBE_64B_PPS = 1e9 / (84 * 8)
STANDARD_KPPS, RECYCLING_KPPS, RECYCLING_PCIX_KPPS = 840.0, 1390.0, 830.0
# 000 Table II, 64 B: the non-memory groups' shape.
SHAPE = {"RX": 408, "prerouting": 187, "routing": 200, "postrouting": 195, "TX": 288, "other": 325}
ALLOC_FREE = (144, 231)


def cycles(recycling_kpps: float, standard_kpps: float | None) -> dict:
    """Groups whose total without alloc/free gives `recycling_kpps`, and with them
    `standard_kpps` (None: no alloc/free; the node already recycles)."""
    c_rec = FREQ_HZ / (recycling_kpps * 1e3)
    k = c_rec / sum(SHAPE.values())
    out = {g: v * k for g, v in SHAPE.items()}
    if standard_kpps is None:
        out["alloc"] = out["free"] = 0.0
    else:
        mem = FREQ_HZ / (standard_kpps * 1e3) - c_rec
        out["alloc"] = mem * ALLOC_FREE[0] / sum(ALLOC_FREE)
        out["free"] = mem * ALLOC_FREE[1] / sum(ALLOC_FREE)
    return out


def node(groups: dict, recycling: bool, rate: str) -> dict:
    return {
        "name": "003 Magnolia, 64 B, Gigabit",
        "cpu": {"frequency": "3GHz"},
        "link": {"rate": "1Gbit/s"},
        "traffic": {"rate": rate, "size": "64B"},
        "cost": {
            "cycles": {g: f"{v:.4f}cycles" for g, v in groups.items()},
            **({"buffers": {"recycling": True, "recycle": "0cycles"}} if recycling and groups["alloc"] + groups["free"] > 0 else {}),
        },
        "nic": {"rx_ring": 256, "tx_ring": 256, "tx_vector": "shared", "itr": {"mode": "dynamic", "bulk_rate": 8000}},
        "host": {"io": "napi", "t_irq": "1us", "net_rx_action": "legacy", "hz": 250},
        "measure": {"warmup": "5ms", "duration": "50ms"},
    }


def reproduce() -> dict:
    pcie = cycles(RECYCLING_KPPS, STANDARD_KPPS)
    std = run(node(pcie, False, "100%"))
    rec = run(node(pcie, True, "100%"))
    rows = [
        row("standard kernel, 64 B, PCI Express", STANDARD_KPPS, std["throughput_pps"] / 1e3, "kpps", "003 IV (calibration)", fitted=True),
        row("skb recycling, 64 B, PCI Express", RECYCLING_KPPS, rec["throughput_pps"] / 1e3, "kpps", "003 IV (calibration)", fitted=True),
        row(
            "recycling gain (003: 150-175% of the standard rate)",
            "150..175",
            100 * rec["throughput_pps"] / std["throughput_pps"],
            "% of standard",
            "003 II (from [5]), IV (fit closure: 1390 / 840 kpps)",
            fitted=True,
            holds=1.50 <= rec["throughput_pps"] / std["throughput_pps"] <= 1.75,
        ),
        row(
            "alloc + free share of the standard per-packet cost (000 Linux 3.7: 19%)",
            None,
            (pcie["alloc"] + pcie["free"]) / sum(pcie.values()),
            "fraction",
            "derived from the calibration (003 gives no figure)",
            kind="derived",
            derived_from=f"1 - {STANDARD_KPPS:g} / {RECYCLING_KPPS:g} kpps: the fitted rates, the memory groups being what recycling removes",
        ),
        # The recycling rate is a fitted input, so its share of the line rate is 003's own
        # arithmetic (1390 / 1488 kpps), not a prediction.
        row(
            "recycling rate as a share of the Gigabit line rate",
            0.95,
            rec["throughput_pps"] / GBE_64B_PPS,
            "fraction",
            "003 IV ('nearly the 95% of full Gigabit speed'; pktsim's value is the fitted 1390 kpps over the line rate)",
            kind="derived",
            derived_from=f"the fitted {RECYCLING_KPPS:g} kpps / {GBE_64B_PPS / 1e3:.1f} kpps (64 B Gigabit line rate)",
            derived_value=RECYCLING_KPPS * 1e3 / GBE_64B_PPS,
        ),
    ]

    # Latency step and counters on the recycling node, 5% .. 120% of the line rate.
    loads = [0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0]
    curve = []
    for f in loads:
        r = run(node(pcie, True, f"{100 * f:g}%"))
        curve.append(
            {
                "load": f,
                "offered_pps": r["offered_pps"],
                "throughput_pps": r["throughput_pps"],
                "latency_p50_ns": r["latency_ns"]["p50"],
                "polls_per_packet": r["polls_per_packet"],
                "irqs_per_packet": r["irqs_per_packet"],
                "softirqs_per_packet": r["softirqs_per_packet"],
            }
        )
    below = [p for p in curve if p["throughput_pps"] < 0.9 * RECYCLING_KPPS * 1e3]
    above = [p for p in curve if p["offered_pps"] > 1.02 * RECYCLING_KPPS * 1e3]
    flat = max(p["latency_p50_ns"] for p in below) if below else float("nan")
    high = min(p["latency_p50_ns"] for p in above) if above else float("nan")
    rows.append(
        row(
            f"latency step at saturation: p50 {high / 1e3:.0f} us above vs at most {flat / 1e3:.0f} us below 90% of it (ratio)",
            "step",
            high / flat,
            "ratio",
            "003 IV, Fig. 3 (below: the interrupt interval; above: the full ring of 256)",
            holds=high > 2 * flat,
        )
    )
    # PCI-X: the same node with recycling at 830 kpps.
    pcix = run(node(cycles(RECYCLING_PCIX_KPPS, None), True, "100%"))
    pcie_over = run(node(cycles(RECYCLING_KPPS, None), True, "100%"))
    # At saturation a frame waits for the full ring ahead of it, ring / rate: the ratio of
    # the two latencies is that of the two rates pktsim is given (true by construction).
    rows.append(
        row(
            "latency at saturation, PCI Express / PCI-X (recycling kernel)",
            0.5,
            pcie_over["latency_ns"]["p50"] / pcix["latency_ns"]["p50"],
            "ratio",
            "003 IV ('halve the latency at saturation')",
            kind="derived",
            derived_from=f"a full ring over each bus's rate: the input ratio {RECYCLING_PCIX_KPPS:g} / {RECYCLING_KPPS:g} kpps",
        )
    )
    fit_rows = ["standard kernel, 64 B, PCI Express", "skb recycling, 64 B, PCI Express"]
    rows.append(
        row(
            f"rx polls per received packet at low load ({curve[0]['load']:.0%})",
            2.0,
            curve[0]["polls_per_packet"],
            "polls/packet",
            "003 Fig. 7",
            fitted_on=fit_rows,
        )
    )
    near = [p for p in curve if p["throughput_pps"] < 0.99 * RECYCLING_KPPS * 1e3][-1]
    rows.append(
        row(
            f"rx polls per received packet near saturation ({near['load']:.0%} load)",
            0.22,
            near["polls_per_packet"],
            "polls/packet",
            "003 Fig. 7 (pktsim's floor is 1/weight = 1/64)",
            fitted_on=fit_rows,
        )
    )
    rows.append(
        row(
            "IRQs per packet at saturation",
            "~0",
            curve[-1]["irqs_per_packet"],
            "IRQs/packet",
            "003 IV, Figs. 4, 7",
            holds=curve[-1]["irqs_per_packet"] < 0.01,
        )
    )
    return {"paper": "003", "title": TITLE, "rows": rows, "curve": curve}


def figures(d: Path, res: dict) -> list[tuple[str, str]]:
    """The plots that correspond to the paper's figures, drawn into ``d`` from the
    reproduction's result ``res``: (file name, caption) each, for the report."""
    import pandas as pd

    from .. import plots

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


def scenario(res: dict) -> dict:
    """The report's scenario: the standard kernel at line rate, its costs fitted as IV's."""
    return node(cycles(RECYCLING_KPPS, STANDARD_KPPS), False, "100%")
