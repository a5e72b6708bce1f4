"""Calibration from perf profiles (000 sections IV, V)."""

import json
import random
from pathlib import Path

import pytest

from pktsim import calibrate as cal
from conftest import ROOT, run_cli

DATA = ROOT / "tests" / "data"
GROUPS = ["RX", "alloc", "prerouting", "routing", "postrouting", "free", "TX", "other"]

# Representative call stacks of the Linux forwarding path, per 000 group (root first).
BASE = ["run_ksoftirqd", "__do_softirq", "net_rx_action", "__napi_poll", "ixgbe_poll"]
STACKS = {
    "RX": [BASE + ["ixgbe_clean_rx_irq"], BASE + ["ixgbe_clean_rx_irq", "napi_gro_receive", "dev_gro_receive"]],
    "alloc": [BASE + ["ixgbe_clean_rx_irq", "ixgbe_alloc_rx_buffers", "__alloc_pages"], BASE + ["ixgbe_clean_rx_irq", "__napi_alloc_skb"]],
    "prerouting": [BASE + ["ixgbe_clean_rx_irq", "__netif_receive_skb_core", "ip_rcv"], BASE + ["ixgbe_clean_rx_irq", "ip_rcv", "nf_hook_slow"]],
    "routing": [BASE + ["ixgbe_clean_rx_irq", "ip_rcv", "ip_rcv_finish", "ip_route_input_noref", "fib_table_lookup", "check_leaf"]],
    "postrouting": [BASE + ["ixgbe_clean_rx_irq", "ip_rcv", "ip_forward", "memcpy_orig"], BASE + ["ixgbe_clean_rx_irq", "ip_forward", "ip_finish_output2", "neigh_hh_output"]],
    "free": [BASE + ["ixgbe_clean_tx_irq", "napi_consume_skb", "skb_release_data"], BASE + ["ixgbe_clean_tx_irq", "napi_consume_skb", "kmem_cache_free"]],
    "TX": [BASE + ["ixgbe_clean_rx_irq", "ip_forward", "__dev_queue_xmit", "sch_direct_xmit", "ixgbe_xmit_frame_ring"], BASE + ["ixgbe_clean_tx_irq"]],
    "other": [BASE + ["ixgbe_clean_rx_irq", "ip_forward", "__dev_queue_xmit", "do_raw_spin_lock"], ["ret_from_fork", "kthread", "mystery_helper"]],
}
IDLE = ["cpu_startup_entry", "do_idle", "default_idle", "native_safe_halt"]


def synthetic_folded(cycles: dict, idle_share: float, scale: int = 1000, seed: int = 1) -> str:
    """Folded stacks whose samples are proportional to `cycles` per group, spread randomly
    over each group's stacks, plus idle samples."""
    rng = random.Random(seed)
    lines = []
    total = 0
    for g, c in cycles.items():
        n = round(c * scale)
        total += n
        stacks = STACKS[g]
        split = [rng.random() for _ in stacks]
        parts = [round(n * s / sum(split)) for s in split]
        parts[-1] = n - sum(parts[:-1])
        lines += [f"{';'.join(s)} {k}" for s, k in zip(stacks, parts) if k > 0]
    idle = round(total * idle_share / (1 - idle_share))
    lines.append(f"{';'.join(IDLE)} {idle}")
    return "\n".join(lines) + "\n"


def to_perf_script(folded: str) -> str:
    """The same samples as perf script text (one sample per line, period = count)."""
    out = []
    for line in folded.splitlines():
        stack, count = line.rsplit(" ", 1)
        out.append(f"ksoftirqd/1    17 [001]  100.000001:     {count} cpu-clock:pppH: ")
        out += [f"\tffffffff81{i:06x} {f}+0x1f ([kernel.kallsyms])" for i, f in enumerate(reversed(stack.split(";")))]
        out.append("")
    return "\n".join(out) + "\n"


TABLE_II_1024 = dict(zip(GROUPS, [433, 130, 161, 226, 206, 245, 267, 389]))


