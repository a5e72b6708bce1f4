"""000 (Raumer et al., Performance Exploration of Software-based Packet Processing Systems).

Table I: maximum rate, CPU load and C_total for 64 / 512 / 1024 / 1500 B frames on one
3.3 GHz core behind a 10 Gbit/s link. pktsim predicts them from the Table II cost profiles
with Eq. 1 and the Ethernet line rate.

Table IV: cycles per group for 1 / 256 / 16,384 / 1,048,576 flows. pktsim predicts the
routing group from the one-flow profile with its FIB/cache model and C_total and R_max from
each row's other groups plus the model's routing. Section V-C/V-D add the measured peak of
1.39 Mpps at 1,048,576 flows and the FIB size at which the loss sets in (65,536 to 262,144).

What each row is (``kind``, see ``rows``):

* Table I at 64 and 512 B (R_max, CPU load) and the CPU load at 1024 and 1500 B are
  ``fitted``: each size's profile is 000's Table II, which 000 computed from these very
  rates and loads (Eq. 3), so Eq. 1 gives them back. R_max at 1024 and 1500 B is the
  Ethernet line rate, which the model chooses over the CPU: ``predicted``.
* Table I's C_total is ``derived``: pktsim sums the Table II groups of its profile, and
  000's Table II splits Table I's C_total by profile shares (000's own arithmetic).
* Table IV: the FIB model's two parameters are fitted on the 256- and 1,048,576-flow rows
  (``FIB_FIT_FLOWS``; the one-flow row is the profile itself): those rows, and the
  1.39 Mpps peak (which compares two of 000's own numbers at 1,048,576 flows), are
  ``fitted``. The 16,384-flow row is ``predicted``.
* The V-D knee is a ``relation``: the doubling of the FIB over which the fitted model's
  routing cost rises most must lie in 000's 65,536..262,144 range (the fit used neither).
* A cross-check outside 000: Linux forwarding with a full BGP table (752,138 routes) and
  4,000 destinations runs at 1.37 of 1.74 Mpps (ratio 0.787; Hoiland-Jorgensen et al., The
  eXpress Data Path, CoNEXT 2018). ``predicted``; the model misses it (see its note).
"""

from __future__ import annotations

from pathlib import Path

from ..model import predict
from ..scenario import Scenario
from .rows import row

TITLE = "Raumer et al., Performance Exploration of Software-based Packet Processing Systems"
FREQ = "3.3GHz"

TABLE_II_SIZES = (64, 512, 1024, 1500)

# Table I: size -> (R_max Mpps, CPU load, C_total)
TABLE_I = {64: (1.67, 1.00, 1979), 512: (1.67, 1.00, 1969), 1024: (1.20, 0.75, 2056), 1500: (0.82, 0.55, 2203)}

# Table IV: flows -> cycles per group (RX, alloc, prerouting, routing, postrouting, free, TX, other), C_total
TABLE_IV = {
    1: ([408, 144, 187, 200, 195, 231, 288, 325], 1979),
    256: ([429, 135, 181, 350, 181, 139, 293, 337], 2048),
    16_384: ([416, 136, 189, 406, 177, 141, 283, 343], 2093),
    1_048_576: ([426, 136, 183, 720, 184, 142, 281, 346], 2420),
}
GROUPS = ("RX", "alloc", "prerouting", "routing", "postrouting", "free", "TX", "other")
# The flow counts whose routing cycles the FIB model's parameters were fitted to
# (crates/pktsim-core/src/fib.rs, TABLE_IV_FIT); the one-flow row is the reference profile.
FIB_FIT_FLOWS = frozenset({1, 256, 1_048_576})
# Full BGP table, few destinations: (routes, destinations, Mpps with one route, Mpps with the table).
# The rows the FIB model was fitted to (a held-out row's prediction comes from them).
FIB_FIT_ROWS = [f"C_routing, {n} flows" for n in sorted(FIB_FIT_FLOWS)]
FULL_TABLE = (752_138, 4_000, 1.74, 1.37)


