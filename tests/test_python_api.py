"""The Python front: the same schema as the TOML files, exported as JSON Schema."""

import json

import jsonschema
import pytest
from conftest import EXAMPLES, run_cli
from golden import strip_wall

import pktsim
from pktsim.tomlread import tomllib


def test_predict_from_a_dict_equals_the_toml_file():
    path = EXAMPLES / "linux-router-64B.toml"
    from_file = pktsim.predict(path)
    from_dict = pktsim.predict(tomllib.loads(path.read_text()))
    for key in ("r_max_pps", "predicted_pps", "cpu_load", "c_total_cycles"):
        assert from_file[key] == from_dict[key]


def test_prediction_groups_frame():
    df = pktsim.predict(EXAMPLES / "linux-router-64B.toml").groups()
    assert list(df["group"]) == list(pktsim.GROUPS)
    assert df["cycles"].sum() == pytest.approx(1978)
    assert df["share"].sum() == pytest.approx(1.0)


def test_scenario_errors_carry_their_parts():
    with pytest.raises(pktsim.ScenarioError) as info:
        pktsim.Scenario.from_dict({"cpu": {"frequency": 3.3}, "link": {"rate": "10Gbit/s"}, "traffic": {}, "cost": {}})
    e = info.value
    assert e.origin == "<python dict>" and e.path == "cpu.frequency" and e.value == "3.3"
    assert "GHz" in e.expected
    assert isinstance(e, ValueError)


def test_with_set_and_seed():
    sc = pktsim.Scenario.load(EXAMPLES / "linux-router-64B.toml")
    assert sc.seed == 1
    sc2 = sc.with_set("seed", 7).with_set("traffic.rate", "1Mpps")
    assert sc2.seed == 7 and sc.seed == 1
    assert pktsim.predict(sc2)["offered_pps"] == 1e6


def test_lists_of_tables_are_set_as_the_cli_sets_them():
    # A list of dicts from Python is the TOML array of inline tables `--set` takes.
    sched = [{"at": "0ms", "rate": "10%"}, {"at": "5ms", "rate": "80%", "ramp": True}]
    sc = pktsim.Scenario.load(EXAMPLES / "linux-router-64B.toml").with_sets({"traffic.schedule": sched})
    assert sc.to_dict()["traffic"]["schedule"][1] == {"at": "5ms", "rate": "80%", "ramp": True}
    sets = ["--set", 'traffic.schedule=[{at="0ms", rate="10%"}, {at="5ms", rate="80%", ramp=true}]']
    cli = json.loads(run_cli("run", str(EXAMPLES / "linux-router-64B.toml"), *sets, "--set", "measure.duration=10ms", "--json").stdout)
    assert strip_wall(pktsim.run(sc.with_set("measure.duration", "10ms"))) == strip_wall(cli)


@pytest.mark.parametrize("example", [p for p in sorted(EXAMPLES.glob("*.toml")) if "[[nodes]]" not in p.read_text()], ids=lambda p: p.name)
def test_examples_and_normalised_scenarios_validate_against_the_json_schema(example):
    # (A chain file is not a scenario: its nodes are, each validated as one by the core.)
    schema = pktsim.Scenario.schema()
    jsonschema.validate(tomllib.loads(example.read_text()), schema)
    jsonschema.validate(pktsim.Scenario.load(example).to_dict(), schema)


