"""The real-kernel testbed without running it: calibration and prediction on recorded
sweeps, the figures and texts of saved results, the interference probe's analysis, and the
values refused before anything is built. Real runs (as root) are in test_testbed_live.py."""

import json
import os

import numpy as np
import pytest
from conftest import ROOT, run_cli

from pktsim.testbed import TestbedError, afxdp, defer, paths, runner, topology, validate, xdp

DATA = ROOT / "tests" / "data" / "testbed-sweep.json"
DEFER_DATA = ROOT / "tests" / "data" / "testbed-defer.json"
XDP_DATA = ROOT / "tests" / "data" / "testbed-xdp.json"


def point(load, t_proc, t_poll, t_wake, fpp, fpw):
    return {"load": load, "dut_ns_per_packet": t_proc + t_poll / fpp + t_wake / fpw, "packets_per_poll": fpp, "packets_per_wakeup": fpw}


# ------------------------------------------------------------------------------ calibration


def test_calibration_recovers_the_three_costs_exactly():
    pts = [point(0.1, 7000, 4000, 9000, 1.0, 1.0), point(0.45, 7000, 4000, 9000, 1.8, 4.0), point(0.9, 7000, 4000, 9000, 27, 83)]
    cal = validate.calibrate(pts)
    assert cal["t_proc_ns"] == pytest.approx(7000)
    assert cal["t_poll_ns"] == pytest.approx(4000)
    assert cal["t_wakeup_ns"] == pytest.approx(9000)
    assert cal["from_loads"] == [0.1, 0.45, 0.9]


def test_without_poll_counts_two_loads_fix_t_proc_and_t_wakeup():
    pts = [point(0.1, 2300, 0, 12000, 1.0, 1.0), point(0.7, 2300, 0, 12000, 1.0, 20.0)]
    for p in pts:
        p["packets_per_poll"] = None
    cal = validate.calibrate(pts)
    assert cal["t_proc_ns"] == pytest.approx(2300)
    assert cal["t_wakeup_ns"] == pytest.approx(12000)
    assert cal["t_poll_ns"] == 0 and cal["poll_counts"] is False


def test_a_cost_that_fits_negative_is_dropped_and_the_rest_refitted():
    # Wake-ups cost nothing here; noise would make t_wakeup slightly negative.
    pts = [point(0.1, 5000, 3000, 0, 1.0, 1.0), point(0.5, 5000, 3000, 0, 2.0, 3.0), point(0.9, 5000, 3000, 0, 30.0, 80.0)]
    pts[1]["dut_ns_per_packet"] += 30
    cal = validate.calibrate(pts)
    assert cal["t_wakeup_ns"] == 0
    assert cal["t_proc_ns"] == pytest.approx(5000, rel=0.01)
    assert cal["t_poll_ns"] == pytest.approx(3000, rel=0.03)


def test_calibration_points_are_the_lowest_and_nearest_45_and_90_percent():
    pts = [{"load": x / 10} for x in range(1, 13)]
    assert [p["load"] for p in validate.calibration_points(pts)] == [0.1, 0.4, 0.9]


def test_recorded_sweep_is_predicted_with_its_errors_printed():
    """A sweep measured on this machine's kind (VALIDATION.md). The costs are fitted with the
    kernel's measured polls and wake-ups per frame; the simulator makes its own (fewer at
    mid load), so even the fitted loads are off by up to ~10%, and the rest stay within
    the errors VALIDATION.md reports."""
    sw = json.loads(DATA.read_text())
    res = validate.compare(sw)
    rows, cal = res["rows"], res["calibration"]
    assert len(res["predictions"]) == len(sw["points"]) + 1
    for key in ("t_proc_ns", "t_poll_ns", "t_wakeup_ns", "wake_latency_ns"):
        assert cal[key] >= 0, key
    for r in rows:
        assert set(r) >= {"quantity", "reported", "predicted", "unit", "rel_error", "source"}
    by = {r["quantity"]: r for r in rows}
    cost = [r for r in rows if r["quantity"].startswith("dut CPU per frame,")]
    assert len(cost) == len(sw["points"])
    for r in cost:
        assert abs(r["rel_error"]) < (0.12 if r.get("fitted") else 0.15), r
    # The cost per frame falls with load, measured and predicted.
    assert cost[0]["reported"] > 2 * cost[-1]["reported"]
    assert cost[0]["predicted"] > 2 * cost[-1]["predicted"]
    sat = by["saturation rate (overload probe)"]
    assert abs(sat["rel_error"]) < 0.1, sat
    assert any(r.get("tail") for r in rows)


def test_the_deferral_dial_is_predicted_from_the_deferral_off_calibration():
    """The recorded defer sweep (VALIDATION.md): the deferral-off points are fitted, and of
    the dial only the CPU per frame at 50 us and 30% load, which fits the deferral timer's
    cost (``host.t_timer``, 8.6 us on this record); the rest of the dial's CPU per frame is
    predicted within 15% and its latency median within 50% at every point (14.3% and 46.9%
    at worst; the timer's cost is not in any frame's way, so the medians are what they
    were without it)."""
    sw = json.loads(DEFER_DATA.read_text())
    res = defer.compare(sw)
    fitted = [r for r in res["rows"] if r["kind"] == "fitted"]
    timer = [r for r in fitted if "gro_flush_timeout" in r["quantity"]]
    assert [r["quantity"] for r in timer] == ["dut CPU per frame, gro_flush_timeout 50 us, 30% load (33.8 kpps)"]
    assert abs(timer[0]["rel_error"]) < 0.01 and 1_000 < res["calibration"]["t_timer_ns"] < 50_000
    assert all("deferral off" in r["quantity"] for r in fitted if r not in timer)
    dial = [r for r in res["rows"] if "gro_flush_timeout" in r["quantity"] and r not in timer]
    assert dial and all(r["kind"] == "predicted" for r in dial)
    cpu = [abs(r["rel_error"]) for r in dial if "CPU" in r["quantity"]]
    p50 = [abs(r["rel_error"]) for r in dial if "p50" in r["quantity"]]
    assert len(cpu) == 11 and max(cpu) < 0.15, cpu
    assert max(p50) < 0.5, p50
    # The calibration saw no deferral: the simulator's deferral made the difference.
    c = res["calibration"]
    off = validate.simulate(c, 67_600, c["wake_latency_ns"])
    on = validate.simulate(c, 67_600, c["wake_latency_ns"], sets={"nic.napi.defer_hard_irqs": "2", "nic.napi.gro_flush_timeout": "200us"})
    assert on["latency_ns"]["p50"] > 4 * off["latency_ns"]["p50"] and on["packets_per_poll"]["mean"] > 10 * off["packets_per_poll"]["mean"]