@pytest.mark.parametrize("fmt", ["folded", "perf-script"])
def test_synthetic_profile_reads_back_within_one_percent_per_group(tmp_path, fmt):
    # 000 Table II, 1024 B: 1.20 Mpps at ~75% load of 3.3 GHz; 25% of the samples idle.
    folded = synthetic_folded(TABLE_II_1024, idle_share=0.25)
    path = tmp_path / f"synthetic.{fmt}"
    path.write_text(folded if fmt == "folded" else to_perf_script(folded))
    total = sum(TABLE_II_1024.values())
    rate = 1.2e6
    load = total * rate / 3.3e9
    c = cal.calibrate(cal.read_profile(path), cal.Rules.load(), rate, 3.3e9, cpu_load=load)
    assert c.fmt == fmt
    for g in GROUPS:
        assert c.cycles_by_group[g] == pytest.approx(TABLE_II_1024[g], rel=0.01), g
    assert c.c_total_cycles == pytest.approx(total, rel=1e-9)
    assert c.to_json()["idle_share"] == pytest.approx(0.25, abs=0.001)
    # The unmatched helper is listed with its share.
    assert [name for name, _ in c.unmatched_top()] == ["mystery_helper"]


def test_readers_on_real_format_samples():
    rules = cal.Rules.load()
    ps = cal.read_profile(DATA / "perf-script.txt")
    assert ps.fmt == "perf-script" and ps.total == 5 * 250000
    c = cal.calibrate(ps, rules, 1e6, 3.3e9, cpu_load=0.8)
    share = {g: c.samples_by_group[g] / c.active_samples for g in GROUPS}
    assert share == pytest.approx({"RX": 0, "alloc": 0, "prerouting": 0, "routing": 0.25, "postrouting": 0.25, "free": 0.25, "TX": 0.25, "other": 0})
    folded = cal.read_profile(DATA / "folded.txt")
    assert folded.fmt == "folded" and folded.total == 1978
    report = cal.read_profile(DATA / "perf-report.txt")
    assert report.fmt == "perf-report"
    c = cal.calibrate(report, rules, 1.67e6, 3.3e9, cpu_load=1.0)
    assert c.unmatched_top()[0][0] == "memcpy_orig"
    assert c.cycles_by_group["routing"] == pytest.approx(c.c_total_cycles * 10.11 / 100, rel=1e-3)


@pytest.mark.parametrize(
    "name, text, line",
    [
        ("garbage.txt", "this is not a profile\n", 1),
        ("truncated.script", "swapper 0 [000] 1.000001: 1 cpu-clock: \n\tffffffff81000000 native_safe_halt+0x1 ([kernel.kallsyms])\n\tffffffff81", 3),
        ("orphan.script", "swapper 0 [000] 1.000001: 1 cpu-clock: \n\tffffffff81000000 native_safe_halt ([kernel.kallsyms])\n\n\tffffffff81000001 default_idle ([kernel.kallsyms])\n", 4),
        ("bad.folded", "a;b;c 10\na;;c 5\n", 2),
    ],
)
def test_garbage_and_truncated_input_name_the_line(tmp_path, name, text, line):
    p = tmp_path / name
    p.write_text(text)
    fmt = "perf-script" if name.endswith(".script") else "auto"
    with pytest.raises(cal.ProfileError) as e:
        cal.read_profile(p, fmt)
    assert f"{p}:{line}:" in str(e.value)