def test_json_schema_rejects_what_the_core_rejects():
    schema = pktsim.Scenario.schema()
    bad = {"cpu": {"frequency": "3.3"}, "link": {"rate": "10Gbit/s"}, "traffic": {}, "cost": {}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    unknown = {"cpu": {"frequency": "3.3GHz", "turbo": True}, "link": {"rate": "10Gbit/s"}, "traffic": {}, "cost": {}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(unknown, schema)


def test_units_parse_and_reject():
    assert pktsim.parse_quantity("packetrate", "1.67Mpps") == 1.67e6
    assert pktsim.parse_quantity("frequency", "3.3GHz") == 3.3e9
    assert pktsim.parse_quantity("duration", "479ns") == 479_000  # picoseconds
    assert pktsim.parse_quantity("bytes", "8MiB") == 8 * 2**20
    for kind, text in [("packetrate", "1.67"), ("frequency", "3.3 GHZ"), ("bytes", "1.5B"), ("duration", "NaN ns")]:
        with pytest.raises(ValueError):
            pktsim.parse_quantity(kind, text)


def test_from_measurement_gives_000_table_i_from_its_measurements():
    # 000 Table I: at 3.3 GHz, 1.67 Mpps at 100% load (64 B) and 1.2 Mpps at 75% (1024 B)
    # give C_total 1979 and 2056 cycles; Eq. 3 from the rounded rates and loads lands
    # within the paper's rounding (0.3%).
    assert pktsim.from_measurement(1.67e6, 3.3e9, cpu_load=1.0)["c_total_cycles"] == pytest.approx(1979, rel=3e-3)
    assert pktsim.from_measurement(1.2e6, 3.3e9, cpu_load=0.75)["c_total_cycles"] == pytest.approx(2056, rel=4e-3)
    # Active cycles instead of a load: C = active / R.
    assert pktsim.from_measurement(1.2e6, 3.3e9, active_cycles_per_s=2.4672e9)["c_total_cycles"] == pytest.approx(2056)


def test_fib_fit_reproduces_the_bundled_defaults():
    fit = json.loads(pktsim._core.fib_table_iv_fit())
    assert fit["node_cycles"] == pytest.approx(47.3, abs=0.05)
    assert fit["misses_per_lookup"] == pytest.approx(0.944, abs=0.0005)
    assert fit["memory_latency_ns"] == pytest.approx(100)
    assert fit["fitted_on_routes"] == [256, 1_048_576]


def test_compare_is_in_the_library_and_matches_the_command():
    a, b = EXAMPLES / "linux-router-64B.toml", EXAMPLES / "linux-router-1500B.toml"
    sets = {"measure.warmup": "2ms", "measure.duration": "10ms"}
    res = pktsim.compare(a, b, sets=sets)
    assert res["a"]["origin"] == str(a) and res["b"]["origin"] == str(b)
    rows = {r["quantity"]: r for r in res["rows"]}
    assert rows["C_total"]["diff"] == rows["C_total"]["b"] - rows["C_total"]["a"] > 0
    cli = json.loads(run_cli("compare", a, b, "--set", "measure.warmup=2ms", "--set", "measure.duration=10ms", "--json").stdout)
    assert cli == res, "pktsim compare --json prints what pktsim.compare returns"


def test_summarize_is_exported():
    assert pktsim.summarize is pktsim.experiments.summarize


@pytest.mark.parametrize("example", ["linux-router-64B.toml", "router-firewall-chain.toml"])
def test_a_run_no_signal_can_stop_gives_the_result_of_one_that_can(example):
    """Where no signal can reach a run (a worker thread, as in a Dask task; the main thread
    of a sweep's pool worker, which ignores SIGINT and leaves SIGTERM to the system), the
    binding runs the engine on the calling thread rather than on one of its own: the same
    figures, bit for bit, for a node and a chain."""
    import signal
    import threading

    path, sets = EXAMPLES / example, {"measure.duration": "2ms", "measure.warmup": "1ms"}
    on_its_thread = strip_wall(pktsim.run(path, sets=sets))
    out = {}
    worker = threading.Thread(target=lambda: out.update(r=pktsim.run(path, sets=sets)))
    worker.start()
    worker.join()
    assert strip_wall(out["r"]) == on_its_thread
    # As a pool worker sets them (an earlier test may have left the CLI's SIGTERM handler).
    old = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        assert strip_wall(pktsim.run(path, sets=sets)) == on_its_thread
    finally:
        signal.signal(signal.SIGINT, old[0])
        signal.signal(signal.SIGTERM, old[1])
