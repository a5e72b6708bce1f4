"""Calibration from perf profiles (000 sections IV, V)."""

import json
import random

import pytest
from conftest import ROOT, run_cli

from pktsim import calibrate as cal

DATA = ROOT / "tests" / "data"
GROUPS = ["RX", "alloc", "prerouting", "routing", "postrouting", "free", "TX", "other"]

# Representative call stacks of the Linux forwarding path, per 000 group (root first).
BASE = ["run_ksoftirqd", "__do_softirq", "net_rx_action", "__napi_poll", "ixgbe_poll"]
STACKS = {
    "RX": [BASE + ["ixgbe_clean_rx_irq"], BASE + ["ixgbe_clean_rx_irq", "napi_gro_receive", "dev_gro_receive"]],
    "alloc": [BASE + ["ixgbe_clean_rx_irq", "ixgbe_alloc_rx_buffers", "__alloc_pages"], BASE + ["ixgbe_clean_rx_irq", "__napi_alloc_skb"]],
    "prerouting": [BASE + ["ixgbe_clean_rx_irq", "__netif_receive_skb_core", "ip_rcv"], BASE + ["ixgbe_clean_rx_irq", "ip_rcv", "nf_hook_slow"]],
    "routing": [BASE + ["ixgbe_clean_rx_irq", "ip_rcv", "ip_rcv_finish", "ip_route_input_noref", "fib_table_lookup", "check_leaf"]],
    "postrouting": [
        BASE + ["ixgbe_clean_rx_irq", "ip_rcv", "ip_forward", "memcpy_orig"],
        BASE + ["ixgbe_clean_rx_irq", "ip_forward", "ip_finish_output2", "neigh_hh_output"],
    ],
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


def test_perf_script_without_call_stacks_takes_the_sampled_symbol_from_the_header():
    # perf record without -g: the sampled address, symbol and object on the header line.
    text = (
        "swapper     0 [000]  10.000001:     1000 cycles:u:  ffffffff81a0 do_idle+0x1c ([kernel.kallsyms])\n"
        "ksoftirqd/0 9 [000]  10.000002:     3000 cycles:u:  ffffffff81b0 fib_table_lookup+0x60 ([kernel.kallsyms])\n"
    )
    p = cal.read_perf_script(text, "p.txt")
    assert dict(p.stacks) == {("do_idle",): 1000.0, ("fib_table_lookup",): 3000.0}
    assert p.events == {"cycles:u"}
    # A tracepoint's arguments on the header line are no frame, even in parentheses.
    tp = cal.read_perf_script("a 1 [000] 1.0: raw_syscalls:sys_enter: NR 0 (3, 7f00, 40)\n\tffff81 do_syscall_64+0x5 ([k])\n", "t.txt")
    assert dict(tp.stacks) == {("do_syscall_64",): 1.0}


def test_the_flame_graph_counts_what_the_profile_weighs():
    # A flame graph's tooltips name what the widths count: periods in the sampled event's
    # unit where perf script gives them (cpu-clock: nanoseconds), else samples or percent.
    units = {f: cal.read_profile(DATA / f).weight_unit() for f in ("perf-script.txt", "folded.txt", "perf-report.txt")}
    assert units == {"perf-script.txt": "ns of cpu-clock", "folded.txt": "samples", "perf-report.txt": "% of samples"}
    cycles = cal.read_perf_script("a 1 1.0: 5000 cycles:ppp:  ffff81 do_idle+0x1 ([k])\n\nb 1 2.0: 7000 cycles:ppp:  ffff82 ip_rcv+0x2 ([k])\n", "c.txt")
    assert cycles.weight_unit() == "cycles"
    unweighted = cal.read_perf_script("a 1 1.0: cycles:  ffff81 do_idle+0x1 ([k])\n", "u.txt")
    assert unweighted.weight_unit() == "samples"
    svg = cal.flamegraph(cal.read_profile(DATA / "perf-script.txt"), cal.Rules.load(), "t")
    assert "ns of cpu-clock" in svg and " samples" not in svg


@pytest.mark.parametrize(
    "name, text, line",
    [
        ("garbage.txt", "this is not a profile\n", 1),
        ("truncated.script", "swapper 0 [000] 1.000001: 1 cpu-clock: \n\tffffffff81000000 native_safe_halt+0x1 ([kernel.kallsyms])\n\tffffffff81", 3),
        (
            "orphan.script",
            "swapper 0 [000] 1.000001: 1 cpu-clock: \n\tffffffff81000000 native_safe_halt ([kernel.kallsyms])\n"
            "\n\tffffffff81000001 default_idle ([kernel.kallsyms])\n",
            4,
        ),
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
        ("ixgbe_clean_rx_irq", "RX"),
        ("net_rx_action", "RX"),
        ("napi_gro_receive", "RX"),
        ("__netif_receive_skb_core", "RX"),
        ("i40e_napi_poll", "RX"),
        ("mlx5e_poll_rx_cq", "RX"),
        ("ice_clean_rx_irq", "RX"),
        ("ixgbe_alloc_rx_buffers", "alloc"),
        ("__alloc_skb", "alloc"),
        ("__napi_alloc_skb", "alloc"),
        ("build_skb", "alloc"),
        ("ip_rcv", "prerouting"),
        ("ip_rcv_finish", "prerouting"),
        ("ip_route_input_noref", "routing"),
        ("fib_table_lookup", "routing"),
        ("check_leaf", "routing"),
        ("fib_validate_source", "routing"),
        ("ip_forward", "postrouting"),
        ("ip_finish_output2", "postrouting"),
        ("__ipv4_neigh_lookup_noref", "postrouting"),
        ("ip_fragment", "postrouting"),
        ("kfree_skb", "free"),
        ("skb_release_data", "free"),
        ("napi_consume_skb", "free"),
        ("kmem_cache_free", "free"),
        ("dev_queue_xmit", "TX"),
        ("sch_direct_xmit", "TX"),
        ("dev_hard_start_xmit", "TX"),
        ("ixgbe_xmit_frame_ring", "TX"),
        ("ixgbe_clean_tx_irq", "TX"),
        ("i40e_clean_tx_irq", "TX"),
        ("mlx5e_xmit", "TX"),
        ("pfifo_fast_dequeue", "TX"),
        ("do_raw_spin_lock", "other"),
        ("arch_local_irq_restore", "other"),
        ("_raw_spin_lock", "other"),
        ("poll_idle", "idle"),
        ("intel_idle", "idle"),
        ("nf_hook_slow", None),
        ("memcpy", None),
        ("ipt_do_table", None),
    ],
)
def test_bundled_rules_put_linux_forwarding_functions_where_000_does(function, group):
    assert cal.Rules.load().group_of(function) == group


def test_calibrate_cli_json_contract_and_outputs_usable_by_model_and_run(tmp_path):
    out = tmp_path / "cost.toml"
    svg, png = tmp_path / "flame.svg", tmp_path / "bars.png"
    res = json.loads(
        run_cli(
            "calibrate",
            DATA / "folded.txt",
            "--rate",
            "1.67Mpps",
            "--cpu-load",
            "100%",
            "--freq",
            "3.3GHz",
            "-o",
            out,
            "--flamegraph",
            svg,
            "--bars",
            png,
            "--json",
        ).stdout
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
    res = json.loads(
        run_cli("calibrate", DATA / "perf-report.txt", "--rate", "1.67Mpps", "--cpu-load", "100%", "--freq", "3.3GHz", "--rules", rules, "--json").stdout
    )
    assert res["unmatched_share"] == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\ngroup = "egress"\nexact = ["x"]\n')
    proc = run_cli("calibrate", DATA / "folded.txt", "--rate", "1Mpps", "--cpu-load", "100%", "--freq", "3GHz", "--rules", bad, check=False)
    assert proc.returncode == 2 and "rule[0].group" in proc.stderr and "egress" in proc.stderr


def test_plot_groups_side_by_side(tmp_path):
    png = tmp_path / "fig9.png"
    run_cli("plot-groups", "raumer2015-flows-1", "raumer2015-flows-256", "raumer2015-flows-16384", "raumer2015-flows-1048576", "-o", png)
    assert png.stat().st_size > 10_000


def test_plot_groups_draws_each_profile_as_measured():
    """Each profile at the FIB it was measured with: 000 Table IV's totals and routing
    cycles as the profiles write them (at the default FIB of one route the model would
    move routing from 720 to about 390 cycles at 1,048,576 flows)."""
    from pktsim.commands import profile_groups

    for name, total, routing in (
        ("raumer2015-flows-1", 1978, 200),
        ("raumer2015-flows-256", 2045, 350),
        ("raumer2015-flows-16384", 2091, 406),
        ("raumer2015-flows-1048576", 2418, 720),
    ):
        label, groups = profile_groups(name)
        assert label == name and sum(groups.values()) == pytest.approx(total) and groups["routing"] == pytest.approx(routing)


# ------------------------------------------------------------------ rules that follow the packet

PKT = ["run_ksoftirqd", "__do_softirq", "net_rx_action", "__napi_poll", "ixgbe_poll"]
IDLE_IRQ = ["cpu_startup_entry", "do_idle", "default_idle", "asm_common_interrupt", "common_interrupt", "irq_exit_rcu", "__irq_exit_rcu"]
# (stack root first, samples, true group, how the sample is filed: rule / entry / unmatched)
KNOWN_SPLIT = [
    # Packet work under ksoftirqd, under a hard interrupt from idle, and a local send.
    (PKT + ["ixgbe_clean_rx_irq"], 400, "RX", "rule"),
    (IDLE_IRQ + ["handle_softirqs", "net_rx_action", "__napi_poll", "ixgbe_poll", "ixgbe_clean_rx_irq"], 50, "RX", "rule"),
    (
        [
            "cpu_startup_entry",
            "do_idle",
            "asm_common_interrupt",
            "common_interrupt",
            "handle_edge_irq",
            "handle_irq_event",
            "__handle_irq_event_percpu",
            "ixgbe_msix_clean_rings",
        ],
        30,
        "RX",
        "rule",
    ),
    (PKT + ["ixgbe_clean_rx_irq", "ixgbe_alloc_rx_buffers", "__alloc_pages", "get_page_from_freelist"], 130, "alloc", "rule"),
    (
        [
            "entry_SYSCALL_64_after_hwframe",
            "do_syscall_64",
            "__x64_sys_sendto",
            "__sys_sendto",
            "udp_sendmsg",
            "ip_make_skb",
            "__alloc_skb",
            "kmem_cache_alloc_node",
        ],
        9,
        "alloc",
        "rule",
    ),
    (PKT + ["ixgbe_clean_rx_irq", "napi_gro_receive", "__netif_receive_skb_core", "ip_rcv"], 160, "prerouting", "rule"),
    (PKT + ["ixgbe_clean_rx_irq", "ip_rcv", "ip_rcv_finish", "ip_route_input_noref", "fib_table_lookup"], 220, "routing", "rule"),
    (PKT + ["ixgbe_clean_rx_irq", "ip_rcv", "ip_forward", "memcpy_orig"], 200, "postrouting", "rule"),
    (PKT + ["ixgbe_clean_tx_irq", "napi_consume_skb", "skb_release_data", "kmem_cache_free"], 240, "free", "rule"),
    (PKT + ["ixgbe_clean_tx_irq", "napi_consume_skb", "kfree"], 5, "free", "rule"),
    (PKT + ["ixgbe_clean_rx_irq", "ip_forward", "__dev_queue_xmit", "sch_direct_xmit", "ixgbe_xmit_frame_ring"], 260, "TX", "rule"),
    (PKT + ["ixgbe_clean_rx_irq", "ip_forward", "__dev_queue_xmit", "_raw_spin_lock"], 90, "other", "rule"),
    # Softirq work that is not the packet's: RCU callbacks (one freeing through the slab
    # allocator), timers, tasklets, __do_softirq's own loop, an idle ksoftirqd.
    (["run_ksoftirqd", "__do_softirq", "rcu_core", "rcu_do_batch", "file_free_rcu", "kmem_cache_free"], 70, "other", "entry"),
    (IDLE_IRQ + ["__do_softirq", "rcu_core", "rcu_do_batch"], 25, "other", "entry"),
    (["run_ksoftirqd", "__do_softirq", "run_timer_softirq", "__run_timers", "call_timer_fn", "delayed_work_timer_fn"], 40, "other", "entry"),
    (["run_ksoftirqd", "handle_softirqs", "tasklet_action", "tasklet_action_common", "foo_tasklet_fn"], 35, "other", "entry"),
    (["run_ksoftirqd", "__do_softirq"], 5, "other", "entry"),
    (["ret_from_fork", "kthread", "smpboot_thread_fn", "run_ksoftirqd"], 15, "other", "entry"),
    (["ret_from_fork", "kthread", "smpboot_thread_fn", "schedule", "__schedule", "finish_task_switch"], 10, "other", "entry"),
    # Not packet work although packet frames are above it: a timer interrupt and a nested
    # softirq running RCU callbacks (kfree after an entry point is not C_free).
    (
        PKT + ["ixgbe_clean_rx_irq", "asm_sysvec_apic_timer_interrupt", "sysvec_apic_timer_interrupt", "hrtimer_interrupt", "tick_sched_timer"],
        20,
        "other",
        "entry",
    ),
    (
        PKT
        + ["ixgbe_clean_rx_irq", "ip_forward", "ip_finish_output2", "__local_bh_enable_ip", "do_softirq", "__do_softirq", "rcu_core", "rcu_do_batch", "kfree"],
        12,
        "other",
        "entry",
    ),
    # Other kernel entry points: a kworker and a syscall allocating memory.
    (["ret_from_fork", "kthread", "worker_thread", "process_one_work", "vmstat_update"], 8, "other", "entry"),
    (["entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_read", "kmem_cache_alloc"], 7, "other", "entry"),
    # Nothing matches: C_other, listed as unmatched.
    (["ret_from_fork", "kthread", "mystery_thread"], 6, "other", "unmatched"),
    (IDLE + [], 300, "idle", "rule"),
]


def _known_split_profile(tmp_path, fmt):
    folded = "".join(f"{';'.join(s)} {n}\n" for s, n, _, _ in KNOWN_SPLIT)
    path = tmp_path / f"known.{fmt}"
    path.write_text(folded if fmt == "folded" else to_perf_script(folded))
    return cal.read_profile(path)


@pytest.mark.parametrize("fmt", ["folded", "perf-script"])
def test_bundled_rules_give_each_group_exactly_its_true_share(tmp_path, fmt):
    c = cal.calibrate(_known_split_profile(tmp_path, fmt), cal.Rules.load(), 1e6, 3e9, cpu_load=1.0)
    truth = {g: 0 for g in [*GROUPS, "idle"]}
    for _, n, g, _ in KNOWN_SPLIT:
        truth[g] += n
    active = sum(truth.values()) - truth["idle"]
    assert c.active_samples == active == 2047
    # Each group's share of the active samples, exactly: RCU, timers, tasklets, the softirq
    # loop and an idle ksoftirqd are C_other, not RX; packet work under the same entry
    # points keeps its group.
    assert {g: c.samples_by_group[g] for g in truth} == truth
    assert {g: c.cycles_by_group[g] for g in GROUPS} == pytest.approx({g: 3000 * truth[g] / active for g in GROUPS}, rel=1e-12)
    assert c.cycles_by_group["RX"] == pytest.approx(3000 * 480 / 2047)
    assert c.cycles_by_group["other"] == pytest.approx(3000 * 343 / 2047)
    # What ran outside the packet path is named by the work the entry point called.
    outside = {name: round(share * active) for name, share in c.outside_top(50)}
    assert outside == {
        "rcu_core": 107,
        "run_timer_softirq": 40,
        "tasklet_action": 35,
        "__do_softirq": 5,
        "run_ksoftirqd": 15,
        "finish_task_switch": 10,
        "hrtimer_interrupt": 20,
        "vmstat_update": 8,
        "__x64_sys_read": 7,
    }
    assert c.outside_share == pytest.approx(247 / active)
    assert [name for name, _ in c.unmatched_top()] == ["mystery_thread"]
    # Real sample counts: perf script has one sample per stack here (the period is the weight).
    counts = c.to_json()["samples_by_group"]
    if fmt == "folded":
        assert counts == truth
    else:
        assert counts == {g: sum(1 for _, _, tg, _ in KNOWN_SPLIT if tg == g) for g in truth}
        assert c.to_json()["samples"] == len(KNOWN_SPLIT)


def test_each_known_stack_is_filed_where_the_packet_says():
    rules = cal.Rules.load()
    for stack, _, group, how in KNOWN_SPLIT:
        g, h, _ = rules.classify(tuple(stack))
        assert (g if h != "unmatched" else "other", h) == (group, how), stack


def test_rules_without_roles_keep_their_old_meaning(tmp_path):
    # A rules file written before roles existed still loads, and a shared entry point in a
    # packet group still counts for it everywhere (the file says so).
    old = tmp_path / "old.toml"
    old.write_text('[[rule]]\ngroup = "RX"\nexact = ["__do_softirq", "net_rx_action"]\n\n[[rule]]\ngroup = "free"\nexact = ["kmem_cache_free"]\n')
    rules = cal.Rules.load(old)
    assert rules.attribute(("run_ksoftirqd", "__do_softirq", "rcu_core", "rcu_do_batch")) == ("RX", "rcu_do_batch")
    assert rules.attribute(("__do_softirq", "rcu_core", "kmem_cache_free")) == ("free", "kmem_cache_free")


def test_user_rules_can_declare_entry_points_and_helpers(tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text(
        '[[rule]]\nrole = "entry"\nexact = ["my_loop"]\n\n'
        '[[rule]]\ngroup = "RX"\nexact = ["my_poll"]\n\n'
        '[[rule]]\ngroup = "alloc"\nrole = "helper"\nprefix = ["my_alloc"]\n'
    )
    rules = cal.Rules.load(mine)
    assert rules.classify(("my_loop", "my_poll", "x")) == ("RX", "rule", "x")
    assert rules.classify(("my_loop", "my_poll", "my_alloc_page")) == ("alloc", "rule", "my_alloc_page")
    assert rules.classify(("my_loop", "gc", "my_alloc_page")) == ("other", "entry", "gc")
    assert rules.classify(("my_poll", "my_loop", "my_alloc_page")) == ("other", "entry", "my_alloc_page")
    assert rules.classify(("my_alloc_page",)) == ("alloc", "rule", "my_alloc_page")  # no call stack: nothing to judge by
    assert rules.classify(("gc", "my_alloc_page")) == (None, "unmatched", "my_alloc_page")


def test_flat_perf_report_counts_allocator_helpers_for_their_group():
    # perf report has no call stacks: kmem_cache_free (a helper) still counts as C_free.
    c = cal.calibrate(cal.read_profile(DATA / "perf-report.txt"), cal.Rules.load(), 1.67e6, 3.3e9, cpu_load=1.0)
    assert c.samples_by_group["free"] == pytest.approx(6.92 + 6.60)
    assert c.samples_by_group["alloc"] == pytest.approx(7.28)


def test_calibrate_cli_lists_work_outside_the_packet_path(tmp_path):
    folded = tmp_path / "known.folded"
    folded.write_text("".join(f"{';'.join(s)} {n}\n" for s, n, _, _ in KNOWN_SPLIT))
    out = run_cli("calibrate", folded, "--rate", "1Mpps", "--cpu-load", "100%", "--freq", "3GHz").stdout
    assert "outside the packet path: 12.1% of active samples (in C_other)" in out
    assert "5.2%  rcu_core" in out
    res = json.loads(run_cli("calibrate", folded, "--rate", "1Mpps", "--cpu-load", "100%", "--freq", "3GHz", "--json").stdout)
    assert res["outside_packet_path_share"] == pytest.approx(247 / 2047)
    assert res["outside_packet_path_top"][0] == ["rcu_core", pytest.approx(107 / 2047)]


# ------------------------------------------------------------------ real sample counts


def test_sample_counts_are_real_and_too_few_are_flagged():
    res = json.loads(run_cli("calibrate", DATA / "perf-script.txt", "--rate", "1Mpps", "--cpu-load", "100%", "--freq", "3GHz", "--json").stdout)
    assert res["samples"] == 5 and res["sample_weight"] == 5 * 250000
    assert res["samples_by_group"]["routing"] == 1 and res["samples_by_group"]["idle"] == 1
    assert len(res["warnings"]) == 1 and "only 5 samples" in res["warnings"][0] and "routing 1" in res["warnings"][0]
    text = run_cli("calibrate", DATA / "perf-script.txt", "--rate", "1Mpps", "--cpu-load", "100%", "--freq", "3GHz").stdout
    assert "5 samples, weighted by their period: 1.25e+06 in all" in text and "1.25e+06 samples" not in text
    assert "warning: only 5 samples" in text
    # folded.txt: 1,978 samples, every reported group above 100: no warning.
    res = json.loads(run_cli("calibrate", DATA / "folded.txt", "--rate", "1Mpps", "--cpu-load", "100%", "--freq", "3GHz", "--json").stdout)
    assert res["samples"] == 1978 and res["warnings"] == []
    # perf report: the count in its header ("120K"), spread by share.
    c = cal.calibrate(cal.read_profile(DATA / "perf-report.txt"), cal.Rules.load(), 1e6, 3e9, cpu_load=1.0)
    assert c.n_samples == 120_000 and c.warnings() == []
    assert c.counts_by_group["routing"] == pytest.approx(120_000 * 10.11 / 100)


# ------------------------------------------------------------------ bad input: exit 2 naming the key


def _bad_rules(tmp_path, text: bytes | str):
    p = tmp_path / "rules.toml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--freq", "0GHz"], ["--freq", "'0GHz'", "above 0 Hz"]),
        (["--active-cycles", "nan"], ["--active-cycles", "'nan'", "finite number above 0", "per second"]),
        (["--active-cycles", "inf"], ["--active-cycles", "'inf'", "finite number above 0"]),
        (["--active-cycles=-5e9"], ["--active-cycles", "'-5e9'", "above 0"]),
        (["--active-cycles", "0"], ["--active-cycles", "'0'", "above 0"]),
        (["--routes", "-5"], ["--routes -5", "routes in the FIB", "from 1"]),
        (["--routes", "0"], ["--routes 0", "from 1"]),
        (["--flows", str(2**63)], ["--flows", "flows", "2^63-1"]),
    ],
)
def test_bad_calibrate_options_exit_2_naming_option_value_and_expectation(tmp_path, args, needles):
    base = ["--rate", "1Mpps", "--freq", "3GHz"] + ([] if any(a.startswith("--active") for a in args) else ["--cpu-load", "100%"])
    base = [x for i, x in enumerate(base) if not (x == "--freq" and "--freq" in args) and not (i > 0 and base[i - 1] == "--freq" and "--freq" in args)]
    out = tmp_path / "cost.toml"
    proc = run_cli("calibrate", DATA / "folded.txt", *base, *args, "-o", out, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert not out.exists()  # nothing written


@pytest.mark.parametrize(
    "text, needles",
    [
        ('[[rule]]\ngroup = "RX"\nexact = 5\n', ["rule[0].exact = 5", "an array of function-name strings"]),
        ('[[rule]]\ngroup = "RX"\nprefix = "ip_"\n', ['rule[0].prefix = "ip_"', 'prefix = ["ip_"]']),
        ('[[rule]]\ngroup = "RX"\nglob = ["ixgbe_*", 3]\n', ["rule[0].glob[1] = 3", "non-empty string"]),
        ('[[rule]]\ngroup = "RX"\nregex = ["("]\n', ['rule[0].regex[0] = "("', "regular expression"]),
        ('[[rule]]\ngroup = 5\nexact = ["x"]\n', ["rule[0].group = 5", "one of RX"]),
        ('[[rule]]\nexact = ["x"]\n', ["rule[0].group", "one of RX"]),
        ('[[rule]]\ngroup = "RX"\nrole = "gateway"\nexact = ["x"]\n', ['rule[0].role = "gateway"', "packet, entry, helper"]),
        ('[[rule]]\ngroup = "RX"\nrole = "entry"\nexact = ["x"]\n', ['rule[0].group = "RX"', 'role = "entry"']),
        ("rule = 5\n", ["rule = 5", "[[rule]]"]),
        ("rule = [1]\n", ["rule[0] = 1", "a table"]),
    ],
)
def test_wrong_types_in_a_rules_file_exit_2_naming_the_key(tmp_path, text, needles):
    rules = _bad_rules(tmp_path, text)
    proc = run_cli("calibrate", DATA / "folded.txt", "--rate", "1Mpps", "--cpu-load", "100%", "--freq", "3GHz", "--rules", rules, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert str(rules) in lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_a_prefix_string_no_longer_matches_letter_by_letter(tmp_path):
    with pytest.raises(cal.ProfileError) as e:
        cal.Rules.load(_bad_rules(tmp_path, '[[rule]]\ngroup = "RX"\nprefix = "ip_"\n'))
    assert e.value.path == "rule[0].prefix" and e.value.value == '"ip_"'


@pytest.mark.parametrize("which", ["profile", "rules"])
def test_non_utf8_files_exit_2_naming_the_file_and_byte_offset(tmp_path, which):
    profile = tmp_path / "p.folded"
    rules = tmp_path / "r.toml"
    profile.write_bytes(b"a;ip_rcv 5\n" + (b"b;\xff\xfe 3\n" if which == "profile" else b"b;c 3\n"))
    rules.write_bytes(b'[[rule]]\ngroup = "RX"\nexact = ["ip_rcv"]\n' + (b"# caf\xe9\n" if which == "rules" else b""))
    proc = run_cli("calibrate", profile, "--rate", "1Mpps", "--cpu-load", "100%", "--freq", "3GHz", "--rules", rules, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1
    if which == "profile":
        assert f"{profile}:2:" in line and "byte offset 13 (0xff)" in line and "UTF-8" in line
    else:
        assert f"{rules}:4:" in line and "byte offset 46 (0xe9)" in line and "UTF-8" in line


def test_all_zero_counts_are_a_clear_error(tmp_path):
    p = tmp_path / "zero.folded"
    p.write_text("a;b 0\n")
    with pytest.raises(cal.ProfileError, match="every count is 0"):
        cal.read_profile(p)


@pytest.mark.parametrize(
    "option, make, needle",
    [
        ("-o", lambda d: d, "it is a directory"),
        ("--flamegraph", lambda d: d, "it is a directory"),
        ("--bars", lambda d: d / "bars.bmp", ".png, .svg or .pdf"),
    ],
)
def test_bad_output_paths_exit_2_naming_the_option(tmp_path, option, make, needle):
    target = make(tmp_path)
    proc = run_cli("calibrate", DATA / "folded.txt", "--rate", "1Mpps", "--cpu-load", "100%", "--freq", "3GHz", option, target, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith(f"pktsim: error: {option} ") and str(target) in line and needle in line


def test_more_active_cycles_than_one_core_has_is_flagged():
    c = cal.calibrate(cal.read_profile(DATA / "folded.txt"), cal.Rules.load(), 1e6, 3e9, active_cycles_per_s=5e9)
    assert c.warnings() == [
        "5e+09 active cycles per second is 167% of 3 GHz, more than one core has: the cycles per packet assume one core forwarding the whole rate"
    ]
    assert cal.calibrate(cal.read_profile(DATA / "folded.txt"), cal.Rules.load(), 1e6, 3e9, active_cycles_per_s=3e9).warnings() == []


def test_the_shipped_forwarding_capture_adds_up_to_the_cpu_the_testbed_measured():
    """examples/forwarding-veth.perf.gz: `pktsim testbed run --rate 40kpps --perf-record`
    on a 2-CPU VM (the dut CPU's cpu-clock samples over the run, 400 nftables rules in the
    forward hook). With --frames the CPU time is the profile's own: its groups add up to
    the dut CPU per frame the testbed measured (the NAPI thread's runtime) within 10%."""
    tb = json.loads((ROOT / "examples" / "forwarding-veth.json").read_text())
    pr = tb["perf_record"]
    proc = run_cli(
        "calibrate",
        ROOT / "examples" / "forwarding-veth.perf.gz",
        "--rate",
        f"{tb['rate_pps']:.0f}pps",
        "--frames",
        pr["forwarded"],
        "--freq",
        f"{pr['cpu_hz']:.0f}Hz",
        "--json",
    )
    j = json.loads(proc.stdout)
    ns = j["c_total_cycles"] / pr["cpu_hz"] * 1e9
    assert ns == pytest.approx(tb["dut_ns_per_packet"], rel=0.10)
    g = j["cycles_by_group"]
    # The forward hook's rules (postrouting) and the receive path take most of it; the work
    # no packet frame is under (the testbed's own processes) stays small.
    assert g["postrouting"] > g["RX"] > g["prerouting"] > 0 and g["other"] < 0.12 * j["c_total_cycles"]
    assert j["samples"] == pr["samples"] and j["idle_share"] == 0


def test_frames_takes_the_cpu_time_from_the_profile_and_needs_time_samples(tmp_path):
    p = cal.read_profile(ROOT / "examples" / "forwarding-veth.perf.gz")
    c = cal.calibrate(p, cal.Rules.load(), 40e3, 2e9, frames=120_000)
    # Busy ns per frame x cycles per ns: the rate only scales both sides.
    assert c.c_total_cycles == pytest.approx(p.total / 120_000 * 2.0, rel=1e-9)
    assert cal.calibrate(p, cal.Rules.load(), 80e3, 2e9, frames=120_000).c_total_cycles == pytest.approx(c.c_total_cycles, rel=1e-9)
    folded = cal.read_profile(DATA / "folded.txt")
    with pytest.raises(ValueError, match="weigh samples, not CPU time"):
        cal.calibrate(folded, cal.Rules.load(), 40e3, 2e9, frames=1000)
    bad = run_cli("calibrate", DATA / "folded.txt", "--rate", "40kpps", "--freq", "2GHz", "--frames", "0", check=False)
    assert bad.returncode == 2 and "--frames 0" in bad.stderr
    both = run_cli("calibrate", DATA / "perf-script.txt", "--rate", "40kpps", "--freq", "2GHz", "--frames", "10", "--cpu-load", "50%", check=False)
    assert both.returncode == 2 and "one of them" in both.stderr


def test_a_frame_in_a_deleted_file_and_a_gzip_profile_are_read(tmp_path):
    """A JIT's memfd shows up as '(/memfd:x (deleted))' in perf script: it stopped the
    reader at the first real capture."""
    import gzip

    text = (
        "python3 123 [001] 10.000001:     500000 cpu-clock:pppH: \n"
        "\t    1ff68 [unknown] (/memfd:sealed-91173221a7ea (deleted))\n"
        "\tffffffff81000000 ip_forward+0x10 ([kernel.kallsyms])\n\n"
    )
    f = tmp_path / "p.perf.gz"
    f.write_bytes(gzip.compress(text.encode()))
    p = cal.read_profile(f)
    assert p.total == 500000 and p.weight_unit() == "ns of cpu-clock"
    (tmp_path / "bad.gz").write_bytes(gzip.compress(text.encode())[:20])
    proc = run_cli("calibrate", tmp_path / "bad.gz", "--rate", "1Mpps", "--cpu-load", "50%", "--freq", "2GHz", check=False)
    assert proc.returncode == 2 and "gzip" in proc.stderr and "Traceback" not in proc.stderr