def node(size: int, profile: str, flows: int = 1, cycles: dict | None = None, routes: int | None = None) -> Scenario:
    """The DuT of 000 V-A: one Xeon E3-1230 v2 core at 3.3 GHz, 8 MiB L3, 10 GbE, offered
    load at line rate (the paper drives the router into saturation)."""
    data = {
        "name": f"000 DuT, {size} B, {flows} flows",
        # Power saving was off (000 V-A): the core never leaves C0.
        "cpu": {"frequency": FREQ, "cores": 1, "caches": {"l1d": "32KiB", "l2": "256KiB", "l3": "8MiB"}, "idle": {"table": "poll"}},
        "link": {"rate": "10Gbit/s"},
        "traffic": {"size": f"{size}B", "flows": flows, "rate": "100%"},
        "cost": {"profile": profile},
    }
    if routes is not None:
        data["fib"] = {"routes": routes}
    if cycles:
        data["cost"]["cycles"] = {g: f"{v}cycles" for g, v in cycles.items()}
    return Scenario.from_dict(data, origin=f"<000 scenario {size}B/{flows} flows>")


def reproduce() -> dict:
    rows = []
    for size, (r_mpps, load, c_total) in TABLE_I.items():
        p = predict(node(size, f"raumer2015-{size}B"))
        src = f"000 Table I, {size} B"
        # Where the CPU caps the rate, R_max is Eq. 1 of the profile 000 computed from that
        # rate (a fit closure); where the link does, it is a prediction.
        cpu_bound = p["bottleneck"] == "cpu"
        # Where the link caps it, R_max is the line rate at this size: true by construction.
        line = {} if cpu_bound else {"derived_from": f"the 10 Gbit/s line rate at {size} B: the link, not the CPU, is the bottleneck"}
        rows.append(
            row(
                f"R_max, {size} B",
                r_mpps,
                p["predicted_pps"] / 1e6,
                "Mpps",
                src + (" (fit closure: Eq. 1 of the Table II profile 000 computed from this rate)" if cpu_bound else " (the line rate)"),
                kind="fitted" if cpu_bound else "derived",
                bottleneck=p["bottleneck"],
                **line,
            )
        )
        rows.append(row(f"CPU load, {size} B", load, p["cpu_load"], "fraction", src + " (fit closure: Table II comes from this load by Eq. 3)", kind="fitted"))
        rows.append(
            row(
                f"C_total, {size} B",
                c_total,
                p["c_total_cycles"],
                "cycles",
                src + " (sum of Table II groups)",
                kind="derived",
                derived_from=f"the sum of 000 Table II's {size} B groups (pktsim's raumer2015-{size}B profile); 000 split Table I's C_total into them",
            )
        )

    for flows, (groups, c_total) in TABLE_IV.items():
        reported = dict(zip(GROUPS, groups))
        # Routing alone, moved by the FIB model from the one-flow profile.
        p_route = predict(node(64, "raumer2015-flows-1", flows))
        src = f"000 Table IV, {flows} flows"
        # A row whose routing cycles the FIB model was fitted to is a fit closure.
        fitted = flows in FIB_FIT_FLOWS
        kind = "fitted" if fitted else "predicted"
        extra = {} if fitted else {"fitted_on": FIB_FIT_ROWS}
        rows.append(row(f"C_routing, {flows} flows", reported["routing"], p_route["cycles_by_group"]["routing"], "cycles", src, kind=kind, **extra))
        # The row's other groups, with the model's routing: a held-out row's C_total and
        # R_max restate its C_routing prediction (the other groups are the paper's own).
        others = {g: v for g, v in reported.items() if g != "routing"}
        p = predict(node(64, "raumer2015-flows-1", flows, cycles=others))
        total = {} if fitted else {"derived_from": f"the C_routing prediction at {flows} flows plus Table IV's other groups as printed"}
        rmax = {} if fitted else {"derived_from": "Eq. 1 (3.3 GHz / C_total) of the C_total above"}
        rows.append(row(f"C_total, {flows} flows", c_total, p["c_total_cycles"], "cycles", src, kind=kind if fitted else "derived", **total))
        rows.append(
            row(
                f"R_max, {flows} flows",
                3.3e9 / c_total / 1e6,
                p["r_max_pps"] / 1e6,
                "Mpps",
                src + " (Eq. 1 of the printed C_total)",
                kind=kind if fitted else "derived",
                **rmax,
            )
        )
        if flows == 1_048_576:
            rows.append(
                row(
                    f"R_max measured peak, {flows} flows",
                    1.39,
                    p["r_max_pps"] / 1e6,
                    "Mpps",
                    "000 V-C, Fig. 8 text (pktsim's value is Eq. 1 of this flow count's Table IV row)",
                    kind=kind,
                )
            )
            fib = p["fib"]

    # V-D: where the loss sets in ('between 65.536 and 262.144 flows'): the doubling over
    # which the fitted model's routing cost rises most.
    lo, hi = knee_routes()
    rows.append(
        row(
            "FIB size over which the routing cost rises most",
            "65536..262144",
            f"{lo}..{hi}",
            "routes",
            "000 V-D (the model's steepest doubling; fitted on 256 and 1,048,576 routes only)",
            kind="relation",
            holds=lo >= 65_536 and hi <= 262_144,
        )
    )
    routes, dests, one_mpps, full_mpps = FULL_TABLE
    one = predict(node(64, "raumer2015-flows-1", 1))
    full = predict(node(64, "raumer2015-flows-1", dests, routes=routes))
    rows.append(
        row(
            f"R_max ratio, {routes:,} routes and {dests:,} destinations vs one route",
            full_mpps / one_mpps,
            full["r_max_pps"] / one["r_max_pps"],
            "ratio",
            "Hoiland-Jorgensen et al., The eXpress Data Path (CoNEXT 2018), Linux forwarding: 1.37 vs 1.74 Mpps",
            kind="predicted",
            fitted_on=FIB_FIT_ROWS,
            note=(
                "the model lets the FIB working set follow the destinations (4,000 leaves: it fits in L2/L3), "
                "while the measured drop needs about one memory access per lookup: the deep nodes of a large, "
                "sparse trie stay cold whatever the number of destinations. A working set that follows the "
                "routes would give 0.80, but would also make a single flow over a big FIB cold."
            ),
        )
    )
    return {"paper": "000", "title": TITLE, "rows": rows, "fib_at_1M_flows": fib}