def test_empty_input_is_a_clear_error(tmp_path):
    p = tmp_path / "empty.txt"
    p.write_text("")
    proc = run_cli("calibrate", p, "--rate", "1Mpps", "--cpu-load", "100%", "--freq", "3GHz", check=False)
    assert proc.returncode == 2 and "empty.txt" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "function, group",
    [
        ("ixgbe_clean_rx_irq", "RX"), ("net_rx_action", "RX"), ("napi_gro_receive", "RX"), ("__netif_receive_skb_core", "RX"),
        ("i40e_napi_poll", "RX"), ("mlx5e_poll_rx_cq", "RX"), ("ice_clean_rx_irq", "RX"),
        ("ixgbe_alloc_rx_buffers", "alloc"), ("__alloc_skb", "alloc"), ("__napi_alloc_skb", "alloc"), ("build_skb", "alloc"),
        ("ip_rcv", "prerouting"), ("ip_rcv_finish", "prerouting"),
        ("ip_route_input_noref", "routing"), ("fib_table_lookup", "routing"), ("check_leaf", "routing"), ("fib_validate_source", "routing"),
        ("ip_forward", "postrouting"), ("ip_finish_output2", "postrouting"), ("__ipv4_neigh_lookup_noref", "postrouting"), ("ip_fragment", "postrouting"),
        ("kfree_skb", "free"), ("skb_release_data", "free"), ("napi_consume_skb", "free"), ("kmem_cache_free", "free"),
        ("dev_queue_xmit", "TX"), ("sch_direct_xmit", "TX"), ("dev_hard_start_xmit", "TX"), ("ixgbe_xmit_frame_ring", "TX"),
        ("ixgbe_clean_tx_irq", "TX"), ("i40e_clean_tx_irq", "TX"), ("mlx5e_xmit", "TX"), ("pfifo_fast_dequeue", "TX"),
        ("do_raw_spin_lock", "other"), ("arch_local_irq_restore", "other"), ("_raw_spin_lock", "other"),
        ("poll_idle", "idle"), ("intel_idle", "idle"),
        ("nf_hook_slow", None), ("memcpy", None), ("ipt_do_table", None),
    ],
)
def test_bundled_rules_put_linux_forwarding_functions_where_000_does(function, group):
    assert cal.Rules.load().group_of(function) == group


def test_calibrate_cli_json_contract_and_outputs_usable_by_model_and_run(tmp_path):
    out = tmp_path / "cost.toml"
    svg, png = tmp_path / "flame.svg", tmp_path / "bars.png"
    res = json.loads(
        run_cli("calibrate", DATA / "folded.txt", "--rate", "1.67Mpps", "--cpu-load", "100%", "--freq", "3.3GHz",
                "-o", out, "--flamegraph", svg, "--bars", png, "--json").stdout
    )
    assert set(res) >= {"c_total_cycles", "cycles_by_group", "unmatched_share", "unmatched_top"}
    assert list(res["cycles_by_group"]) == GROUPS
    assert res["c_total_cycles"] == pytest.approx(3.3e9 / 1.67e6)
    scenario = tmp_path / "s.toml"
    scenario.write_text('[cpu]\nfrequency = "3.3GHz"\n[link]\nrate = "10Gbit/s"\n[traffic]\n[cost]\nprofile = "cost.toml"\n')
    model = json.loads(run_cli("model", scenario, "--json").stdout)
    assert model["c_total_cycles"] == pytest.approx(res["c_total_cycles"], rel=1e-3)
    sim = json.loads(run_cli("run", scenario, "--json", "--set", "measure.duration=10ms").stdout)
    assert sim["throughput_pps"] == pytest.approx(model["r_max_pps"], rel=0.01)
    text = svg.read_text()
    assert "<svg" in text and "rgb(214,39,40)" in text  # routing frames in the routing colour
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_user_rules_extend_the_mapping(tmp_path):
    rules = tmp_path / "mine.toml"
    rules.write_text((cal.BUNDLED_RULES.read_text()) + '\n[[rule]]\ngroup = "postrouting"\nexact = ["memcpy_orig"]\n')
    res = json.loads(run_cli("calibrate", DATA / "perf-report.txt", "--rate", "1.67Mpps", "--cpu-load", "100%", "--freq", "3.3GHz", "--rules", rules, "--json").stdout)
    assert res["unmatched_share"] == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\ngroup = "egress"\nexact = ["x"]\n')
    proc = run_cli("calibrate", DATA / "folded.txt", "--rate", "1Mpps", "--cpu-load", "100%", "--freq", "3GHz", "--rules", bad, check=False)
    assert proc.returncode == 2 and "rule[0].group" in proc.stderr and "egress" in proc.stderr


def test_plot_groups_side_by_side(tmp_path):
    png = tmp_path / "fig9.png"
    run_cli("plot-groups", "raumer2015-flows-1", "raumer2015-flows-256", "raumer2015-flows-16384", "raumer2015-flows-1048576", "-o", png)
    assert png.stat().st_size > 10_000
