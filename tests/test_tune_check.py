"""``pktsim testbed tune-check``: tune.json is checked (exit 2, the file, the key, the value
and what was expected), a recommendation's sets are mapped onto the dut's knobs (a key the
path cannot apply is refused), the comparison's arithmetic on given measurements, and (as
root) a short real check that leaves nothing behind and restores every knob."""

import copy
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli
from test_testbed_live import left_behind, root_only

from pktsim import sim
from pktsim.testbed import topology, tunecheck, validate

SCENARIO = validate.SCENARIO
CURRENT = {"nic.napi.defer_hard_irqs": "0", "nic.napi.gro_flush_timeout": "0ps", "nic.rx_ring": "256"}
TUNED = {"nic.napi.defer_hard_irqs": "2", "nic.napi.gro_flush_timeout": "50us", "nic.rx_ring": "256"}


def predicted(load_pps: float, sets: dict) -> dict:
    r = sim.run(SCENARIO, [("traffic.rate", f"{load_pps}pps"), *sets.items()])
    return json.loads(json.dumps(r))


def make_tune(directory: Path, load_pps: float = 30e3, current=None, tuned=None, **top) -> Path:
    """A tune.json as `pktsim tune -o DIR` writes it, from the bundled veth scenario."""
    current = dict(CURRENT if current is None else current)
    tuned = dict(TUNED if tuned is None else tuned)
    t = {
        "scenario": str(SCENARIO),
        "sets": [],
        "load_pps": load_pps,
        "loads_pps": [load_pps],
        "objectives": [{"metric": "cpu_utilization", "direction": "minimize"}],
        "constraints": [{"metric": "latency_ns.p99", "op": "<=", "bound": 500e3, "text": "latency_ns.p99 <= 500us"}],
        "knobs": ["nic.napi"],
        "recommended": {"sets": tuned, "predicted": predicted(load_pps, tuned)},
        "current": {"sets": current, "predicted": predicted(load_pps, current)},
        "pareto": [],
        "commands": [],
        "sensitivity": {"nic.napi": 1.0},
        **top,
    }
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tune.json").write_text(json.dumps(t))
    return directory


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict:
    d = make_tune(tmp_path_factory.mktemp("tune"))
    return json.loads((d / "tune.json").read_text())


# ------------------------------------------------------------------------------ tune.json


def _set(t: dict, dotted: str, value) -> None:
    *parents, last = dotted.split("|")
    for p in parents:
        t = t[int(p)] if isinstance(t, list) else t[p]
    if value is _DEL:
        del t[last]
    else:
        t[last] = value


_DEL = object()
BAD = [
    ("load_pps", _DEL, ("load_pps is missing", "packets per second")),
    ("load_pps", -5, ("load_pps = -5", "above 0")),
    ("load_pps", "300kpps", ('load_pps = "300kpps"', "a number")),
    ("objectives", [], ("objectives = []", "non-empty list")),
    ("objectives|0|direction", "down", ('objectives[0].direction = "down"', '"minimize" or "maximize"')),
    ("objectives|0|metric", "cpu_load", ('objectives[0].metric = "cpu_load"', "cpu_utilization", "latency_ns.p99")),
    ("constraints|0|op", "==", ('constraints[0].op = "=="', '"<="')),
    ("constraints|0|bound", "50us", ('constraints[0].bound = "50us"', "base unit")),
    ("recommended|sets", ["nic.napi.defer_hard_irqs=2"], ("recommended.sets = [", "--set")),
    ("current|sets|nic.napi.gro_flush_timeout", None, ("current.sets.nic.napi.gro_flush_timeout = null", '"50us"')),
    ("recommended|predicted|latency_ns", {"p50": 1.0}, ("recommended.predicted.latency_ns.p99 is missing", "for latency_ns.p99")),
    ("current|predicted|cpu_utilization", "high", ('current.predicted.cpu_utilization = "high"', "finite number")),
    ("recommended|predicted|latency_ns|p99", None, ("recommended.predicted.latency_ns.p99 = null", "finite number")),
    ("current|predicted", None, ("current.predicted = null", "pktsim run --json")),
    ("current", _DEL, ("current is missing", "{sets, predicted}")),
    ("recommended", None, ("recommended = null", "no configuration")),
    # Read well but not applicable: the mapping refuses them (still before anything is built).
    ("recommended|sets|nic.napi.gro_flush_timeout", "50 parsecs", ('recommended.sets.nic.napi.gro_flush_timeout = "50 parsecs"', 'e.g. "50us"')),
    ("recommended|sets|nic.rx_ring", "1024", ("nic.rx_ring", "fixed", "256", "it can apply nic.napi.defer_hard_irqs")),
]