def test_the_xdp_path_is_predicted_from_three_loads():
    """The recorded xdp sweep: saturation within 5% and CPU per frame within 16% at every
    load below it (VALIDATION.md: +0.3% and 15.5% at worst)."""
    sw = json.loads(XDP_DATA.read_text())
    res = xdp.compare(sw)
    by = {r["quantity"]: r for r in res["rows"]}
    assert abs(by["saturation rate (overload probe)"]["rel_error"]) < 0.05
    below = [
        r
        for r in res["rows"]
        if r["quantity"].startswith("dut CPU per frame, ") and r["kind"] == "predicted" and "108%" not in r["quantity"] and "120%" not in r["quantity"]
    ]
    assert len(below) == 5 and max(abs(r["rel_error"]) for r in below) < 0.16, [(r["quantity"], r["rel_error"]) for r in below]
    c = res["calibration"]
    assert len(c["from_loads"]) == 3 and c["egress_delay_ns"] > 0 and c["wake_latency_ns"] > 0


def test_the_batching_law_is_fitted_exactly_and_predicts_the_other_batch_sizes():
    """CPU per frame = t_frame + t_call / b: two synthetic points give back t_frame 2 us and
    t_call 3 us exactly, and every other batch size is predicted on the law's curve; b is
    the frames per system call the forwarder counted (32 per sendto beyond 32)."""

    def per_call(b):
        return min(b, 63.0) / -(-min(b, 63) // 32)

    pts = [
        {
            "batch": b,
            "frames_per_batch": min(b, 63.0),
            "dut_ns_per_packet": 2000 + 3000 / per_call(b),
            "forwarded_pps": 1e9 / (2000 + 3000 / per_call(b)),
            "dut_utilization": 1.0,
            "forwarder": {"forwarded": 630_000, "tx_calls": 630_000 / per_call(b)},
        }
        for b in afxdp.BATCHES
    ]
    cal = afxdp.law([pts[0], pts[5]])
    assert abs(cal["t_frame_ns"] - 2000) < 1e-6 and abs(cal["t_call_ns"] - 3000) < 1e-6 and cal["from_batches"] == [1, 32]
    res = afxdp.compare({"points": pts})
    assert all(abs(r["rel_error"]) < 1e-9 for r in res["rows"])
    kinds = [r["kind"] for r in res["rows"]]
    assert kinds.count("fitted") == 2 and kinds.count("derived") == 2 and kinds.count("predicted") == 14
    # The sweep alternates small and large batch sizes, so that a drift does not line up with B.
    assert afxdp.interleaved(afxdp.BATCHES) == [1, 256, 2, 128, 4, 64, 8, 32, 16]


def test_the_recorded_afxdp_sweep_follows_the_batching_law():
    """The recorded afxdp sweep (VALIDATION.md): fitted at batch 1 and 32, CPU per frame at
    the other seven within 25% (22% at worst, batch 2) and its median error under 5%."""
    sw = json.loads((ROOT / "tests" / "data" / "testbed-afxdp.json").read_text())
    res = afxdp.compare(sw)
    assert res["calibration"]["from_batches"] == [1, 32] and res["calibration"]["t_call_ns"] > 0
    cpu = [abs(r["rel_error"]) for r in res["rows"] if r["kind"] == "predicted" and "CPU" in r["quantity"]]
    assert len(cpu) == 7 and max(cpu) < 0.25 and sorted(cpu)[3] < 0.05, cpu


def test_defer_figure_from_a_saved_result(tmp_path):
    sw = json.loads(DEFER_DATA.read_text())
    res = {"paper": "testbed", "path": "defer", "title": defer.TITLE, **defer.compare(sw), "machine": sw["machine"], "setup": sw["setup"], "measurements": sw}
    saved = tmp_path / "defer.json"
    saved.write_text(json.dumps(res))
    out = tmp_path / "defer.png"
    run_cli("testbed", "plot", saved, "-o", out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000


def test_validate_cli_text_uses_the_reproduce_table(monkeypatch, capsys):
    from pktsim import cli

    sw = json.loads(DATA.read_text())

    def fake(path, rules, routes, loops, quick, duration, reps, progress=None):
        assert path == "stack"
        return {
            "paper": "testbed",
            "path": path,
            "title": validate.TITLE,
            **validate.compare(sw),
            "machine": validate.machine(),
            "setup": {},
            "measurements": sw,
        }

    monkeypatch.setattr(paths, "run", fake)
    assert cli.main(["testbed", "validate"]) == 0
    out = capsys.readouterr().out
    assert "calibrated at" in out and "t_proc" in out and "saturation rate" in out and "fitted" in out


def test_the_calibrated_model_is_written_as_a_scenario_that_runs_the_same(tmp_path):
    from pktsim import sim
    from pktsim.scenario import Scenario

    sw = json.loads(DEFER_DATA.read_text())
    res = {"path": "defer", **defer.compare(sw), "machine": sw["machine"], "measurements": sw}
    text = validate.scenario_file_text(res)
    assert text.startswith("# The defer path's model") and "t_proc 8855 ns" in text.splitlines()[2]
    f = tmp_path / "defer.toml"
    f.write_text(text)
    sc = Scenario.load(f)
    assert sc.to_dict() == validate.calibrated_scenario(res).to_dict()
    assert sim.run(sc)["latency_ns"] == sim.run(validate.calibrated_scenario(res))["latency_ns"]
    proc = run_cli("testbed", "validate", "--path", "xdp", "--scenario-out", tmp_path / "x.toml", check=False)
    assert proc.returncode == 2 and "--path stack and --path defer" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------ refusals


def test_refuses_without_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(TestbedError, match="as root"):
        topology.require_root()


ZERO_CASES = [
    (("run", "--rate", "1kpps", "--duration", "0s"), ("--duration 0s", "50ms", "60s")),  # ran 3 s
    (("run", "--rate", "1kpps", "--duration", "10ms"), ("--duration 0.01s", "50ms", "60s")),
    (("run", "--rate", "1kpps", "--repetitions", "0"), ("--repetitions 0", "1 to 20 runs")),
    (("run", "--sweep", "10%:90%", "--points", "0"), ("--points 0", "2 to 50 loads")),
    (("run", "--rate", "1kpps", "--points", "3"), ("--points 3", "--sweep")),  # ignored without a sweep
    (("validate", "--repetitions", "0"), ("--repetitions 0", "1 to 20 runs")),  # ran 3
    (("validate", "--quick", "--repetitions", "0"), ("--repetitions 0", "1 to 20 runs")),  # ran 1
    (("validate", "--duration", "0s"), ("--duration 0s", "50ms", "60s")),  # ran 3 s
    (("validate", "--quick", "--duration", "0s"), ("--duration 0s", "50ms", "60s")),  # ran 0.5 s
    (("probe", "--duration", "0s"), ("--duration 0s", "100ms", "600s")),  # ran 10 s
    (("probe", "--duration", "700s"), ("--duration 700s", "100ms", "600s")),
]


@pytest.mark.parametrize("args,says", ZERO_CASES, ids=[" ".join(a) for a, _ in ZERO_CASES])
def test_zero_and_meaningless_values_are_usage_errors(args, says):
    proc = run_cli("testbed", *args, check=False)
    assert proc.returncode == 2, proc.stderr
    for text in says:
        assert text in proc.stderr, (text, proc.stderr)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_dials_are_checked_before_anything_is_built():
    with pytest.raises(TestbedError, match="--routes"):
        topology.Topology(routes=10**6)
    with pytest.raises(TestbedError, match="--rules"):
        topology.Topology(rules=-1)


# ------------------------------------------------------------------------------ saved results and repetitions


def test_loops_belong_to_the_xdp_path():
    proc = run_cli("testbed", "validate", "--path", "stack", "--loops", "5", check=False)
    assert proc.returncode == 2 and "only --path xdp" in proc.stderr and "Traceback" not in proc.stderr


def test_validation_figure_from_a_saved_result(tmp_path):
    sw = json.loads(DATA.read_text())
    res = {"paper": "testbed", "title": validate.TITLE, **validate.compare(sw), "machine": sw["machine"], "setup": sw["setup"], "measurements": sw}
    saved = tmp_path / "validation.json"
    saved.write_text(json.dumps(res))
    out = tmp_path / "validation.png"
    proc = run_cli("testbed", "plot", saved, "-o", out)
    assert "wrote" in proc.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000


def test_plot_of_something_else_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"rows": []}')
    proc = run_cli("testbed", "plot", bad, "-o", tmp_path / "y.png", check=False)
    assert proc.returncode == 2 and "pktsim testbed validate --json" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "y.png").exists()


