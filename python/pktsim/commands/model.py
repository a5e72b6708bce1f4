"""``pktsim model`` (the analytical model of a scenario or a chain, and 000 Eq. 3 from a
measurement) and ``pktsim compare`` (two scenarios side by side)."""

from __future__ import annotations

from ..errors import UsageError
from ..textio import bytes_h, json_text, si, table
from .common import _load_or_active, _quantity


def cmd_model(args) -> int:
    if args.from_measurement:
        return _model_from_measurement(args)
    if not args.file:
        raise UsageError("model: give a scenario FILE (or --from-measurement with --rate and --cpu-load)")
    from ..model import GROUPS, predict
    from ..scenario import Scenario

    sc = Scenario.load(args.file, args.set)
    p = predict(sc)
    if args.json:
        print(json_text(p))
        return 0
    if "bottleneck_node" in p:
        print(format_chain_model(p, args.file))
        return 0
    d = sc.data
    fib = p["fib"]
    print(f"pktsim model: {p['name']}  ({args.file})")
    print(
        f"  CPU {si(p['frequency_hz'], 'Hz', 2)} x {p['cores']} core{'s' if p['cores'] != 1 else ''}, "
        f"link {d['link']['rate']}, mean frame {p['mean_frame_bytes']:g} B, "
        f"{fib['flows']} flow{'s' if fib['flows'] != 1 else ''}, FIB {fib['routes']} route{'s' if fib['routes'] != 1 else ''} "
        f"(working set {bytes_h(fib['working_set_bytes'])} in {fib['resides_in']})"
    )
    print()
    total = p["c_total_cycles"]
    # (A node whose whole cost is elsewhere, t_clean or an event's, has C_total 0: no shares.)
    rows = [[g, f"{p['cycles_by_group'][g]:.1f}", f"{100 * p['cycles_by_group'][g] / total:.1f}%" if total else "-"] for g in GROUPS]
    rows.append(["C_total (Eq. 2)", f"{total:.1f}", "100.0%" if total else "-"])
    print(table(rows, ["group", "cycles/packet", "share"], "lrr"))
    print()
    busy = [c for c in p["per_core"] if c["share"] > 0]
    load_note = "" if p["cpu_load_max"] <= p["cpu_load"] + 1e-9 else f"up to {100 * p['cpu_load_max']:.1f} % with each frame paying its events alone"
    lines = [
        ["R_max (Eq. 1, one core)", si(p["r_max_pps"], "pps"), f"{p['ns_per_packet']:.1f} ns per packet on a core of this node"],
        ["CPU capacity (all cores)", si(p["r_cpu_pps"], "pps"), f"{len(busy)} of {p['cores']} cores get traffic (RSS)" if p["cores"] > 1 else ""],
        ["loss-free capacity", si(p["capacity_pps"], "pps"), "where the first core (or the link) saturates"],
        ["line rate", si(p["line_rate_pps"], "pps"), ""],
        ["offered", si(p["offered_pps"], "pps"), ""],
        ["predicted", si(p["predicted_pps"], "pps"), f"bottleneck: {p['bottleneck']}" + (", saturated" if p["saturated"] else "")],
        ["dropped", si(p["dropped_pps"], "pps"), ""],
        ["CPU load", f"{100 * p['cpu_load']:.1f} %", load_note],
    ]
    # The events the model predicts at this rate (its closed forms below saturation).
    if p["irq_per_s"] >= 0.5:
        lines.append(["interrupts", si(p["irq_per_s"], "/s"), ""])
    if p["polls_per_s"] >= 0.5:
        fpp = f"{p['frames_per_poll']:.1f} frames per poll" if p["frames_per_poll"] > 0 else ""
        lines.append(["polls (or calls)", si(p["polls_per_s"], "/s"), fpp])
    if p["wakeups_per_s"] >= 0.5:
        lines.append(["wake-ups", si(p["wakeups_per_s"], "/s"), "NAPI threads, the reader, a sleeping call"])
    print(table(lines, ["quantity", "value", "note"], "lrl"))
    terms = [[k, f"{v:.1f}"] for k, v in p["frame_cost_ns"].items() if v > 0]
    if terms:
        print()
        print(table(terms, ["time per frame at saturation", "ns"], "lr"))
    notes = list(p["notes"])
    if p["cpu_load_max"] > p["cpu_load"] + 1e-9 or not p["cpu_load_basis"].startswith("exact"):
        notes.insert(0, "CPU load: " + p["cpu_load_basis"])
    from ..textio import fit_lines

    for n in notes:
        print(fit_lines(f"  note: {n}"))
    return 0