@pytest.mark.parametrize("where,value,says", BAD, ids=[f"{w}={'<deleted>' if v is _DEL else v}" for w, v, _ in BAD])
def test_a_bad_tune_json_is_refused_naming_file_key_value_and_expectation(tmp_path, good, where, value, says):
    t = copy.deepcopy(good)
    _set(t, where, value)
    (tmp_path / "tune.json").write_text(json.dumps(t))
    proc = run_cli("testbed", "tune-check", tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert str(tmp_path / "tune.json") in proc.stderr
    for text in says:
        assert text in proc.stderr, (text, proc.stderr)


@pytest.mark.parametrize(
    "content,says",
    [
        (None, ("no such file", "pktsim tune")),
        ("{not json", ("not JSON", "line 1")),
        ("[1, 2]", ("top level is list", "JSON object")),
    ],
    ids=["missing", "not-json", "a-list"],
)
def test_a_missing_or_unreadable_tune_json_is_a_usage_error(tmp_path, content, says):
    if content is not None:
        (tmp_path / "tune.json").write_text(content)
    proc = run_cli("testbed", "tune-check", tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    for text in says:
        assert text in proc.stderr, (text, proc.stderr)
    proc = run_cli("testbed", "tune-check", tmp_path / "nowhere", check=False)
    assert proc.returncode == 2 and "not a directory" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_rounds_are_refused_before_anything_is_built(tmp_path):
    make_tune(tmp_path)
    proc = run_cli("testbed", "tune-check", tmp_path, "--rounds", "0", check=False)
    assert proc.returncode == 2 and "--rounds 0" in proc.stderr and "1 to 20" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "args,says", [(("--duration", "0s"), ("--duration 0s", "50ms")), (("--repetitions", "0"), ("--repetitions 0",)), (("--rules", "-1"), ("--rules -1",))]
)
def test_bad_run_bounds_are_usage_errors(tmp_path, args, says):
    make_tune(tmp_path)
    proc = run_cli("testbed", "tune-check", tmp_path, *args, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    for text in says:
        assert text in proc.stderr, (text, proc.stderr)


# ------------------------------------------------------------------------------ sets -> knobs


def test_sets_map_onto_the_duts_knobs_and_equal_keys_are_left_alone(good):
    t = copy.deepcopy(good)
    t["current"]["sets"].update({"host.budget_time": "2ms", "nic.napi.irq_suspend_timeout": "0ps"})
    t["recommended"]["sets"].update({"host.budget_time": "4000us", "nic.napi.irq_suspend_timeout": "0ps", "host.gro_normal_batch": "16"})
    ch = {c.key: c for c in tunecheck.plan(t, "defer")}
    assert set(ch) == {"nic.napi.defer_hard_irqs", "nic.napi.gro_flush_timeout", "host.budget_time", "host.gro_normal_batch"}
    assert (ch["nic.napi.defer_hard_irqs"].current, ch["nic.napi.defer_hard_irqs"].tuned) == (0, 2)
    assert (ch["nic.napi.gro_flush_timeout"].current, ch["nic.napi.gro_flush_timeout"].tuned) == (0, 50_000)  # ns, as sysfs takes it
    assert ch["nic.napi.gro_flush_timeout"].knob.where == "sysfs"
    assert (ch["host.budget_time"].current, ch["host.budget_time"].tuned) == (2000, 4000)  # netdev_budget_usecs
    assert ch["host.budget_time"].knob.name == "net.core.netdev_budget_usecs"
    # Not in the current sets: the tuned side sets it, the current side leaves the dut's value.
    assert (ch["host.gro_normal_batch"].current, ch["host.gro_normal_batch"].tuned) == (None, 16)


def test_the_duts_knobs_are_the_tunes_keys_with_their_linux_names():
    from pktsim.tune import knobs

    for path, dut in tunecheck.KNOBS.items():
        for key, k in dut.items():
            assert k.key == key and k.name == k.param.linux
            if k.where in ("sysfs", "sysctl"):
                # What the testbed writes: a file of the veth or a sysctl, by its plain name.
                assert re.fullmatch(r"[a-z_]+(\.[a-z_]+)*", k.name), (path, key, k.name)
            try:
                declared = knobs.param(key)
            except KeyError:
                continue  # a key no tune knob turns (threaded, gro_normal_batch)
            if k.where != "forwarder":  # the forwarder's --batch is pktsim-tb's option, not the kernel's
                assert k.param == declared, (path, key)


@pytest.mark.parametrize(
    "path,key,cur,rec,says",
    [
        ("defer", "nic.rx_ring", "256", "4096", ("fixed", "VETH_RING_SIZE")),
        ("defer", "host.af_xdp.batch", "64", "16", ("only --path afxdp",)),
        ("stack", "nic.napi.threaded", "true", "false", ("always threaded",)),
        ("defer", "host.weight", "64", "128", ("NAPI_POLL_WEIGHT",)),
        ("defer", "traffic.rate", "1kpps", "2kpps", ("cannot apply",)),
        ("afxdp", "host.af_xdp.batch", "64", "512", ("1 to 256",)),
    ],
)
def test_a_key_the_path_cannot_apply_is_refused_with_what_it_can(good, path, key, cur, rec, says):
    t = copy.deepcopy(good)
    t["current"]["sets"][key], t["recommended"]["sets"][key] = cur, rec
    with pytest.raises(tunecheck.Refused) as e:
        tunecheck.plan(t, path)
    msg = str(e.value)
    assert key in msg
    for text in says:
        assert text in msg, (text, msg)
    if "cannot apply" in msg:
        assert "it can apply nic.napi.defer_hard_irqs, nic.napi.gro_flush_timeout" in msg


def test_the_afxdp_path_sets_the_forwarders_batch(good):
    t = copy.deepcopy(good)
    t["current"]["sets"]["host.af_xdp.batch"], t["recommended"]["sets"]["host.af_xdp.batch"] = "4", "32"
    ch = tunecheck.plan(t, "afxdp")
    assert [c.key for c in ch if c.knob.where == "forwarder"] == ["host.af_xdp.batch"]
    assert tunecheck.batch_of(ch, "current", t) == 4 and tunecheck.batch_of(ch, "tuned", t) == 32


# ------------------------------------------------------------------------------ arithmetic


def point(util, ns, p99, fpp=4.0, fpw=5.0, fwd=30e3):
    return {
        "dut_utilization": util,
        "dut_ns_per_packet": ns,
        "forwarded_pps": fwd,
        "loss_ratio": 0.0,
        "packets_per_poll": fpp,
        "packets_per_wakeup": fpw,
        "latency_ns": {"p50": p99 / 3, "p90": p99 / 2, "p99": p99, "p999": 2 * p99},
    }


def measurements(cur, tun):
    return {
        "current": [point(*c) for c in cur],
        "tuned": [point(*t) for t in tun],
        "rate_pps": 30e3,
        "capacity_pps": 110e3,
        "model_capacity_pps": None,
        "load_share": False,
        "before": {},
        "batches": {},
        "capacity_probe": {},
    }


def fake_tune(pc_util, pt_util, pc_p99=60e3, pt_p99=150e3):
    def pred(util, p99):
        return {
            "cpu_utilization": util,
            "cpu_by_activity": {"interference": 0.02},
            "throughput_pps": 30e3,
            "latency_ns": {"p99": p99, "p50": 1.0},
            "forwarded_packets": 30_000,
            "io": {"wakeups": 6000},
            "packets_per_poll": {"mean": 4.0},
            "loss_ratio": 0.0,
            "polls_per_packet": 0.25,
        }

    return {
        "load_pps": 30e3,
        "objectives": [{"metric": "cpu_utilization", "direction": "minimize"}],
        "constraints": [{"metric": "latency_ns.p99", "op": "<=", "bound": 200e3, "text": "latency_ns.p99 <= 200us"}],
        "current": {"sets": {}, "predicted": pred(pc_util, pc_p99)},
        "recommended": {"sets": {}, "predicted": pred(pt_util, pt_p99)},
    }


def test_the_comparison_arithmetic_on_given_measurements():
    # The model: 0.52 -> 0.42 of the CPU, of which 0.02 interference (not the thread's):
    # 0.50 -> 0.40, -20%. Measured: 0.50, 0.52 current; 0.41, 0.42 tuned: -18.6%.
    tune = fake_tune(0.52, 0.42)
    ms = measurements([(0.50, 16e3, 50e3), (0.52, 17e3, 70e3)], [(0.41, 13e3, 140e3), (0.42, 14e3, 160e3)])
    res = tunecheck.compare(tune, ms)
    by = {c["metric"]: c for c in res["metrics"]}
    cpu = by["cpu_utilization"]
    assert cpu["predicted_current"] == pytest.approx(0.50) and cpu["predicted_tuned"] == pytest.approx(0.40)
    assert cpu["predicted_improvement"] == pytest.approx(-0.20)
    assert cpu["measured_current"]["mean"] == pytest.approx(0.51) and cpu["measured_tuned"]["mean"] == pytest.approx(0.415)
    assert cpu["measured_improvement"] == pytest.approx(0.415 / 0.51 - 1)
    assert cpu["ratio"] == pytest.approx((0.415 / 0.51 - 1) / -0.20)
    assert cpu["within_goal"] is True and res["goal"]["met"] is True
    # The paired rounds' improvements and their 95% interval (t with 1 degree of freedom).
    pr = [0.41 / 0.50 - 1, 0.42 / 0.52 - 1]
    assert cpu["measured_improvement_rounds"] == pytest.approx(pr)
    assert cpu["measured_improvement_ci95"] == pytest.approx(12.706 * abs(pr[0] - pr[1]) / 2, rel=1e-6)
    assert cpu["measured_current"]["ci95"] == pytest.approx(12.706 * 0.01, rel=1e-6)
    lat = by["latency_ns.p99"]
    assert lat["role"] == "constraint" and lat["predicted_improvement"] == pytest.approx(1.5)
    assert lat["measured_improvement"] == pytest.approx(150 / 60 - 1) and lat["holds_measured"] is True
    assert by["cpu_per_frame"]["role"] == "context"
    assert by["cpu_per_frame"]["predicted_current"] == pytest.approx(0.50 * 1e9 / 30e3)
    # The rows follow the reproduce contract: measured in reported, the model in predicted.
    rows = {r["quantity"]: r for r in res["rows"]}
    r = rows["dut CPU share, improvement (tuned vs current)"]
    assert r["kind"] == "derived" and r["reported"] == pytest.approx(100 * cpu["measured_improvement"]) and r["predicted"] == pytest.approx(-20)
    assert rows["dut CPU share, current"]["kind"] == "predicted" and rows["dut CPU share, current"]["reported"] == pytest.approx(51)


def test_the_tunes_short_names_and_derived_cpu_figures_are_measured(tmp_path, good):
    t = copy.deepcopy(good)
    t["objectives"] = [{"metric": "cpu", "direction": "minimize"}, {"metric": "cpu_ns_per_packet", "direction": "minimize"}]
    t["constraints"] = [{"metric": "p99", "op": "<=", "bound": 1e6}]
    t["load_pps"] = None  # the tune ran at the scenario's own rate
    (tmp_path / "tune.json").write_text(json.dumps(t))
    got = tunecheck.load(tmp_path)
    assert [o["metric"] for o in got["objectives"]] == ["cpu_cores", "cpu_ns_per_packet"] and got["constraints"][0]["metric"] == "latency_ns.p99"
    assert got["load_pps"] == good["current"]["predicted"]["offered_pps"]
    pred = got["current"]["predicted"]
    own = pred["cpu_utilization"] - pred["cpu_by_activity"]["interference"]
    assert tunecheck.METRICS["cpu_cores"].predicted(pred) == pytest.approx(own)
    assert tunecheck.METRICS["cpu_ns_per_packet"].predicted(pred) == pytest.approx(own * 1e9 / pred["offered_pps"])
    p = point(0.5, 1e4, 5e4)
    p["offered_pps"] = 25e3
    assert tunecheck.METRICS["cpu_ns_per_packet"].measured(p) == pytest.approx(20e3)


@pytest.mark.parametrize("measured_tuned,met", [(0.40, True), (0.38, True), (0.42, True), (0.43, False), (0.36, False), (0.52, False)])
def test_the_goal_is_the_measured_improvement_within_25_percent_of_the_predicted(measured_tuned, met):
    # Predicted -20% (0.50 -> 0.40): within the goal for a measured -15% ... -25% (0.375 ... 0.425).
    res = tunecheck.compare(fake_tune(0.52, 0.42), measurements([(0.50, 1e4, 5e4)], [(measured_tuned, 1e4, 5e4)]))
    cpu = res["metrics"][0]
    assert cpu["within_goal"] is met and res["goal"]["met"] is met
    assert cpu["measured_current"]["ci95"] is None  # one round: no interval


def test_a_violated_constraint_is_reported():
    res = tunecheck.compare(fake_tune(0.52, 0.42), measurements([(0.50, 1e4, 5e4)], [(0.40, 1e4, 300e3)]))
    lat = next(c for c in res["metrics"] if c["metric"] == "latency_ns.p99")
    assert lat["holds_measured"] is False and res["constraints_hold_measured"] is False


def test_cli_prints_the_comparison_and_draws_it(tmp_path, monkeypatch, capsys):
    from pktsim import cli
    from pktsim.testbed import paths

    d = make_tune(tmp_path / "tuned")
    t = json.loads((d / "tune.json").read_text())
    pc, pt = t["current"]["predicted"], t["recommended"]["predicted"]

    class Topo:
        xdp_loops = 0

        def __enter__(self):
            return self

        def __exit__(self, *a):
            pass

    def fake_measure(topo, path, tune, changes, rounds, duration, reps, load_share=False, progress=None):
        assert [c.key for c in changes] == ["nic.napi.defer_hard_irqs", "nic.napi.gro_flush_timeout"] and rounds == 3
        ms = measurements([(0.5, 16e3, 60e3)] * 3, [(0.4, 12e3, 150e3)] * 3)
        ms["before"] = {"nic.napi.defer_hard_irqs": 0, "nic.napi.gro_flush_timeout": 0}
        for p in ms["current"] + ms["tuned"]:
            p["runs"] = [fake_run(2.8), fake_run(1.0)]
        return ms

    def fake_run(fpb):
        return {"generator_frames_per_batch": fpb, "generator_max_late_ns": 9e6, "foreign_cpu": 1.0}

    monkeypatch.setattr(paths, "topology", lambda *a: Topo())
    monkeypatch.setattr(tunecheck, "measure", fake_measure)
    out_json, png = tmp_path / "check.json", tmp_path / "check.png"
    assert cli.main(["testbed", "tune-check", str(d), "-o", str(out_json), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "nic.napi.gro_flush_timeout: 0ps -> 50us (sysfs gro_flush_timeout)" in out
    assert "disturbed: other tasks used 100% of a CPU; the generator ran up to 9.0 ms late and sent 1.90 frames at a time" in out
    assert "dut CPU share [%]" in out and "objective" in out and "constraint" in out and "goal (measured improvement within 25%" in out
    res = json.loads(out_json.read_text())
    cpu = res["metrics"][0]
    own = lambda r: r["cpu_utilization"] - r["cpu_by_activity"].get("interference", 0.0)  # noqa: E731
    assert cpu["predicted_improvement"] == pytest.approx(own(pt) / own(pc) - 1)
    assert cpu["measured_improvement"] == pytest.approx(-0.2)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_a_target_above_the_duts_capacity_is_refused_and_load_share_scales_it(good, monkeypatch):
    from pktsim.testbed import runner

    class Topo:
        _lock = None

    monkeypatch.setattr(runner, "capacity", lambda topo: {"forwarded_pps": 25e3})
    rates = []
    monkeypatch.setattr(runner, "repeat", lambda topo, rate, d, reps, run_id: rates.append(rate) or point(0.5, 1e4, 5e4))
    with pytest.raises(tunecheck.Refused, match=r"target load 30.0 kpps: above 98% of the dut's measured capacity 25.0 kpps.*--load-share"):
        tunecheck.measure(Topo(), "defer", good, [], 1, 1.0, 1)
    model = tunecheck.model_capacity(good)
    assert 100e3 < model < 200e3  # the bundled model saturates near 1 / t_proc
    ms = tunecheck.measure(Topo(), "defer", good, [], 2, 1.0, 1, load_share=True)
    assert ms["model_capacity_pps"] == pytest.approx(model)
    assert ms["rate_pps"] == pytest.approx(30e3 / model * 25e3) and rates == [ms["rate_pps"]] * 4
    assert [p["round"] for p in ms["current"]] == [0, 1] and [p["round"] for p in ms["tuned"]] == [0, 1]


# ------------------------------------------------------------------------------ real runs


def _sysctl(name: str) -> int:
    return int(Path("/proc/sys", *name.split(".")).read_text())


@root_only
def test_quick_tune_check_applies_measures_and_restores_every_knob(tmp_path):
    """About 15 s: deferral off vs napi_defer_hard_irqs 2 with a 1 ms timeout at a light
    load (the timer's polls take many frames each), and a global sysctl changed between
    them that must have its old value afterwards."""
    batch = _sysctl("net.core.gro_normal_batch")
    d = make_tune(
        tmp_path / "tuned",
        load_pps=20e3,
        current={**CURRENT, "host.gro_normal_batch": str(batch)},
        tuned={**TUNED, "nic.napi.gro_flush_timeout": "1ms", "host.gro_normal_batch": str(batch + 8)},
    )
    res = json.loads(run_cli("testbed", "tune-check", d, "--quick", "--json").stdout)
    assert _sysctl("net.core.gro_normal_batch") == batch
    assert left_behind() == [] and topology.marked_processes() == []
    assert {c["key"] for c in res["changes"]} == {"nic.napi.defer_hard_irqs", "nic.napi.gro_flush_timeout", "host.gro_normal_batch"}
    ms = res["measurements"]
    assert len(ms["current"]) == len(ms["tuned"]) == 2
    assert all(p["offered_pps"] == pytest.approx(20e3, rel=0.05) for p in ms["current"] + ms["tuned"])
    by = {c["metric"]: c for c in res["metrics"]}
    assert set(by) >= {"cpu_utilization", "latency_ns.p99", "cpu_per_frame", "wakeups_per_frame", "packets_per_poll.mean"}
    # Deferral is applied: the timer's polls take ~20 frames each (a generator that runs
    # late under foreign load sends a few at once, not 20).
    fpp = by["packets_per_poll.mean"]
    if fpp["measured_current"]["mean"] is not None:  # perf counts polls
        assert fpp["measured_tuned"]["mean"] > 2 * fpp["measured_current"]["mean"]
    for r in res["rows"]:
        assert set(r) >= {"quantity", "reported", "predicted", "unit", "rel_error", "source", "kind"}
    assert isinstance(res["goal"]["met"], bool)


@root_only
def test_teardown_restores_the_sysctls_a_killed_check_changed():
    budget = _sysctl("net.core.netdev_budget")
    Path("/proc/sys/net/core/netdev_budget").write_text(f"{budget + 7}\n")
    try:
        topology.LOCK_PATH.write_text(json.dumps({"pid": 999_999_999, "sysctls": {"net.core.netdev_budget": budget}}) + "\n")
        proc = run_cli("testbed", "teardown")
        assert f"restored sysctl net.core.netdev_budget={budget}" in proc.stdout, proc.stdout
        assert _sysctl("net.core.netdev_budget") == budget
    finally:
        Path("/proc/sys/net/core/netdev_budget").write_text(f"{budget}\n")
    assert topology.LOCK_PATH.read_text() == ""
    assert subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.strip() == "" or left_behind() == []
    assert os.geteuid() == 0


@root_only
def test_ctrl_c_during_a_check_restores_the_sysctls_and_tears_down(tmp_path):
    import signal
    import sys
    import time

    from conftest import ROOT

    batch = _sysctl("net.core.gro_normal_batch")
    d = make_tune(
        tmp_path / "tuned",
        load_pps=20e3,
        current={**CURRENT, "host.gro_normal_batch": str(batch + 4)},
        tuned={**TUNED, "host.gro_normal_batch": str(batch + 8)},
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "pktsim", "testbed", "tune-check", str(d), "--duration", "5s", "--repetitions", "1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while _sysctl("net.core.gro_normal_batch") == batch:  # the current side is in place
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    assert _sysctl("net.core.gro_normal_batch") == batch
    assert left_behind() == [] and topology.marked_processes() == []


def test_the_recorded_check_reads_back_and_draws(tmp_path):
    """docs/validation-tune-check.json (VALIDATION.md's record): its text and figure come
    back from the saved result, and what it says holds together."""
    from conftest import ROOT

    res = json.loads((ROOT / "docs" / "validation-tune-check.json").read_text())
    assert res["goal"]["met"] is False and res["offered_traffic"]["disturbed"] is False
    cpu = next(c for c in res["metrics"] if c["role"] == "objective")
    assert cpu["measured_improvement"] == pytest.approx(cpu["measured_tuned"]["mean"] / cpu["measured_current"]["mean"] - 1)
    assert cpu["ratio"] == pytest.approx(cpu["measured_improvement"] / cpu["predicted_improvement"])
    assert "dut CPU [cores]" in tunecheck.text(res)
    tunecheck.plot(res, tmp_path / "check.png")
    assert (tmp_path / "check.png").stat().st_size > 20_000
