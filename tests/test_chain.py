"""Chains of nodes from Python and the command line: the JSON contract, the bottleneck the
model names and the simulation meets, sweeps and compare on chains, clear errors. (The
tandem M/M/1 check and the runner's own tests are in crates/pktsim-core/src/engine/chain.rs.)"""

import json

import pytest
from conftest import EXAMPLES, run_cli

import pktsim

CHAIN = EXAMPLES / "router-firewall-chain.toml"
SHORT = {"measure.duration": "20ms"}


def test_run_json_has_end_to_end_loss_by_node_and_each_node(cli):
    r = json.loads(cli("run", CHAIN, "--set", "measure.duration=20ms", "--json").stdout)
    node = json.loads(cli("run", EXAMPLES / "linux-router-64B.toml", "--set", "measure.duration=1ms", "--json").stdout)
    assert set(node) <= set(r["end_to_end"])  # same keys as run --json
    assert len(r["nodes"]) == 2 and all(set(node) <= set(n) for n in r["nodes"])
    assert r["node_names"] == ["Linux router, 64 B frames, 1 core", "firewall"]
    assert [x["node"] for x in r["loss_by_node"]] == [0, 1]
    # The top level is the end-to-end figures (so a chain reads as a node in sweeps and tunes).
    assert r["throughput_pps"] == r["end_to_end"]["throughput_pps"] and r["latency_ns"] == r["end_to_end"]["latency_ns"]
    # End to end is at least the sum of the nodes' own latencies (their rings to their tx rings).
    assert r["end_to_end"]["latency_ns"]["mean"] > sum(n["latency_ns"]["mean"] for n in r["nodes"])
    assert len(r["end_to_end"]["cpu_per_core"]) == 2


def test_the_model_names_the_bottleneck_and_the_simulation_saturates_there(cli):
    m = json.loads(cli("model", CHAIN, "--json").stdout)
    assert m["bottleneck_node"] == 1 and m["bottleneck"] == "cpu"
    assert m["r_max_pps"] == m["capacity_pps"] == pytest.approx(m["nodes"][1]["capacity_pps"])
    assert m["nodes"][0]["capacity_pps"] > 4 * m["r_max_pps"]
    # Offered above the firewall's capacity: the chain carries what the firewall can, the
    # firewall drops the rest and the router nothing.
    r = pktsim.run(CHAIN, {"traffic.rate": "400kpps", "measure.duration": "100ms", "measure.warmup": "30ms"})
    assert r["throughput_pps"] == pytest.approx(m["r_max_pps"], rel=0.01)
    assert r["loss_by_node"][0]["dropped_packets"] == 0 and r["loss_by_node"][1]["dropped_packets"] > 0
    assert r["loss_ratio"] == pytest.approx(1 - m["r_max_pps"] / r["offered_pps"], abs=0.01)
    text = cli("model", CHAIN).stdout
    assert "<- bottleneck" in text and "firewall" in text


def test_same_seed_same_chain_bit_for_bit():
    a = pktsim.run(CHAIN, SHORT)
    b = pktsim.run(CHAIN, SHORT)
    strip = lambda r: {k: v for k, v in r.items() if k not in ("wall_s", "end_to_end", "nodes")}  # noqa: E731
    assert strip(a) == strip(b)
    assert [strip(n) for n in a["nodes"]] == [strip(n) for n in b["nodes"]]
    c = pktsim.run(CHAIN, {**SHORT, "seed": 2})
    assert c["latency_ns"] != a["latency_ns"]


def test_sets_reach_a_node_and_the_chain():
    base = pktsim.run(CHAIN, SHORT)
    slow = pktsim.run(CHAIN, {**SHORT, "nodes.1.host.t_proc": "5us"})  # 3.5 us in the file
    assert slow["nodes"][1]["t_proc_ns"] - base["nodes"][1]["t_proc_ns"] == pytest.approx(1500.0)
    assert slow["nodes"][0]["t_proc_ns"] == base["nodes"][0]["t_proc_ns"]
    assert pktsim.run(CHAIN, {**SHORT, "traffic.rate": "100kpps"})["offered_pps"] == pytest.approx(100_000, rel=0.05)


def test_sweeps_plots_and_compare_work_on_chains(cli, tmp_path):
    df = pktsim.sweep(CHAIN, "traffic.rate", "100kpps,400kpps", sets=SHORT, jobs=1)
    assert list(df["status"]) == ["ok", "ok"]
    assert df["throughput_pps"].iloc[1] < 300_000 < df["offered_pps"].iloc[1]
    cli("sweep", CHAIN, "--set", "measure.duration=5ms", "--param", "traffic.rate", "--values", "100kpps,400kpps", "--plots", tmp_path / "plots")
    assert any(p.suffix == ".png" for p in (tmp_path / "plots").iterdir())
    p = cli("compare", CHAIN, EXAMPLES / "linux-router-64B.toml", "--set", "measure.duration=5ms", "--json")
    rows = {r["quantity"]: r for r in json.loads(p.stdout)["rows"]}
    assert "R_max (chain: its bottleneck)" in rows


def test_tune_turns_the_bottleneck_nodes_knobs_against_the_chains_figures(cli, tmp_path):
    out = tmp_path / "tuned"
    p = cli(
        "tune",
        CHAIN,
        "--set",
        "measure.duration=30ms",
        "--load",
        "250kpps",
        "--minimize",
        "cpu",
        "--subject-to",
        "p99 <= 150us",
        "--knobs",
        "nic.napi",
        "--budget",
        "40",
        "--replications",
        "1",
        "-o",
        out,
        "--json",
    )
    t = json.loads(p.stdout)
    assert t["node"] == 1  # the firewall: the bottleneck
    rec = t["recommended"]
    assert rec["feasible"] and not t["current"]["feasible"] and rec["sets"]["nic.napi.defer_hard_irqs"] != "0"
    # The tuned chain, run as is, gives the predicted figures (one replication: exactly).
    r = json.loads(cli("run", out / "tuned.toml", "--json").stdout)
    assert r["latency_ns"]["p99"] == rec["predicted"]["latency_ns"]["p99"]
    assert r["nodes"][1]["io"] == rec["predicted"]["nodes"][1]["io"]
    p = cli("tune", CHAIN, "--minimize", "nodes.0.cpu_utilization", "--node", "5", check=False)
    assert p.returncode == 2 and "--node 5: the chain has 2 nodes" in p.stderr


@pytest.mark.parametrize(
    "text, message",
    [
        ("nodes = []\n", "at least one [[nodes]] entry"),
        ('oops = 1\n[[nodes]]\nfile = "linux-router-64B.toml"\n', "oops"),
        ('[[nodes]]\nfile = "missing.toml"\n', "nodes.0.file"),
        ('[[nodes]]\nfile = "linux-router-64B.toml"\n[nodes.link]\ndelay = "soon"\n', "nodes.0.link.delay"),
        ('[[nodes]]\nfile = "linux-router-64B.toml"\n[nodes.host]\nt_proc = "fast"\n', "nodes.0"),
        ('[[nodes]]\nfile = "router-firewall-chain.toml"\n', "not another chain"),
    ],
)
def test_bad_chains_exit_2_naming_the_node_and_key(tmp_path, text, message):
    for name in ("linux-router-64B.toml", "router-firewall-chain.toml"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text())
    f = tmp_path / "chain.toml"
    f.write_text(text)
    p = run_cli("run", f, check=False)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr, p.stderr