def knee_routes() -> tuple[int, int]:
    """The doubling of the FIB (flows = routes) over which the model's routing cost rises most."""
    lo, hi = predict(node(64, "raumer2015-flows-1", 1))["fib"]["knee_routes"]
    return int(lo), int(hi)


def figures(d: Path, res: dict) -> list[tuple[str, str]]:
    """The plots that correspond to the paper's figures, drawn into ``d`` from the
    reproduction's result ``res``: (file name, caption) each, for the report."""
    from .. import plots
    from ..calibrate import bar_chart

    def groups(profile, flows=1):
        return predict(node(64, profile, flows))["cycles_by_group"]

    bar_chart(
        [(f"{s} B", groups(f"raumer2015-{s}B")) for s in TABLE_II_SIZES],
        d / "000-fig7.png",
        "000 Fig. 7 / Table II: cycles per packet by group",
        reported=[TABLE_I[s][2] for s in TABLE_II_SIZES],
    )

    # Fig. 9 / Table IV: each flow count's own groups with the FIB model's routing, the
    # same predictions as the table's C_total rows.
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
    # Hollow where the model was fitted to Table IV (the reproduction's own labels).
    fitted = {f for f in reported if any(r["quantity"] == f"C_routing, {f} flows" and r["kind"] == "fitted" for r in res["rows"])}
    plots.reported_vs_predicted(
        {"C_routing": [(f, reported.get(f, float("nan")), c, f in fitted) for f, c in zip(flows, routing)]},
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


def scenario(res: dict) -> dict:
    """The report's scenario: the 64 B router of Table I, its profile from Table II."""
    return node(64, "raumer2015-64B").to_dict()
