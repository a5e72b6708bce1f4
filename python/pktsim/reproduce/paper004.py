"""004 (Rizzo et al., Transparent acceleration of software packet forwarding using netmap).

Fig. 6 (table in the text): OpenvSwitch forwarding 64 B frames on one 2.93 GHz i7-870 core,
over libpcap and over netmapcap, for batch sizes 1 to 500. pktsim models each library as
batched system calls: a call that moves B frames costs t_call + B t_packet, so at
saturation 1 / T(B) = t_packet + t_call / B. For each library the two costs are fitted on
B = 2 and B = 50 only (004 calls 50 "a reasonable compromise"); the simulator then runs
every batch size at the 10 GbE line rate and the other seven are predictions.

Fig. 11: userspace Click, original and with the packet pool (fixed-size buffers recycled
per thread instead of two locked allocations per packet), burst 1 and 50. pktsim keeps one
cost per library, one allocator cost (fitted on libpcap, original vs pool) and one per-
burst cost (fitted on netmapcap, burst 1 vs 50), and predicts the remaining two rows:
original Click over netmapcap, and the pool over libpcap with burst 50.
"""

from __future__ import annotations

from pathlib import Path

from ..sim import run
from .rows import row

TITLE = "Rizzo et al., Transparent acceleration of software packet forwarding using netmap"

FIG6 = {  # batch size -> (libpcap kpps, netmapcap kpps)
    1: (373, 250),
    2: (510, 466),
    3: (579, 619),
    5: (638, 882),
    10: (709, 1430),
    20: (744, 1970),
    50: (764, 2500),
    100: (775, 2730),
    500: (781, 2960),
}
FIT_AT = (2, 50)

FIG11 = {  # (library, allocator, burst) -> kpps
    ("libpcap", "original", 1): 400,
    ("netmapcap", "original", 1): 1300,
    ("libpcap", "pool", 1): 490,
    ("libpcap", "pool", 50): 495,
    ("netmapcap", "pool", 1): 3300,
    ("netmapcap", "pool", 50): 3950,
}


def node(t_call_ns: float, t_packet_ns: float, batch: int) -> dict:
    """One i7-870 core at 2.93 GHz forwarding 64 B frames between two 10 GbE ports (rings of
    2048), offered at line rate; the application reads with batched system calls."""
    return {
        "name": "004 forwarder",
        "cpu": {"frequency": "2.93GHz"},
        "link": {"rate": "10Gbit/s"},
        "traffic": {"rate": "100%", "size": "64B"},
        "nic": {"rx_ring": 2048, "tx_ring": 2048},
        "host": {
            "io": "batched-syscall",
            "t_proc": "0ns",
            # The fit's closed form (1/T = t_packet + t_call/B) has no interrupt term, and
            # 004 gives no interrupt cost: a sleeping reader's wake-up is free here.
            "t_irq": "0ns",
            "batch": {"size": batch, "t_call": f"{t_call_ns * 1000:.0f}ps", "t_packet": f"{t_packet_ns * 1000:.0f}ps"},
        },
        "measure": {"warmup": "2ms", "duration": "20ms"},
    }


def fit(b1: int, t1_pps: float, b2: int, t2_pps: float) -> tuple[float, float]:
    """(t_call, t_packet) in ns from two saturated throughputs: 1/T = t_packet + t_call/B."""
    x1, x2 = 1e9 / t1_pps, 1e9 / t2_pps
    t_call = (x1 - x2) / (1 / b1 - 1 / b2)
    return t_call, x1 - t_call / b1


def reproduce() -> dict:
    rows, fits = [], {}
    for li, lib in enumerate(("libpcap", "netmapcap")):
        (b1, b2) = FIT_AT
        t_call, t_packet = fit(b1, FIG6[b1][li] * 1e3, b2, FIG6[b2][li] * 1e3)
        fits[lib] = {"t_call_ns": t_call, "t_packet_ns": t_packet}
        for b, kpps in FIG6.items():
            r = run(node(t_call, t_packet, b))
            fitted_on = {} if b in FIT_AT else {"fitted_on": [f"OpenvSwitch over {lib}, batch {f}" for f in FIT_AT]}
            rows.append(
                row(f"OpenvSwitch over {lib}, batch {b}", float(kpps[li]), r["throughput_pps"] / 1e3, "kpps", "004 Fig. 6", fitted=b in FIT_AT, **fitted_on)
            )

    # Fig. 11: per packet = library + allocator + burst cost / burst.
    ns = {k: 1e6 / v for k, v in FIG11.items()}
    alloc = ns[("libpcap", "original", 1)] - ns[("libpcap", "pool", 1)]
    per_burst = (ns[("netmapcap", "pool", 1)] - ns[("netmapcap", "pool", 50)]) / (1 - 1 / 50)
    base = {lib: ns[(lib, "pool", 1)] - per_burst for lib in ("libpcap", "netmapcap")}
    fitted = {("libpcap", "original", 1), ("libpcap", "pool", 1), ("netmapcap", "pool", 1), ("netmapcap", "pool", 50)}

    def click(lib, allocator, burst):
        return f"Click over {lib}, {'original allocator' if allocator == 'original' else 'packet pool'}, burst {burst}"

    for (lib, allocator, burst), kpps in FIG11.items():
        t_packet = base[lib] + (alloc if allocator == "original" else 0.0)
        r = run(node(per_burst, t_packet, burst))
        held_out = (lib, allocator, burst) not in fitted
        rows.append(
            row(
                click(lib, allocator, burst),
                float(kpps),
                r["throughput_pps"] / 1e3,
                "kpps",
                "004 Fig. 11",
                fitted=not held_out,
                **({"fitted_on": [click(*k) for k in sorted(fitted)]} if held_out else {}),
            )
        )
    return {
        "paper": "004",
        "title": TITLE,
        "rows": rows,
        "fits": {**fits, "click": {"allocator_ns": alloc, "per_burst_ns": per_burst, "libpcap_ns": base["libpcap"], "netmapcap_ns": base["netmapcap"]}},
    }


def figures(d: Path, res: dict) -> list[tuple[str, str]]:
    """The plots that correspond to the paper's figures, drawn into ``d`` from the
    reproduction's result ``res``: (file name, caption) each, for the report."""
    from .. import plots

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


def scenario(res: dict) -> dict:
    """The report's scenario: OpenvSwitch over netmapcap, batch 50, its costs as fitted."""
    f = res["fits"]["netmapcap"]
    return node(f["t_call_ns"], f["t_packet_ns"], 50)