def test_repetitions_report_mean_spread_and_warn_of_foreign_load(monkeypatch, capsys):
    from pktsim.testbed import runner

    costs = iter([10_000.0, 11_000.0, 12_000.0])
    foreign = iter([0.01, 0.2, 0.01])

    def fake(topo, rate, duration, run_id):
        r = dict.fromkeys(runner.NUMERIC, 1.0)
        r.update(dut_ns_per_packet=next(costs), foreign_cpu=next(foreign), foreign_top=[{"task": "stress", "cpu": 0.19}], offered_pps=rate)
        r["latency_ns"] = {q: 1000 * (i + 1) for i, q in enumerate(runner.PERCENTILES)}
        r["latency_app_ns"] = dict(r["latency_ns"])
        return r

    monkeypatch.setattr(runner, "measure", fake)
    out = runner.repeat(None, 50e3, 1.0, 3)
    assert out["dut_ns_per_packet"] == pytest.approx(11_000)
    assert out["spread"]["dut_ns_per_packet"]["min"] == 10_000 and out["spread"]["dut_ns_per_packet"]["max"] == 12_000
    assert out["spread"]["dut_ns_per_packet"]["rel_sd"] == pytest.approx(1000 / 11_000)
    assert len(out["runs"]) == 3
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "20% of a CPU" in err and "stress" in err


# ------------------------------------------------------------------------------ interference


def test_the_probe_analysis_finds_the_tick_and_the_rest():
    """Synthetic gaps: a 250 Hz tick of 20 us at 90% of its periods (phase 1.3 ms) and 300
    other gaps of 5 us at random times over 2 s: the tick, its share and cost, and the
    rest's rate and length come back."""
    from pktsim.testbed import tails

    rng = np.random.default_rng(1)
    ticks = [[1.3e6 + k * 4e6, 20_000.0] for k in range(500) if rng.random() < 0.9]
    others = [[float(t), 5_000.0] for t in rng.uniform(0, 2e9, 300)]
    # Keep the others off the tick's window (2% of 4 ms around its phase).
    others = [g for g in others if abs(((g[0] - 1.3e6) % 4e6) / 4e6 - 0.5) < 0.47]
    listed = sorted(ticks + others)
    raw = {"listed": listed, "gaps": len(listed), "spin_ns": 2e9, "stolen_ns": sum(g[1] for g in listed), "threshold_ns": 1000}
    res = tails.analyze(raw)
    t, r = res["tick"], res["rest"]
    assert t["hz"] == 250 and t["gaps"] == len(ticks) and t["t_tick_ns"] == 20_000.0
    assert abs(t["share_of_periods"] - len(ticks) / 500) < 1e-9
    assert r["gaps"] == len(others) and abs(r["rate_per_s"] - len(others) / 2) < 1e-9 and r["length_ns"]["p50"] == 5_000.0


