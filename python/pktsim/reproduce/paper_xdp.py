"""xdp2018 (Høiland-Jørgensen et al., The eXpress Data Path, CoNEXT 2018).

The machine: one Xeon E5-1650 v4 at 3.6 GHz (hyperthreading off), Mellanox ConnectX-5
(mlx5, ``rx_cqe_moder`` on: pktsim's DIM ``mlx5-cqe`` profile), 100 Gbit/s, 64 B frames,
Linux 4.18-rc. The figures come from the paper and the raw tables of its repository
(``tohojo/xdp-paper``, ``benchmarks/bench01_baseline.org``):

* drop rate vs cores (Fig. 3): XDP drop, Linux dropping in the iptables ``raw`` table;
* CPU usage vs offered load in the drop test (Fig. 4, ``mpstat``), XDP and Linux;
* forwarding rate vs cores (Fig. 5): XDP_TX back out of the same NIC, XDP_REDIRECT to the
  other NIC.

pktsim's node is NAPI with an XDP program (``host.io = "xdp"``). Each path's per-frame cost
is fitted on its single-core rate, one number each: the native drop path (``t_driver``,
program included), XDP_TX and redirect (``t_xmit`` on top of it) and Linux's drop (the
stack up to the raw table, modelled as generic XDP's drop: the frame ends after the skb
and ``ip_rcv``). The multi-core rates (RSS over 1024 flows, no contention) are then k times
the one-core rate by construction: ``derived`` rows, next to what the paper measured.

The CPU curves (Fig. 4) are ``mpstat``'s busy time of the core at a steady offered load.
Below full load the core does not run at 3.6 GHz: the E5-1650 v4 has no HWP (it came with
Skylake), so ``intel_pstate``'s ``powersave`` governor sets its clock from the last
sample's busy share, 1.25 x max x busy, down to its lowest clock of 1.2 GHz
(``[cpu.freq]``); the same frames then keep the core busy longer.

The moderation differs between the two paths, by the driver: mlx5's DIM samples the rq
statistics, which count a frame only when the driver builds an skb for it. Frames XDP
drops never reach them, so XDP's DIM sees no traffic and stays at its first profile
(8 us from the first completion, 128 frames: ``moderation::dim``), about 83,000 to 100,000
interrupts a second from 0.25 to 1 Mpps; the stack's frames are counted, and its DIM walks
to 64 us at light load. The paper's latency table agrees (``bench07_latency.org``: at
1 Mpps XDP_REDIRECT's mean is 7 us, 98.1% under 10 us, where a 64 us profile would hold
frames for 30 us; Linux's is 20 us).

Fitted on the CPU curves, at most two loads a path: one per-interrupt cost (``t_irq``: the
hard IRQ, at 3.6 GHz) on XDP's CPU at 1 and 10 Mpps (one decade apart: their mean relative
error 0), with the default per-poll cost; and the stack's per-poll cost (``t_poll``: its
poll also flushes GRO and hands the poll's list to the stack) on Linux's CPU at 1 Mpps.
Every other point of both curves is predicted, as is XDP_REDIRECT's latency at 1 Mpps.

What pktsim leaves out: the PCI Express bus, which caps the NIC near 70 Mpps for XDP_TX
and bends the drop curve above four cores (the paper says so: those rows are flagged);
turbo (the clock at full load is taken as the 3.6 GHz the paper names); the core's idle
states (``cpu.idle.table = "poll"``: leaving C1 at these loads is inside ``t_irq``).
"""

from __future__ import annotations

from pathlib import Path

from .. import schema_info
from ..sim import run, run_all
from .rows import row

TITLE = "Høiland-Jørgensen et al., The eXpress Data Path (CoNEXT 2018)"
SOURCE = "xdp2018"

