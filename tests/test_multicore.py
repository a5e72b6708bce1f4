"""001: multi-core router with RT / n-RT rings and ring-scheduling strategies."""

import json

import pytest
from conftest import EXAMPLES, run_cli

import pktsim

RT = EXAMPLES / "meyer2014-rt.toml"


def test_run_json_has_per_class_and_per_ring():
    r = json.loads(run_cli("run", RT, "--json", "--set", "measure.duration=100ms").stdout)
    assert set(r["per_class"]) == {"rt", "nrt"}
    assert len(r["per_ring"]) == 8 and {g["queue"] for g in r["per_ring"]} == {"rt", "nrt"}
    for g in list(r["per_class"].values()) + r["per_ring"]:
        assert {"offered_pps", "throughput_pps", "loss_ratio", "latency_ns", "drops", "latency_mean_ci95_ns"} <= set(g)
    assert sum(g["forwarded_packets"] for g in r["per_ring"]) == r["forwarded_packets"]
    assert sum(g["forwarded_packets"] for g in r["per_class"].values()) == r["forwarded_packets"]
    # RT frames (TOS 0xb8) land only in the rt rings.
    rt_in_rt_rings = sum(g["forwarded_packets"] for g in r["per_ring"] if g["queue"] == "rt")
    assert rt_in_rt_rings == r["per_class"]["rt"]["forwarded_packets"]
    # The T+ adder: nothing is faster than x + 74.88 us.
    assert r["latency_ns"]["min"] >= 74_880 + 4_040 - 10


def test_at_low_load_the_fastest_frame_takes_t_plus_and_one_service_time():
    """001's adder T+ = 4 T_DMA + 2 nic_batch x, on top of the frame's own x from rx ring to
    tx ring. With x = t_proc + 1518 B * t_proc_per_byte = 497 + 3543.012 = 4040.012 ns,
    T_DMA = 2.56 us and nic_batch = 8, a frame that finds its core idle takes
    4 * 2560 + 17 * 4040.012 = 78,920.204 ns (at 10 kpps many do, in both classes)."""
    r = pktsim.run(RT, sets={"traffic.rate": "10kpps", "measure.duration": "100ms"})
    assert r["t_proc_ns"] == pytest.approx(4040.012, abs=1e-6)
    want = 4 * 2560 + 17 * 4040.012
    assert r["latency_ns"]["min"] == pytest.approx(want, abs=0.01)
    for c in ("rt", "nrt"):
        assert r["per_class"][c]["latency_ns"]["min"] == pytest.approx(want, abs=0.01), c


@pytest.mark.parametrize("kind", ["sq", "quota", "rr", "prio", "priowfq", "drr"])
def test_every_strategy_runs_and_loses_nothing_at_80_percent(kind):
    sets = {"host.strategy.kind": kind, "measure.duration": "100ms", "host.strategy.weights": [3, 1]}
    r = pktsim.run(RT, sets=sets)
    assert r["loss_ratio"] == 0.0
    assert r["io"]["strategy"] == kind


def test_strategy_parameters_are_validated():
    proc = run_cli("run", RT, "--set", "host.strategy.kind=drr", check=False)
    assert proc.returncode == 2 and "host.strategy.weights" in proc.stderr
    proc = run_cli("run", RT, "--set", "nic.filters.0.queue=gold", check=False)
    assert proc.returncode == 2 and "nic.filters[0].queue" in proc.stderr and "rt, nrt" in proc.stderr


@pytest.fixture(scope="module")
def rep001(reproduced_all):
    return next(p for p in reproduced_all if p["paper"] == "001")


def test_reproduce_001_relations_hold(rep001):
    assert rep001["paper"] == "001"
    rows = {r["quantity"]: r for r in rep001["rows"]}
    must_hold = [
        "SQ: RT and n-RT mean latency equal",
        "Prio: lower bound of RT latency",
        "Prio: upper bound of n-RT latency",
        "RR: RT vs n-RT mean latency at 50% RT",
        "RR: the smaller class has the lower latency",
        "PrioWFQ: RT latency close to Prio at 10% utilisation",
        "PrioWFQ: RT latency nearer Prio than RR at 10% RT, 80% utilisation",
        "Prio: latency growth from 50% to 98% utilisation",
    ]
    for prefix in must_hold:
        r = next(v for q, v in rows.items() if q.startswith(prefix))
        assert r["holds"] is True, r
    # Known deviation, reported as such: with preemptive 6 / 1.5 us slices RT gets 80% of a
    # contended core, so at 98% load its latency stays near Prio's, not RR's.
    high = rows["PrioWFQ: RT latency nearer RR than Prio at 98% utilisation"]
    assert high["holds"] is False and "80%" in high["note"], high
    assert rows["maximum throughput"]["predicted"] == pytest.approx(1.0, abs=0.02)
    assert rows["maximum throughput per core"]["predicted"] == pytest.approx(0.25, abs=0.005)


def test_reproduce_001_curves_have_confidence_intervals(rep001):
    pts = rep001["curves"]["utilisation"]
    mid = [p for p in pts if p["strategy"] == "prio" and abs(p["utilisation"] - 0.8) < 1e-9][0]
    assert 0 < mid["rt_ci95_ns"] < 0.1 * mid["rt_mean_ns"]