def test_a_long_gap_at_the_ticks_phase_is_not_the_tick():
    """Gaps of milliseconds that start at the tick's phase (real-time throttling, another
    guest run by the hypervisor) are time given to something else: they count with the rest,
    the tick keeps its own cost, and the model takes the sets (each tick shorter than its
    period)."""
    from pktsim.testbed import tails

    probe = _synthetic_probe()
    raw = probe["raw"]
    # Ticks 3, 100 and 300 last 11.6 ms, 5.0 ms and 1.2 ms (a quarter of 4 ms is 1 ms).
    long = {3: 11.6e6, 100: 5.0e6, 300: 1.2e6}
    listed = [[t, long.get(round((t - 2.1e6) / 4e6), n) if abs((t - 2.1e6) % 4e6) < 1 else n] for t, n in raw["listed"]]
    raw = {**raw, "listed": listed}
    res = {"raw": raw, **tails.analyze(raw)}
    t, r = res["tick"], res["rest"]
    assert t["hz"] == 250 and t["length_ns"]["p99"] <= 50_000
    assert r["gaps"] == probe["rest"]["gaps"] + 3 and r["length_ns"]["p99"] >= 100_000
    sets = tails.sets(res)

    def times(v):
        return [float(x.strip().strip('"').removesuffix("ns")) for x in v.strip("[]").split(",")]

    assert max(times(sets["cpu.interference.t_tick"])) <= 50_000
    assert max(times(sets["cpu.interference.t_preempt"])) == 11.6e6
    sc = validate.scenario({"t_proc_ns": 2000.0, "t_poll_ns": 0.0, "t_wakeup_ns": 500.0}, 10e3, 0.0, sets=sets)
    assert sc is not None


def _synthetic_probe(seconds=2.0, seed=2):
    """A probe result: a 250 Hz tick of 30-50 us and 500/s other gaps of 2-100 us."""
    from pktsim.testbed import tails

    rng = np.random.default_rng(seed)
    ticks = [[2.1e6 + k * 4e6, float(rng.uniform(30e3, 50e3))] for k in range(int(seconds * 250))]
    others = [[float(t), float(rng.choice([2e3, 3e3, 100e3], p=[0.6, 0.38, 0.02]))] for t in rng.uniform(0, seconds * 1e9, int(500 * seconds))]
    others = [g for g in others if abs(((g[0] - 2.1e6) % 4e6) / 4e6 - 0.5) < 0.47]
    listed = sorted(ticks + others)
    raw = {
        "listed": listed,
        "gaps": len(listed),
        "spin_ns": seconds * 1e9,
        "stolen_ns": sum(g[1] for g in listed),
        "threshold_ns": 1000,
        "cpu": 1,
        "priority": 50,
    }
    return {"raw": raw, **tails.analyze(raw)}


def test_a_probe_becomes_the_models_interference_and_its_tails_are_predicted():
    """The probe's tick and the rest become [cpu.interference] (quantiles of their
    measured times); with it the stack path's p99 and p99.9 rows are predictions, and the
    simulated p99 at the lowest load grows (a frame in a hundred meets a tick)."""
    from pktsim.testbed import tails

    probe = _synthetic_probe()
    sets = tails.sets(probe)
    assert sets["cpu.interference.tick_period"] == "4000000ns"

    def times(v):
        return [float(x.strip().strip('"').removesuffix("ns")) for x in v.strip("[]").split(",")]

    ticks = times(sets["cpu.interference.t_tick"])
    assert len(ticks) == tails.TICK_QUANTILES and 30_000 <= min(ticks) and max(ticks) <= 50_000
    rest = times(sets["cpu.interference.t_preempt"])
    assert len(rest) == tails.REST_QUANTILES and set(rest) <= {2000, 3000, 100000}
    assert abs(float(sets["cpu.interference.rate"].removesuffix("Hz")) - probe["rest"]["rate_per_s"]) < 1e-3
    sw = json.loads(DATA.read_text())
    plain = validate.compare(sw)
    with_probe = validate.compare({**sw, "probe": probe})
    tail = [r for r in with_probe["rows"] if "p99" in r["quantity"]]
    assert tail and all(r["kind"] == "predicted" and not r.get("tail") for r in tail)
    assert all(r.get("tail") for r in plain["rows"] if "p99" in r["quantity"])
    lo = with_probe["predictions"][0]["latency_ns"]["p99"], plain["predictions"][0]["latency_ns"]["p99"]
    assert lo[0] > lo[1] + 5_000, lo
    assert with_probe["calibration"]["interference"] and not plain["calibration"]["interference"]


# ------------------------------------------------------------------------------ wake probe


def wake_raw(exit_ns, refill_ns, gaps_us=(10, 50, 200, 1000)):
    """A `pktsim-tb wake` result whose halt adds ``exit_ns(gap)`` of wake latency and
    ``refill_ns(gap)`` of walk time to the awake pass's 20 us and 1 us."""

    def rows(extra_lat, extra_refill):
        return [
            {
                "gap_ns": g * 1000,
                "n": 200,
                "wake_latency_ns": {"p10": 0, "p50": 20_000 + extra_lat(g * 1000), "p90": 0},
                "work_ns": {"p10": 0, "p50": 0, "p90": 0},
                "refill_ns": {"p10": 0, "p50": 1_000 + extra_refill(g * 1000), "p90": 0},
            }
            for g in gaps_us
        ]

    zero = lambda g: 0  # noqa: E731
    return {"halting": rows(exit_ns, refill_ns), "awake": rows(zero, zero), "switch_ns": 810, "syscall_ns": 85, "work_bytes": 1 << 20}