# Mpps per core count (bench01_baseline.org: xdp_drop_data_rx_cqe_compress, linux_iptables_drop,
# xdp_tx_data03_256, xdp_redirect_data).
DROP_XDP = {1: 23.86, 2: 45.51, 3: 67.80, 4: 88.82, 5: 99.36, 6: 108.61}
DROP_LINUX = {1: 4.837, 2: 10.23, 3: 15.10, 4: 20.08, 5: 25.00, 6: 29.44}  # 1 core: the text's 4.8 (re-run: 4,837,269 pps)
FWD_TX = {1: 16.90, 2: 34.85, 3: 51.88, 4: 68.95, 5: 70.16, 6: 68.74}
FWD_REDIRECT = {1: 8.64, 2: 16.74, 3: 25.74, 4: 34.19, 5: 41.46, 6: 46.06}
# CPU % of one core vs offered Mpps in the drop test (cpu_stats: 100 - %idle).
CPU_XDP = {0.25: 7.0, 0.5: 11.7, 1: 19.6, 2: 28.9, 3: 35.2, 5: 47.3, 10: 62.4, 15: 74.7, 20: 91.8}
CPU_LINUX = {0.25: 21.0, 0.5: 30.2, 1: 42.6, 2: 59.6, 3: 70.8, 5: 100.0}
CPU_FIT_AT = (1, 10)  # Mpps, XDP
LINUX_FIT_AT = 1  # Mpps, Linux
# Forwarding latency at 1 Mpps (bench07_latency.org, T-Rex, XDP_REDIRECT between the two
# ConnectX-5 NICs): XDP's mean, and DPDK's on the same path, which is the generator's, the
# wires' and the NICs' share of every method's figure (DPDK's own polling takes a fraction
# of a microsecond of it).
LATENCY_XDP_US = 7.0
LATENCY_DPDK_US = 3.0
# A multi-core rate within this share of k times the one-core rate is that by construction:
# the window counts whole frames and tx batches (up to 256 frames in 20 ms, 1.3e-4 of six
# cores' XDP_TX), where contention or an uneven spread would take percents.
BY_CONSTRUCTION = 1e-3
# The rate rows' window: a core at the line rate never runs dry, so no interrupt comes and DIM
# never acts; 2 ms from empty rings reach the steady state, and 10 ms hold 240,000 frames of
# one core's drop (a tx batch of 256 frames is 1.5e-4 of one core's XDP_TX). The CPU rows
# keep the longer window below: DIM walks its profiles in their warm-up.
RATE_MEASURE = {"warmup": "2ms", "duration": "10ms"}
# Where the PCI Express bus, which pktsim does not model, limits the NIC (the paper's words).
PCIE_BOUND = {("drop", 5), ("drop", 6), ("tx", 5), ("tx", 6)}


def node(
    xdp: dict,
    cores: int = 1,
    rate: str = "100%",
    t_irq_ns: float = 0.0,
    t_proc_ns: float | None = None,
    measure: dict | None = None,
    t_poll_ns: float | None = None,
) -> dict:
    host = {"io": "xdp", "t_irq": ps(t_irq_ns), "xdp": xdp}
    if t_proc_ns is not None:
        host["t_proc"] = ps(t_proc_ns)
    if t_poll_ns is not None:
        host["t_poll"] = ps(t_poll_ns)
    return {
        "name": "xdp2018 node",
        "cpu": {"frequency": "3.6GHz", "cores": cores, "idle": {"table": "poll"}, **clock(rate)},
        "link": {"rate": "100Gbit/s"},
        "traffic": {"rate": rate, "size": "64B", "flows": 1024},
        "nic": {"rx_ring": 512, "tx_ring": 512, "tx_vector": "shared", "itr": {"mode": "dim", "profile": "mlx5-cqe"}},
        "host": host,
        # DIM walks its profiles in the warm-up before the window opens.
        "measure": measure or {"warmup": "40ms", "duration": "20ms"},
    }