def format_chain_model(p: dict, origin: str) -> str:
    """``pktsim model CHAIN``: each node's capacity, the links', and the bottleneck."""
    rows = []
    for i, (name, n) in enumerate(zip(p["node_names"], p["nodes"])):
        inbound = si(p["link_rate_pps"][i - 1], "pps") if i else "-"
        mark = "  <- bottleneck" if i == p["bottleneck_node"] else ""
        rows.append([str(i), name, si(n["capacity_pps"], "pps"), n["bottleneck"], inbound, f"{100 * n['cpu_load']:.1f} %{mark}"])
    b = p["bottleneck_node"]
    from ..textio import fit_lines

    return "\n".join(
        [
            fit_lines(f"pktsim model: chain {p['name']}  ({origin}), {len(p['nodes'])} nodes"),
            "",
            table(rows, ["node", "name", "loss-free capacity", "limited by", "inbound link", "CPU load"], "llrlrl"),
            "",
            fit_lines(
                f"  chain capacity {si(p['r_max_pps'], 'pps')}: node {b} ({p['node_names'][b]}, {p['bottleneck']}); "
                f"offered {si(p['offered_pps'], 'pps')}, predicted {si(p['predicted_pps'], 'pps')}" + (" (saturated)" if p["saturated"] else "")
            ),
        ]
    )


def _model_from_measurement(args) -> int:
    from ..model import from_measurement, parse_quantity
    from ..scenario import Scenario

    if args.rate is None:
        raise UsageError("model --from-measurement: --rate is required (e.g. --rate 1.67Mpps)")
    rate = _quantity("packetrate", "--rate", args.rate)
    if args.freq is not None:
        freq = _quantity("frequency", "--freq", args.freq)
    elif args.file:
        data = Scenario.load(args.file, args.set).data
        if "nodes" in data:
            raise UsageError(f"model --from-measurement: {args.file} is a chain; give --freq, or one node's scenario")
        freq = parse_quantity("frequency", data["cpu"]["frequency"])
    else:
        raise UsageError("model --from-measurement: --freq is required without a scenario FILE (e.g. --freq 3.3GHz)")
    load, active = _load_or_active(args)
    try:
        m = from_measurement(rate, freq, load, active)
    except ValueError as e:
        raise UsageError(f"model --from-measurement: {e}") from None
    if args.json:
        print(json_text(m))
        return 0
    print("pktsim model --from-measurement (000 Eq. 3: C_total = f * CPU_load / R)")
    print(
        table(
            [
                ["measured rate", si(m["rate_pps"], "pps")],
                ["CPU frequency", si(m["frequency_hz"], "Hz", 2)],
                ["CPU load", f"{100 * m['cpu_load']:.1f} %"],
                ["active cycles", si(m["active_cycles_per_s"], "cycles/s")],
                ["C_total", f"{m['c_total_cycles']:.1f} cycles/packet"],
                ["R_max at full load (Eq. 1)", si(m["r_max_pps"], "pps")],
            ],
            ["quantity", "value"],
            "ll",
        )
    )
    return 0


def cmd_compare(args) -> int:
    from ..comparison import compare
    from ..scenario import Scenario

    a = Scenario.load(args.a, args.set)
    b = Scenario.load(args.b, args.set)
    res = compare(a, b)
    if args.json:
        print(json_text(res))
        return 0
    print(f"pktsim compare: A = {res['a']['name']} ({args.a})")
    print(f"                B = {res['b']['name']} ({args.b})")
    print()
    if res["config_diff"]:
        print("configuration: B differs from A in")
        print(
            table(
                [[d["key"], "-" if d["a"] is None else str(d["a"]), "-" if d["b"] is None else str(d["b"])] for d in res["config_diff"]],
                ["key", "A", "B"],
                "lll",
            )
        )
    else:
        print("configuration: A and B are the same scenario")
    print()

    def fmt(v, unit):
        if v is None:
            return "-"
        if unit in ("pps", "1/s"):
            return si(v, "pps" if unit == "pps" else "/s")
        if unit == "ns":
            return f"{v / 1e3:.2f} us"
        if unit == "fraction":
            return f"{100 * v:.2f} %"
        return f"{v:.2f}"

    rows = []
    for r in res["rows"]:
        rel = "" if r["rel_diff"] is None else f"{100 * r['rel_diff']:+.1f}%"
        diff = "-" if r["diff"] is None else (fmt(r["diff"], r["unit"]) if r["unit"] != "fraction" else f"{100 * r['diff']:+.2f} pp")
        rows.append([r["quantity"], fmt(r["a"], r["unit"]), fmt(r["b"], r["unit"]), diff, rel])
    print(table(rows, ["quantity", "A", "B", "B - A", "change"], "lrrrr"))
    return 0