def test_the_halt_is_the_halting_pass_minus_the_awake_one():
    from pktsim.testbed import wake

    # Exit 5 us up to 100 us of idle, then 25 us (the host stopped polling); a refill that
    # grows 4 us per 200 us of halt up to 200 us.
    res = wake.analyze(wake_raw(lambda g: 5_000 if g <= 100_000 else 25_000, lambda g: 4_000 * min(g, 200_000) // 200_000))
    assert res["halt"]["latency_ns"] == 5_000
    assert res["halt"]["refill_ns"] == pytest.approx(4_000)
    assert res["halt"]["refill_time_ns"] == 200_000
    assert [r["exit_latency_ns"] for r in res["gaps"]] == [5_000, 5_000, 25_000, 25_000]
    s = wake.sets(res)["cpu.idle.states"]
    assert s[1] == {"name": "halt", "latency": "1us", "residency": "1us", "refill": "4000ns", "refill_time": "200000ns"}
    # The sets run: a sparse load pays the refill in full, once per wake-up.
    from pktsim import sim
    from pktsim.scenario import Scenario

    r = sim.run(Scenario.load(validate.SCENARIO).with_sets({"traffic.rate": "2kpps", "measure.duration": "200ms", **wake.sets(res)}))
    wakes = r["idle_states"]["states"][1]["entries"]
    assert wakes > 0
    assert r["cpu_by_activity"]["refill"] * 0.2e9 == pytest.approx(4_000 * wakes, rel=0.05)


def test_calibration_takes_the_halts_refill_out_of_the_measured_cost():
    halt = {"latency_ns": 5_000, "refill_ns": 4_000, "refill_time_ns": 200_000}
    pts = [point(0.1, 7000, 4000, 9000, 1.0, 1.0), point(0.45, 7000, 4000, 9000, 1.8, 4.0), point(0.9, 7000, 4000, 9000, 27, 83)]
    # Idle per wake-up: 100 us, 20 us, ~0: the refill 2 us, 0.4 us, ~0 per wake-up.
    for p, util, pps in zip(pts, (0.5, 0.6, 0.99), (5_000, 80_000, 1_000_000)):
        p.update(dut_utilization=util, forwarded_pps=pps)
        p["dut_ns_per_packet"] += validate.halt_refill_ns(p, halt) / p["packets_per_wakeup"]
    assert validate.halt_refill_ns(pts[0], halt) == pytest.approx(2_000)
    assert validate.halt_refill_ns(pts[1], halt) == pytest.approx(4_000 * 20 / 200)
    cal = validate.calibrate(pts, halt=halt)
    assert (cal["t_proc_ns"], cal["t_poll_ns"], cal["t_wakeup_ns"]) == pytest.approx((7000, 4000, 9000))
    assert validate.calibrate(pts)["t_wakeup_ns"] > 9500, "without the halt its refill lands in t_wakeup"


# ------------------------------------------------------------------------------ the generator as a source


def test_the_generators_stalls_become_the_models_and_move_its_frames():
    # Two runs: short stalls at 300 and 500 per second, long ones (from 100 us) at 2 and
    # none; each kind's quantiles averaged over the runs that had it.
    runs = [
        {"generator_stalls": [{"rate_hz": 300.0, "length_ns": [2_000, 4_000]}, {"rate_hz": 2.0, "length_ns": [1_000_000, 3_000_000]}]},
        {"generator_stalls": [{"rate_hz": 500.0, "length_ns": [4_000, 6_000]}, {"rate_hz": 0.0, "length_ns": []}]},
    ]
    st = runner.stalls(runs)
    assert st == [{"rate_hz": 400.0, "length_ns": [3_000.0, 5_000.0]}, {"rate_hz": 1.0, "length_ns": [1e6, 3e6]}]
    sets = validate.stall_sets({"stalls": st, "offered_pps": 100_000.0})
    assert sets == {
        "traffic.stalls": [
            {"rate": "400.000Hz", "length": ["3000ns", "5000ns"]},
            {"rate": "1.000Hz", "length": ["1000000ns", "3000000ns"]},
        ]
    }
    assert validate.stall_sets({"stalls": None, "offered_pps": 1e5}) == {}
    # A recorded point without them (older runs) predicts with an even sender.
    assert validate.stall_sets({"offered_pps": 1e5}) == {}
    sets = {"traffic.stalls": [{"rate": "400Hz", "length": ["8us", "10us"]}, {"rate": "20Hz", "length": ["3ms"]}]}
    # In the model: the same frames, in bursts that a 256-frame ring cannot hold.
    from pktsim import sim
    from pktsim.scenario import Scenario

    base = Scenario.load(validate.SCENARIO).with_sets({"traffic.rate": "100kpps", "measure.duration": "300ms"})
    even, stalled = sim.run(base), sim.run(base.with_sets(sets))
    assert even["loss_ratio"] == 0 and stalled["loss_ratio"] > 0
    assert abs(stalled["offered_pps"] - even["offered_pps"]) / even["offered_pps"] < 0.01
    assert stalled["latency_ns"]["p999"] > 2 * even["latency_ns"]["p999"]


def test_a_wake_up_is_split_into_the_probes_switch_and_the_way_to_sleep():
    cal = {"t_proc_ns": 5000.0, "t_poll_ns": 2000.0, "t_wakeup_ns": 13_000.0}
    validate.split_wakeup(cal, {})
    assert "t_sleep_ns" not in cal and validate.thread_sets(cal) == {"host.thread.t_wakeup": "13000.0ns"}
    validate.split_wakeup(cal, {"wake": {"switch_ns": 725}})
    assert (cal["t_switch_ns"], cal["t_sleep_ns"]) == (725.0, 12_275.0)
    assert validate.thread_sets(cal) == {"host.thread.t_wakeup": "725.0ns", "host.thread.t_sleep": "12275.0ns"}
    # A switch dearer than the whole wake-up leaves no way to sleep.
    cal = {"t_wakeup_ns": 500.0}
    validate.split_wakeup(cal, {"wake": {"switch_ns": 725}})
    assert (cal["t_switch_ns"], cal["t_sleep_ns"]) == (500.0, 0.0)
    # The model then runs: a sparse load pays both parts once per frame.
    from pktsim import sim

    r = sim.run(validate.scenario({**cal, "t_proc_ns": 5000.0, "t_poll_ns": 0.0, "t_wakeup_ns": 500.0}, 5_000, 0.0))
    assert r["io"]["wakeups"] > 0


# ------------------------------------------------------------------------------ share


def _stack_point(rate, ppp, ppw_thread=None, t=(5500, 1500, 2500)):
    t_proc, t_poll, t_wake = t
    run = {"counts": {"ipi": {"ns": 800 * 100, "count": 100}}}
    stack = t_proc + t_poll / ppp + (t_wake / ppw_thread if ppw_thread else 0)
    return {"offered_pps": rate, "loss_ratio": 0.0, "stack_ns_per_packet": stack, "packets_per_poll": ppp, "packets_per_wakeup": ppw_thread, "runs": [run]}


def _reader_point(rate, ppc, ppw, t=(1200, 900, 3000)):
    t_packet, t_call, t_wake = t
    return {
        "offered_pps": rate,
        "loss_ratio": 0.0,
        "reader_ns_per_packet": t_packet + t_call / ppc + t_wake / ppw,
        "reader_packets_per_call": ppc,
        "reader_packets_per_wakeup": ppw,
        "reader": {"rcvbuf_bytes": 212992},
    }


SYSCTLS = {"netdev_max_backlog": 1000, "dev_weight": 64, "netdev_budget": 300, "netdev_budget_usecs": 8000}
SW = {
    "sysctls": SYSCTLS,
    "irq_time_accounting": False,
    "base_slice_ns": 1_500_000,
    # A wake-up across CPUs, the dut CPU busy: 25.79 us at the short gaps (the long one is left out).
    "wake": {
        "switch_ns": 790.0,
        "gaps": [
            {"gap_ns": 10_000, "wake_latency_awake_ns": 25_790},
            {"gap_ns": 20_000, "wake_latency_awake_ns": 25_790},
            {"gap_ns": 2_000_000, "wake_latency_awake_ns": 90_000},
        ],
    },
}


def test_share_calibration_recovers_the_stack_and_reader_costs_exactly():
    from pktsim.testbed import share, sharemodel

    stack = [_stack_point(20e3, 1.0), _stack_point(40e3, 1.3), _stack_point(80e3, 2.5), _stack_point(160e3, 6.0)]
    # Two batch sizes at each of two loads: a call's cost apart from a wake-up's.
    reader = [_reader_point(30e3, 12.0, 30.0), _reader_point(30e3, 5.0, 30.0), _reader_point(60e3, 20.0, 60.0), _reader_point(60e3, 6.7, 60.0)]
    v = {
        "receive": "softirq",
        "stack_calibration": stack,
        "reader_calibration": reader,
        "held": {"rmem_alloc_bytes": 213_000, "frames": 260, "frames_sent_before": 250},
    }
    cal = sharemodel.calibrate(v, SW)
    for k, want in (("t_proc_ns", 5500), ("t_poll_ns", 1500), ("t_packet_ns", 1200), ("t_call_ns", 900), ("t_timer_wakeup_ns", 3000)):
        assert cal[k] == pytest.approx(want), k
    # The reader's wake-up on the shared CPU is the probe's switch, not its timer's; an
    # interrupt from the other CPU arrives a wake-up across CPUs less that switch later.
    assert cal["t_app_wakeup_ns"] == 790.0 and cal["irq_delay_ns"] == pytest.approx(25_000)
    # An interrupt on a busy CPU: what the spinner lost (1 s, 2% baseline: 20 ms) less the
    # stack's NET_RX and IPI handler time, over the IPIs: (400 - 20 - 250 - 10) ms / 10,000.
    run = {"spin": {"taken_ns": 400_000_000, "window_ns": 1_000_000_000}, "counts": {"net_rx": {"ns": 250_000_000}, "ipi": {"ns": 10_000_000, "count": 10_000}}}
    assert sharemodel.busy_interrupt_ns({"runs": [run]}, 0.02, "softirq") == [pytest.approx(12_000)]
    s2 = sharemodel.sets({**cal, "t_irq_busy_ns": 12_000.0}, "softirq")
    assert s2["host.t_irq_busy"] == "12000.0ns" and s2["nic.irq_delay"] == "25000.0ns"
    assert cal["t_irq_ns"] == pytest.approx(800) and cal["truesize_bytes"] == pytest.approx(852)
    s = sharemodel.sets(cal, "softirq")
    assert s["nic.rx_ring"] == 1000 and s["host.netdev_budget_usecs"] == "8000us" and s["socket.truesize"] == "852B"
    assert s["cpu.sched.base_slice"] == "1500000ns" and s["cpu.sched.irq_time_accounting"] is False
    # The thread's wake-ups are a third cost of the stack, and its interrupt is none.
    thr = [_stack_point(r, ppp, ppw_thread=w) for r, ppp, w in ((20e3, 1, 1), (40e3, 1.4, 1.2), (80e3, 3, 2), (160e3, 9, 7))]
    cal = sharemodel.calibrate({"receive": "threaded", "stack_calibration": thr, "reader_calibration": reader, "held": None}, SW)
    assert cal["t_wakeup_ns"] == pytest.approx(2500) and cal["t_irq_ns"] == 0
    s = sharemodel.sets(cal, "threaded")
    assert s["nic.napi.threaded"] is True and s["host.thread.policy"] == "other" and s["nic.rx_ring"] == 256 and s["host.t_irq"] == "0ns"
    # The slice this kernel gives a task (/proc/PID/sched), else the default's formula.
    assert share.base_slice_ns(2, "se.vruntime : 1.5\nse.slice                                     :              1400000\n") == 1_400_000
    assert share.base_slice_ns(2, "") == 1_400_000 and share.base_slice_ns(64, "") == 2_800_000
    assert share.base_slice_ns(2) > 0


def test_a_lossy_calibration_run_is_tried_again_and_a_failed_calibration_names_its_runs():
    """CI once lost 2%+ of a 40 kpps calibration run the quiet machine takes without loss,
    and the share path stopped with nothing to calibrate from."""
    from pktsim.testbed import share, sharemodel
    from pktsim.testbed.errors import TestbedError

    losses = iter([0.08, 0.01, 0.0])
    q = share.until_clean(lambda t: {"try": t, "loss_ratio": next(losses)}, share.CAL_TRIES)
    assert q == {"try": 1, "loss_ratio": 0.01, "tries": 2}
    # Three lossy tries: the one that missed least, after the third.
    losses = iter([0.3, 0.05, 0.2])
    assert share.until_clean(lambda t: {"try": t, "loss_ratio": next(losses)}, 3) == {"try": 1, "loss_ratio": 0.05, "tries": 2}
    # A run that misses nothing is not repeated.
    assert share.until_clean(lambda t: {"loss_ratio": 0.0}, 3)["tries"] == 1
    stack = [_stack_point(20e3, 1.0), {**_stack_point(40e3, 1.3), "loss_ratio": 0.031}]
    reader = [_reader_point(30e3, 12.0, 30.0), _reader_point(60e3, 20.0, 60.0)]
    with pytest.raises(TestbedError, match=r"the stack's: 20\.0 kpps: 0\.0% missed, 40\.0 kpps: 3\.1% missed; the reader's: 30\.0 kpps"):
        sharemodel.calibrate({"receive": "threaded", "stack_calibration": stack, "reader_calibration": reader, "held": None}, SW)


def test_reader_calibration_goes_to_lower_loads_until_two_runs_are_clean():
    """CI once saw the reader miss 8.9% at 0.4 of the stack's rate on a slow machine, three
    tries running: the share path then had one clean reader run and stopped."""
    from pktsim.testbed import share

    def run(loss_above):
        calls = []

        def one(rate, b, what):
            calls.append((rate, b, what))
            return {"offered_pps": rate, "loss_ratio": 0.09 if rate > loss_above else 0.0}

        return calls, one

    calls, one = run(30e3)
    out = share.reader_calibration(one, ((0.2, 64), (0.4, 64)), 100e3)
    # 20 clean, 40 lossy: one more at 10 kpps, with the first batch size.
    assert [c[:2] for c in calls] == [(20e3, 64), (40e3, 64), (10e3, 64)] and calls[-1][2] == ", a lower load"
    assert sum(q["loss_ratio"] == 0 for q in out) == 2
    # Two clean runs: nothing more.
    calls, one = run(50e3)
    share.reader_calibration(one, ((0.2, 64), (0.4, 8)), 100e3)
    assert len(calls) == 2
    # Nothing clean: at most CAL_LOWER more, halving each time; the runs sorted by rate.
    calls, one = run(0.0)
    out = share.reader_calibration(one, ((0.2, 64), (0.4, 64)), 100e3)
    assert [c[0] for c in calls[2:]] == [10e3, 5e3][: share.CAL_LOWER]
    assert [q["offered_pps"] for q in out] == sorted(c[0] for c in calls)


def test_livelock_onset_is_where_the_reader_first_misses_five_percent():
    from pktsim.testbed import sharemodel

    # 2.5% missed at 200 kpps, 50% at 300: 5% is crossed at 200 + 100 x 2.5 / 47.5.
    assert sharemodel.onset([(300e3, 150e3), (100e3, 100e3), (200e3, 195e3)]) == pytest.approx(200e3 + 100e3 * 0.025 / 0.475)
    assert sharemodel.onset([(100e3, 100e3), (200e3, 199e3)]) is None
    assert sharemodel.onset([(100e3, 50e3)]) == 100e3


def test_share_figures_split_the_receiving_cpu_by_ebpf_and_take_softirqs_off_the_reader():
    from pktsim.testbed import share

    g = {"offered": 100_000, "elapsed_ns": 1_000_000_000, "refused": 0}
    r = {"received": 60_000, "calls": 2_000, "empty_calls": 0, "sleeps": 0, "latency_app_ns": {"p50": 40_000}}
    ms = 1_000_000
    a = {
        "window_ns": 1_000 * ms,
        "net_rx": {
            "ns": 500 * ms,
            "count": 9000,
            "idle": {"ns": 350 * ms, "count": 7990},
            "task": {"ns": 100 * ms, "count": 1000},
            "ksoftirqd": {"ns": 50 * ms, "count": 10},
            "tasks": [{"pid": 7, "ns": 100 * ms, "count": 1000}],
            "other": {"ns": 0, "count": 0},
        },
        "ipi": {"ns": 2 * ms, "count": 2000},
        # On the CPU by sched_switch: the reader 400 ms (100 ms of it softirqs), ksoftirqd 60 ms.
        "oncpu": {"idle": {"ns": 500 * ms}, "ksoftirqd": {"ns": 60 * ms}, "tasks": [{"pid": 7, "ns": 400 * ms}], "other": {"ns": 40 * ms}},
    }
    before = {
        "t_ns": 0,
        "reader_switches": 0,
        "napi_switches": 0,
        "udp": {"InDatagrams": 0, "RcvbufErrors": 0},
        "softnet": {"processed": 0, "dropped": 0},
        "busy": 0,
    }
    after = {
        "t_ns": 1_000 * ms,
        "reader_switches": 500,
        "napi_switches": 0,
        "udp": {"InDatagrams": 60_000, "RcvbufErrors": 40_000},
        "softnet": {"processed": 100_000, "dropped": 0},
        "busy": 990 * ms,
    }
    f = share.figures(g, r, a, before, after, 2500, 100e3, True, "softirq")
    assert f["read_pps"] == 60e3 and f["rcvbuf_errors_pps"] == 40e3 and f["loss_ratio"] == pytest.approx(0.4)
    assert f["stack_ns_per_packet"] == pytest.approx(5000) and f["packets_per_poll"] == 40
    # 400 ms on the CPU, 100 ms of it softirqs on its stack: 300 ms of its own.
    assert f["reader_ns_per_packet"] == pytest.approx(5000) and f["cpu"]["app"] == pytest.approx(0.3)
    assert f["reader_packets_per_call"] == 30 and f["reader_packets_per_wakeup"] == 120
    assert f["cpu"]["softirq"] == pytest.approx(0.45) and f["cpu"]["ksoftirqd"] == pytest.approx(0.06)
    assert f["cpu"]["hardirq"] == pytest.approx(0.002) and f["ipi_ns"] == 1000 and f["packets_per_ipi"] == 50
    assert f["cpu"]["other"] == pytest.approx(0.04) and f["cpu"]["busy"] == pytest.approx(0.99)
    # With the reader on the other CPU nothing of it is the dut CPU's; a reader on a timer
    # counts its timer's wake-ups and its empty calls.
    r2 = {**r, "empty_calls": 1000, "sleeps": 1000}
    f = share.figures(g, r2, a, before, after, 2500, 100e3, False, "softirq")
    assert f["cpu"]["app"] == 0 and f["reader_ns_per_packet"] is None
    assert f["reader_packets_per_call"] == 20 and f["reader_packets_per_wakeup"] == 60


SHARE_DATA = ROOT / "tests" / "data" / "testbed-share.json"


# Where the recorded shared CPU is not predicted yet (VALIDATION.md, share), and how far off
# the model may be there (|predicted - measured| / the most the reader read): with the
# softirq, the collapse from 80% to 110% of the grid's load comes 20 - 40 kpps later in the
# model (on the shared CPU the reader costs about twice its cost alone there); with the NAPI
# thread, the reader past the thread's capacity is woken up to milliseconds late and its
# socket overflows, which pktsim's fair class does not reproduce (it reads 27-32% more).
# Threaded at 110%: the kernel still reads 138 kpps, just past its knee, where pktsim's
# reader is down to its plateau (116).
OPEN_SHARE = {("softirq", 0.8): 0.15, ("softirq", 0.9): 0.7, ("softirq", 1.0): 0.8, ("softirq", 1.1): 0.6, ("threaded", 1.1): 0.2}


def test_the_recorded_shared_cpu_is_predicted_from_the_separate_calibrations(tmp_path):
    """tests/data/testbed-share.json (VALIDATION.md, share): calibrated only on runs with
    the stack and the reader each alone on the dut CPU, the simulator predicts what the
    reader reads on the shared CPU within 10% of the most it read at every load but the
    open ones above, from full delivery through livelock (softirq: 0.3 kpps read, the
    model 0.4 - 6.5) and the threaded NAPI's loss-free capacity within 10%."""
    from pktsim.testbed import share

    sw = json.loads(SHARE_DATA.read_text())
    res = share.compare(sw)
    kinds = {r["kind"] for r in res["rows"]}
    assert kinds <= {"fitted", "predicted"} and {"fitted", "predicted"} <= kinds
    rows = {r["quantity"]: r for r in res["rows"]}
    for name, v in sw["variants"].items():
        peak = max(p["read_pps"] for p in v["shared"]) / 1e3
        for p in v["shared"]:
            r = next(r for q, r in rows.items() if q.startswith(f"read by the reader, {name},") and f"({p['offered_pps'] / 1e3:.1f} kpps)" in q)
            limit = OPEN_SHARE.get((name, round(p["load"], 2)), 0.1)
            assert abs(r["predicted"] - r["reported"]) <= limit * peak, (r, limit)
    assert abs(rows["livelock onset (5% unread), threaded"]["rel_error"]) <= 0.10
    # The softirq's onset is open (+57%), but the model's livelock is the kernel's: past
    # the collapse both read under 2% of the peak.
    soft = sw["variants"]["softirq"]
    deep = [p for p in soft["shared"] if p["load"] >= 1.5]
    assert deep and all(p["read_pps"] < 0.02 * max(q["read_pps"] for q in soft["shared"]) for p in deep)
    # Its figure redrawn from a saved result, as `pktsim testbed plot` does.
    saved = tmp_path / "share.json"
    saved.write_text(json.dumps({"path": "share", "measurements": sw, **res}))
    proc = run_cli("testbed", "plot", str(saved), "-o", str(tmp_path / "share.png"))
    assert proc.returncode == 0 and (tmp_path / "share.png").stat().st_size > 10_000, proc.stderr
    # No fitted figure of the shared CPU: every one of its rows is a prediction.
    assert all(r["kind"] == "predicted" for q, r in rows.items() if "alone on the dut CPU" not in q)


def test_the_share_paths_fit_keeps_every_cost_non_negative():
    """Noisy quick runs once gave the share path's plain least squares a per-frame cost of
    -815 ns beside a large per-poll one (and the scenario refused it): the fit is the
    non-negative least squares, here the per-frame cost alone."""
    from pktsim.testbed import sharemodel

    pts = [{"y": 3000.0, "ppp": 1.0}, {"y": 1000.0, "ppp": 2.0}, {"y": 200.0, "ppp": 4.0}]
    plain = np.linalg.lstsq(np.array([[1.0, 1 / p["ppp"]] for p in pts]), np.array([p["y"] for p in pts]), rcond=None)[0]
    assert plain[0] < 0  # what the plain fit gives
    fit = sharemodel._fit(pts, "y", {"t_proc_ns": lambda p: 1.0, "t_poll_ns": lambda p: 1 / p["ppp"]})
    assert fit == pytest.approx({"t_proc_ns": 1400.0, "t_poll_ns": 0.0})
    # Where the plain fit is non-negative it is the fit.
    pts = [{"y": 5000.0 + 3000.0 / q, "ppp": q} for q in (1.0, 2.0, 8.0)]
    fit = sharemodel._fit(pts, "y", {"t_proc_ns": lambda p: 1.0, "t_poll_ns": lambda p: 1 / p["ppp"]})
    assert fit == pytest.approx({"t_proc_ns": 5000.0, "t_poll_ns": 3000.0})