def clock(rate: str) -> dict:
    """Below full load intel_pstate (no HWP on Broadwell) clocks the core down to 1.2 GHz;
    at the line rate it runs at its highest clock, as a node without a governor does."""
    return {} if rate == "100%" else {"freq": {"governor": "powersave", "min": "1.2GHz"}}


def ps(ns: float) -> str:
    return f"{ns * 1000:.0f}ps"


def paths(t_drop_ns: float, t_tx_ns: float, t_redirect_ns: float, t_linux_ns: float) -> dict[str, dict]:
    """The four paths' XDP settings (and Linux's stack time), from the fitted costs."""
    return {
        "drop": {"xdp": {"action": "drop", "t_driver": ps(t_drop_ns)}},
        "tx": {"xdp": {"action": "tx", "t_driver": ps(t_drop_ns), "t_xmit": ps(t_tx_ns)}},
        "redirect": {"xdp": {"action": "redirect", "t_driver": ps(t_drop_ns), "t_xmit": ps(t_redirect_ns)}},
        "linux": {"xdp": {"mode": "generic", "action": "drop", "t_skb": ps(t_linux_ns)}, "t_proc_ns": t_linux_ns},
    }


def loaded(path: dict, cores: int, offered: str, t_irq_ns: float = 0.0) -> dict:
    """A path's node on ``cores`` cores at an offered load below the line rate (the CPU
    rows' window)."""
    return node(path["xdp"], cores, offered, t_irq_ns, path.get("t_proc_ns"), t_poll_ns=path.get("t_poll_ns"))


def rate(path: dict, cores: int, offered: str, t_irq_ns: float = 0.0) -> dict:
    """One run of :func:`loaded`."""
    return run(loaded(path, cores, offered, t_irq_ns))


def fit_cost(nodes, points: dict[float, float]) -> float:
    """The cost (ns) at which the CPU of ``nodes(cost, mpps)`` (a scenario) at the offered
    loads of `points` (Mpps: %) is right on average (the mean relative error 0), to 0.3 ns:
    more cost, more CPU, so Brent's method brackets the root between 0 and 20 us (about 8
    evaluations where bisection took 16), the loads of each side by side."""
    from scipy.optimize import brentq

    def error(cost: float) -> float:
        runs = run_all([nodes(cost, m) for m in points])
        return sum(100 * r["cpu_utilization"] / pct - 1 for r, pct in zip(runs, points.values()))

    return float(brentq(error, 0.0, 20_000.0, xtol=0.3))


def fit_t_irq(drop: dict, points: dict[float, float]) -> float:
    """The per-interrupt cost (ns) at which the XDP drop path's CPU at `points` is right on
    average."""
    return fit_cost(lambda t_irq, m: loaded(drop, 1, f"{m}Mpps", t_irq), points)


def fit_t_poll(linux: dict, t_irq_ns: float, mpps: float, pct: float) -> float:
    """The stack's per-poll cost (ns) at which the Linux path's CPU at `mpps` is `pct`, with
    the interrupt cost fitted on XDP."""
    return fit_cost(lambda t_poll, m: loaded({**linux, "t_poll_ns": t_poll}, 1, f"{m}Mpps", t_irq_ns), {mpps: pct})


def poll_share_ns() -> float:
    """A frame's share of a NAPI poll at saturation (the default ``host.t_poll`` over the
    poll weight of 64): the single-core rates hold it, the node pays it per poll."""
    from ..model import parse_quantity

    return parse_quantity("duration", schema_info.node("host.t_poll")["default"]) / 1e3 / 64


def reproduce() -> dict:
    # Single-core rates fix each path's per-frame cost: 1/R, less what the path already has
    # (a frame's share of a poll, and for forwarding the drop path's cost).
    t_drop = 1e3 / DROP_XDP[1] - poll_share_ns()
    t_tx = 1e3 / FWD_TX[1] - t_drop - poll_share_ns()
    t_redirect = 1e3 / FWD_REDIRECT[1] - t_drop - poll_share_ns()
    t_linux = 1e3 / DROP_LINUX[1] - poll_share_ns()
    p = paths(t_drop, t_tx, t_redirect, t_linux)
    rows = []
    tables = (
        ("drop", DROP_XDP, "XDP drop"),
        ("linux", DROP_LINUX, "Linux drop (raw table)"),
        ("tx", FWD_TX, "XDP_TX forwarding, same NIC"),
        ("redirect", FWD_REDIRECT, "XDP_REDIRECT forwarding, other NIC"),
    )
    # Every rate row's run, side by side on the machine's CPUs.
    rated = iter(run_all([node(p[name]["xdp"], cores, "100%", 0.0, p[name].get("t_proc_ns"), RATE_MEASURE) for name, table, _ in tables for cores in table]))
    for name, table, label in tables:
        one_core = None
        for cores, mpps in table.items():
            r = next(rated)
            got = r["throughput_pps"] / 1e6
            extra = {"note": "the PCI Express bus limits the NIC here (xdp2018 §4); pktsim does not model it"} if (name, cores) in PCIE_BOUND else {}
            if cores == 1:
                one_core, kind = got, "fitted"
            elif abs(got - cores * one_core) <= BY_CONSTRUCTION * got:
                # No contention between cores and RSS's even spread: k cores forward k times
                # the fitted rate, whatever the paper measured (true by construction).
                kind = "derived"
                extra["derived_from"] = (
                    f"{cores} x the fitted one-core rate ({one_core:.4g} Mpps): pktsim's cores do not contend, and RSS spreads the 1024 flows evenly"
                )
            else:
                kind = "predicted"
                extra["fitted_on"] = [f"{label}, 1 core"]
            rows.append(
                row(
                    f"{label}, {cores} core{'s' * (cores > 1)}", mpps, got, "Mpps", f"{SOURCE} Fig. {3 if name in ('drop', 'linux') else 5}", kind=kind, **extra
                )
            )

    t_irq = fit_t_irq(p["drop"], {m: CPU_XDP[m] for m in CPU_FIT_AT})
    p["linux"]["t_poll_ns"] = fit_t_poll(p["linux"], t_irq, LINUX_FIT_AT, CPU_LINUX[LINUX_FIT_AT])
    cpu_fit = [f"XDP drop CPU at {m} Mpps" for m in CPU_FIT_AT]
    linux_fit = f"Linux drop CPU at {LINUX_FIT_AT} Mpps"
    curve = []
    cpu_tables = (
        ("drop", CPU_XDP, "XDP", DROP_XDP[1], ["XDP drop, 1 core", *cpu_fit]),
        ("linux", CPU_LINUX, "Linux", DROP_LINUX[1], ["Linux drop (raw table), 1 core", *cpu_fit, linux_fit]),
    )
    latency_node = loaded(p["redirect"], 1, "1Mpps", t_irq)
    runs = run_all([loaded(p[name], 1, f"{mpps}Mpps", t_irq) for name, table, *_ in cpu_tables for mpps in table] + [latency_node])
    latency = runs.pop()
    ran = iter(runs)
    for _, table, label, capacity, fitted_on in cpu_tables:
        for mpps, pct in table.items():
            r = next(ran)
            cpu = 100 * r["cpu_utilization"]
            state = r["io"].get("moderation_state", [{}])[0]
            if f"{label} drop CPU at {mpps} Mpps" in (*cpu_fit, linux_fit):
                kind, extra = "fitted", {}
            elif mpps >= capacity:
                # Offered at or above the capacity fitted on the one-core rate: the core is
                # saturated, 100% whatever the paper measured.
                kind, extra = (
                    "derived",
                    {"derived_from": f"offered {mpps} Mpps at or above the one-core capacity fitted on its rate ({capacity} Mpps): a saturated core"},
                )
            else:
                kind, extra = "predicted", {"fitted_on": fitted_on}
            curve.append(
                {
                    "path": label,
                    "offered_pps": mpps * 1e6,
                    "cpu_pct": cpu,
                    "reported_pct": pct,
                    "irq_per_s": r["irq_per_s"],
                    "dim_usec": state.get("usec"),
                    "cpu_freq_hz": r["cpu_freq_hz"],
                    "kind": kind,
                }
            )
            rows.append(row(f"{label} drop CPU at {mpps} Mpps", pct, cpu, "%", f"{SOURCE} Fig. 4", kind=kind, **extra))
    rows.append(
        row(
            "XDP_REDIRECT forwarding latency at 1 Mpps, mean",
            LATENCY_XDP_US,
            latency["latency_ns"]["mean"] / 1e3 + LATENCY_DPDK_US,
            "us",
            f"{SOURCE} Table 1",
            kind="predicted",
            fitted_on=["XDP drop, 1 core", "XDP_REDIRECT forwarding, other NIC, 1 core", *cpu_fit],
            inputs=f"the generator's, wires' and NICs' share: DPDK's mean on the same path ({LATENCY_DPDK_US:g} us)",
            dim_usec=latency["io"].get("moderation_state", [{}])[0].get("usec"),
        )
    )
    per_core = rows[0]["predicted"] / next(r["predicted"] for r in rows if r["quantity"].startswith("Linux drop (raw table), 1"))
    # The per-core ratio is that of the two fitted one-core rates at every core count (the
    # multi-core rates are k times them): true by construction, not a prediction.
    rows.append(
        row(
            "XDP drops over 4x as many frames per core as the stack",
            None,
            per_core,
            "x",
            f"{SOURCE} §4.1",
            kind="derived",
            derived_from=f"the ratio of the fitted one-core rates ({DROP_XDP[1]} / {DROP_LINUX[1]} Mpps), the same at every core count",
            holds=all(
                next(r["predicted"] for r in rows if r["quantity"] == f"XDP drop, {k} core{'s' * (k > 1)}")
                > 4 * next(r["predicted"] for r in rows if r["quantity"] == f"Linux drop (raw table), {k} core{'s' * (k > 1)}")
                for k in (1, 2, 3, 4)
            ),
        )
    )
    return {
        "paper": SOURCE,
        "title": TITLE,
        "rows": rows,
        "curve": curve,
        "fits": {
            "t_drop_ns": t_drop,
            "t_xmit_tx_ns": t_tx,
            "t_xmit_redirect_ns": t_redirect,
            "t_linux_drop_ns": t_linux,
            "t_irq_ns": t_irq,
            "t_poll_linux_ns": p["linux"]["t_poll_ns"],
        },
    }


def figures(d: Path, res: dict) -> list[tuple[str, str]]:
    """The plots that correspond to the paper's figures, drawn into ``d`` from the
    reproduction's result ``res``: (file name, caption) each, for the report."""
    from .. import plots

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
            "xdp2018 Figs. 3 and 5: drop and forwarding rate vs cores (markers: the paper; 1 core fitted, k cores k times it"
            " by construction; the PCI Express bus caps the NIC above 4 cores)",
        ),
        (
            "xdp2018-cpu.png",
            "xdp2018 Fig. 4: CPU load vs offered load in the drop test (markers: the paper; the open markers fitted: one"
            " interrupt cost on XDP at 1 and 10 Mpps, the stack's poll cost on Linux at 1 Mpps; the clock intel_pstate"
            " settles at below full load; XDP's DIM stays at 8 us, the stack's walks)",
        ),
    ]


def scenario(res: dict) -> dict:
    """The report's scenario: XDP drop on one core at line rate, its costs as fitted."""
    f = res["fits"]
    return node(paths(f["t_drop_ns"], f["t_xmit_tx_ns"], f["t_xmit_redirect_ns"], f["t_linux_drop_ns"])["drop"]["xdp"], 1, "100%", f["t_irq_ns"])
