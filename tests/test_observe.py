"""``pktsim observe``: each source parsed from saved outputs (and refused, naming the file and
line, when garbled), the operating point computed by hand from two snapshots, the command
on this machine, and, as root, against the testbed's own counters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import ROOT, run_cli

from pktsim.observe import ObserveError, point
from pktsim.observe import sources as src

DATA = ROOT / "tests" / "data" / "observe"


def test_interrupts_of_each_driver_are_read_per_cpu():
    cpus, irqs = src.interrupts((DATA / "interrupts-ixgbe.txt").read_text())
    assert cpus == 4
    assert irqs["24"] == ("IR-PCI-MSI 1048576-edge eth1-TxRx-0", [1200034, 0, 0, 0])
    assert "ERR" not in irqs and irqs["NMI"][1] == [0, 0, 0, 0]
    cpus, irqs = src.interrupts((DATA / "interrupts-mlx5.txt").read_text())
    assert cpus == 2 and irqs["41"][1] == [0, 800002] and "mlx5_comp1@pci:0000:03:00.0" in irqs["41"][0]


def test_udp_counters_are_read_and_a_garbled_line_named():
    udp = src.snmp_udp((DATA / "snmp.txt").read_text())
    assert {"InDatagrams", "RcvbufErrors", "InErrors"} <= set(udp) and all(isinstance(v, int) for v in udp.values())
    with pytest.raises(ObserveError, match=r"^saved:2: "):
        src.snmp_udp("Udp: InDatagrams RcvbufErrors\nUdp: 12 x\n", "saved")
    with pytest.raises(ObserveError, match=r"^saved: expected two Udp: lines"):
        src.snmp_udp("Ip: 1 2\nIp: 3 4\n", "saved")


def test_softnet_softirqs_and_stat_are_read():
    s = src.softnet_stat((DATA / "softnet_stat.txt").read_text())
    assert s[0] == {"processed": 0x0199B13D, "dropped": 0, "time_squeeze": 0x10} and s[1]["dropped"] == 0x001A42CC
    q = src.softirqs((DATA / "softirqs.txt").read_text())
    assert q["NET_RX"] == [8404444, 2783916] and q["NET_TX"] == [985, 1000]
    st = src.proc_stat((DATA / "stat.txt").read_text())
    assert len(st) == 2 and st[1]["softirq"] == 14542 and st[0]["idle"] == 1404851


@pytest.mark.parametrize(
    "parser, text, line",
    [
        (src.interrupts, "CPU0 CPU1\n 24: 1 2 eth0\n garbage without colon\n", 3),
        (src.interrupts, "not a header\n", 1),
        (src.softnet_stat, "0199b13d 00000000 00000010\nzz 00 00\n", 2),
        (src.softnet_stat, "0199b13d\n", 1),
        (src.softirqs, "  CPU0\nNET_RX: 1 x\n", 2),
        (src.proc_stat, "cpu0 1 2 3\n", 1),
    ],
)
def test_a_garbled_source_names_its_file_and_line(parser, text, line):
    with pytest.raises(ObserveError, match=rf"^saved:{line}: "):
        parser(text, "saved")


def _snap(t_s, rx, tx, missed, vec, net_rx, softnet, ticks):
    s = src.Snapshot(int(t_s * 1e9))
    s.netdev["eth1"] = {"rx_packets": rx, "tx_packets": tx, "rx_bytes": 64 * rx, "rx_missed_errors": missed, "rx_dropped": 0}
    s.vectors["eth1"] = {"eth1-TxRx-0": [vec, 0]}
    s.softirqs = {"NET_RX": [net_rx, 0]}
    s.softnet = [{"processed": softnet[0], "dropped": softnet[1], "time_squeeze": softnet[2]}, {"processed": 0, "dropped": 0, "time_squeeze": 0}]
    s.stat = [dict(zip(src.STAT_FIELDS, ticks)), dict(zip(src.STAT_FIELDS, (0, 0, 0, 200, 0, 0, 0, 0)))]
    s.udp = {"InDatagrams": softnet[0] // 2, "RcvbufErrors": softnet[1] * 3}
    return s


def test_the_operating_point_of_two_snapshots_by_hand():
    # 2 s: 600k frames received, 10k the ring had no room for, 200k interrupts, 300k NET_RX,
    # 50 ticks (0.5 s) of softirq and 10 of hard IRQ on CPU0 out of its 200.
    a = _snap(10.0, 1_000_000, 990_000, 0, 5000, 100, (0, 0, 0), (0, 0, 0, 0, 0, 0, 0, 0))
    b = _snap(12.0, 1_600_000, 1_590_000, 10_000, 205_000, 300_100, (600_000, 40, 7), (10, 0, 20, 110, 0, 10, 50, 0))
    op = point(a, b, ["eth1"], clk_tck=100)
    assert op["window_s"] == 2.0
    assert op["received_pps"] == 300_000 and op["transmitted_pps"] == 300_000 and op["offered_pps"] == 305_000
    assert op["interfaces"]["eth1"]["mean_frame_bytes"] == 64
    assert op["irq_per_s"] == 100_000 and op["irqs_per_packet"] == pytest.approx(1 / 3)
    assert op["softirqs_per_s"] == 150_000 and op["softirqs_per_packet"] == 0.5
    assert op["drops"] == {"rx_ring_full": 5000, "rx_dropped": 0, "backlog": 20, "rcvbuf_errors": 60}
    assert op["udp_datagrams_per_s"] == 150_000
    assert op["loss_ratio"] == pytest.approx(5020 / 305_000)
    assert op["time_squeeze"] == 7
    # (10 + 50) ticks of 10 ms over 600,000 frames: 1 us a frame.
    assert op["softirq_ns_per_packet"] == pytest.approx(1000.0)
    assert op["cpu_per_core"] == [pytest.approx(90 / 200), 0.0]
    assert set(op["sources"]) >= {"received_pps", "irq_per_s", "softirq_ns_per_packet", "drops.backlog"}


def test_observe_on_this_machine_is_cheap_and_says_what_it_read(tmp_path):
    out = tmp_path / "obs.json"
    op = json.loads(run_cli("observe", "--iface", "lo", "--duration", "300ms", "--interval", "100ms", "--json", "-o", out).stdout)
    assert json.loads(out.read_text()) == op
    assert op["window_s"] == pytest.approx(0.3, abs=0.05) and len(op["series"]) == 3
    assert {"received_pps", "offered_pps", "cpu_per_core", "softirqs_per_s", "overhead", "sysctls", "sources"} <= set(op)
    # A fixed cost (perf's start, when it counts polls) over a short window.
    assert op["overhead"]["cpu_s"] < 0.3
    for args, msg in (
        (["--iface", "nope0"], "--iface nope0: no such interface"),
        (["--iface", "lo", "--duration", "7200s"], "--duration 7200s: expected"),
        (["--iface", "lo", "--duration", "1s", "--interval", "5s"], "--interval 5s: expected"),
        (["--iface", "lo", "--duration", "fast"], "--duration"),
    ):
        p = run_cli("observe", *args, check=False)
        assert p.returncode == 2 and msg in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)


def test_ctrl_c_stops_observe_at_once_and_writes_nothing(tmp_path):
    out = tmp_path / "obs.json"
    proc = subprocess.Popen([sys.executable, "-m", "pktsim", "observe", "--iface", "lo", "--duration", "60s", "-o", out], stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    t = time.monotonic()
    proc.send_signal(2)
    proc.wait(timeout=5)
    assert time.monotonic() - t < 0.5 and proc.returncode == 130 and not out.exists()


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the testbed needs root")


@root_only
@pytest.mark.serial
def test_observe_inside_the_dut_reads_what_the_testbed_counts():
    """``testbed validate --path observe --quick``: observe inside the dut's namespace
    (``--iface tb-dut0`` and nothing else) over a window around a testbed run of 40 kpps,
    for the stack, with deferral and with XDP: the frames, the NAPI thread's wake-ups and
    polls per frame and its CPU per frame are the testbed's own counts within the path's
    tolerances; observe costs little and leaves no perf behind; the veth path's model, run
    at the observed rate with the observed knobs, receives it within 3%."""
    from pktsim.observe import compare
    from pktsim.scenario import Scenario

    res = json.loads(run_cli("testbed", "validate", "--path", "observe", "--quick", "--json").stdout)
    assert {p["variant"] for p in res["measurements"]["points"]} == {"stack", "defer", "xdp"}
    assert len(res["rows"]) == 12 and all(r["kind"] == "relation" and r["holds"] for r in res["rows"]), res["rows"]
    ops = [p["observe"] for p in res["measurements"]["points"]]
    assert [op["knobs"]["tb-dut0"]["nic.napi.defer_hard_irqs"]["value"] for op in ops] == ["0", "2", "0"]
    assert all(op["overhead"]["watching_share_of_one_cpu"] < 0.03 for op in ops)
    assert "perf" not in subprocess.run(["ps", "-eo", "comm"], capture_output=True, text=True).stdout.split()
    m = compare(ops[0], Scenario.load(ROOT / "examples" / "veth-threaded-napi.toml"))
    rows = {r["quantity"]: r for r in m["rows"]}
    # (veth has no ring or coalescing settings for ethtool: its NAPI files are its knobs.)
    assert all(r["kind"] == "predicted" for r in rows.values()) and "nic.napi.defer_hard_irqs=0" in m["knobs"], m
    assert rows["frames received"]["predicted"] == pytest.approx(ops[0]["received_pps"], rel=0.03)


def test_an_observation_is_a_row_pktsim_fit_takes(tmp_path):
    """Observations made by pktsim itself (a router with a 600 ns interrupt): fit on them
    (pktsim fit --observed) gives back the interrupt's cost, and observe --model sets the
    model beside an observation."""
    import pktsim
    from pktsim.fitting.data import cpu_per_frame_ns

    router = ROOT / "examples" / "linux-router-64B.toml"
    base = {"nic.itr.mode": "static", "nic.itr.interval": "20us", "measure.duration": "20ms"}
    files = []
    for rate in (20e3, 100e3, 400e3, 800e3):
        r = pktsim.run(router, {**base, "traffic.rate": f"{rate:.0f}pps", "host.t_irq": "600ns"})
        op = {
            "offered_pps": rate,
            "received_pps": rate,
            "loss_ratio": 0.0,
            "interfaces": {"eth1": {"mean_frame_bytes": 60}},
            "softirq_ns_per_packet": cpu_per_frame_ns(r),
        }
        files.append(tmp_path / f"obs{len(files)}.json")
        files[-1].write_text(json.dumps(op))
    sets = [a for k, v in base.items() for a in ("--set", f"{k}={v}")]
    f = json.loads(run_cli("fit", router, *sets, "--free", "host.t_irq", "--y", "cpu_per_frame", "--observed", *files, "--jobs", "1", "--json").stdout)
    assert float(f["values"]["host.t_irq"].rstrip("ns")) == pytest.approx(600, rel=0.02)
    rows = __import__("pktsim.observe", fromlist=["compare"]).compare(json.loads(files[1].read_text()), pktsim.Scenario.load(router, base))["rows"]
    assert {r["quantity"] for r in rows} >= {"frames received", "CPU per frame (hard IRQ + softirq)"}
    assert all(r["kind"] == "predicted" for r in rows)
    bad = run_cli("fit", router, "--free", "host.t_irq", "--observed", ROOT / "README.md", check=False)
    assert bad.returncode == 2 and "--observed" in bad.stderr and "Traceback" not in bad.stderr


def test_the_interfaces_vectors_are_found_by_its_name_or_its_pci_device(tmp_path):
    """ixgbe names its vectors after the interface (eth1-TxRx-0), mlx5 after the PCI device
    (mlx5_comp0@pci:0000:03:00.0): a saved tree of each, read as a live one."""
    import shutil

    def tree(name, interrupts, iface, pci=None):
        root = tmp_path / name
        stats = root / "sys/class/net" / iface / "statistics"
        stats.mkdir(parents=True)
        for k, v in {"rx_packets": 1000, "tx_packets": 900, "rx_bytes": 64000}.items():
            (stats / k).write_text(f"{v}\n")
        if pci:
            dev = root / "sys/devices/pci0000:00" / pci
            dev.mkdir(parents=True)
            (root / "sys/class/net" / iface / "device").symlink_to(dev)
        (root / "proc/net").mkdir(parents=True)
        shutil.copy(DATA / interrupts, root / "proc/interrupts")
        shutil.copy(DATA / "softnet_stat.txt", root / "proc/net/softnet_stat")
        shutil.copy(DATA / "softirqs.txt", root / "proc/softirqs")
        shutil.copy(DATA / "stat.txt", root / "proc/stat")
        shutil.copy(DATA / "snmp.txt", root / "proc/net/snmp")
        return root

    s = src.take(["eth1"], tree("ixgbe", "interrupts-ixgbe.txt", "eth1"))
    assert sorted(s.vectors["eth1"]) == ["IR-PCI-MSI 1048576-edge eth1-TxRx-0", "IR-PCI-MSI 1048577-edge eth1-TxRx-1", "IR-PCI-MSI 1048578-edge eth1"]
    s = src.take(["enp3s0"], tree("mlx5", "interrupts-mlx5.txt", "enp3s0", "0000:03:00.0"))
    assert len(s.vectors["enp3s0"]) == 3 and s.netdev["enp3s0"]["tx_packets"] == 900 and not s.missing
    # A file that is missing is named, and the rest is read.
    root = tree("bare", "interrupts-ixgbe.txt", "eth1")
    (root / "proc/softirqs").unlink()
    s = src.take(["eth1"], root)
    assert any("proc/softirqs" in m for m in s.missing) and s.softnet


def test_tune_starts_from_an_observation(tmp_path):
    obs = tmp_path / "obs.json"
    knobs = {"eth1": {"nic.rx_ring": {"value": "1024", "source": "ethtool -g"}, "nic.napi.defer_hard_irqs": {"value": "1", "source": "sysfs"}}}
    obs.write_text(
        json.dumps({"offered_pps": 250_000, "received_pps": 250_000, "loss_ratio": 0.0, "interfaces": {"eth1": {"mean_frame_bytes": 60}}, "knobs": knobs})
    )
    p = run_cli(
        "tune",
        ROOT / "examples" / "napi-deferral.toml",
        "--from-observed",
        obs,
        "--minimize",
        "cpu",
        "--budget",
        "8",
        "--replications",
        "1",
        "--jobs",
        "1",
        "--json",
    )
    t = json.loads(p.stdout)
    # The observed configuration is where the tune starts: its knobs, its frame size.
    assert t["load_pps"] == pytest.approx(250_000) and {"traffic.size=64B", "nic.rx_ring=1024", "nic.napi.defer_hard_irqs=1"} <= set(t["sets"])
    assert "starting from the observed knobs: nic.rx_ring=1024, nic.napi.defer_hard_irqs=1" in p.stderr
    (tmp_path / "idle.json").write_text(json.dumps({"offered_pps": 0, "received_pps": 0, "loss_ratio": 0.0, "interfaces": {}}))
    p = run_cli("tune", ROOT / "examples" / "napi-deferral.toml", "--from-observed", tmp_path / "idle.json", "--minimize", "cpu", check=False)
    assert p.returncode == 2 and "no traffic in its window" in p.stderr


@pytest.mark.parametrize(
    "saved, iface, device, vectors",
    [
        ("interrupts-ixgbe.txt", "eth1", "0000:01:00.0", {"24", "25", "26"}),
        ("interrupts-mlx5.txt", "enp3s0", "0000:03:00.0", {"40", "41", "42"}),
        ("interrupts-virtio.txt", "eth0", "virtio2", {"24", "25", "26"}),
        ("interrupts-i40e.txt", "ens785f0", "0000:5e:00.0", {"120", "121", "122"}),
        ("interrupts-ice.txt", "ens1f0", "0000:3b:00.0", {"150", "151", "152"}),
    ],
)
def test_each_drivers_vectors_are_the_interfaces_and_only_its(saved, iface, device, vectors):
    """ixgbe, i40e and ice name their vectors after the interface (i40e-ens785f0-TxRx-0),
    mlx5 after the PCI device, virtio after the virtio device; a neighbour (eth10,
    ens785f1, virtio3) is not taken."""
    _, irqs = src.interrupts((DATA / saved).read_text())
    assert {irq for irq, (name, _) in irqs.items() if src.names_vector(name, iface, device)} == vectors


@pytest.mark.parametrize(
    "driver, counters, some, lost, not_lost",
    [
        (
            "ixgbe",
            113,
            {"rx_no_buffer_count": 4512, "rx_queue_3_packets": 203086422},
            {"rx_no_buffer_count", "rx_missed_errors", "rx_no_dma_resources"},
            {"fdir_miss", "tx_restart_queue"},
        ),
        ("i40e", 51, {"tx-1.packets": 199999500, "port.rx_dropped": 0}, {"rx_dropped", "port.rx_dropped", "rx_alloc_fail", "rx_pg_alloc_fail"}, {"tx_busy"}),
        ("ice", 48, {"rx_dropped.nic": 7000, "rx_queue_1_bytes": 28800000000}, {"rx_dropped.nic", "tx_errors.nic", "rx_alloc_fail"}, {"rx_size_64.nic"}),
        (
            "mlx5_core",
            76,
            {"ch1_poll": 1550001, "rx_out_of_buffer": 5000},
            {"rx_out_of_buffer", "rx_wqe_err", "rx_xdp_tx_full", "rx_crc_errors_phy"},
            {"rx_cache_full", "ch0_poll"},
        ),
        (
            "veth",
            10,
            {"peer_ifindex": 2, "rx_queue_0_drops": 0},
            {"rx_queue_0_drops", "rx_queue_0_xdp_drops", "tx_queue_0_xdp_xmit_errors"},
            {"rx_queue_0_xdp_tx"},
        ),
        ("virtio_net", 20, {"rx_kicks": 25687, "tx0_kicks": 61719}, {"rx_drops", "rx0_xdp_drops", "tx_xdp_tx_drops"}, {"rx_kicks"}),
    ],
)
def test_ethtool_stats_of_each_driver_are_read_and_its_lost_frames_named(driver, counters, some, lost, not_lost):
    stats = src.ethtool_stats((DATA / f"ethtool-S-{driver}.txt").read_text())
    assert len(stats) == counters and some.items() <= stats.items()
    named = {k for k in stats if src.DROP_COUNTER.search(k)}
    assert lost <= named and not (not_lost & named), named


@pytest.mark.parametrize(
    "text, line",
    [
        ("Features for eth0:\n", 1),
        ("", 1),
        ("NIC statistics:\n     rx_packets: 12\n     rx_bytes 768\n", 3),
        ("NIC statistics:\n     rx_packets: 12\n     rx_bytes: -3\n", 3),
        ("NIC statistics:\n     rx_packets: twelve\n", 2),
    ],
)
def test_garbled_ethtool_stats_name_the_line(text, line):
    with pytest.raises(ObserveError, match=rf"^ethtool -S eth0:{line}: "):
        src.ethtool_stats(text, "ethtool -S eth0")


def test_driver_counters_and_napi_threads_by_hand():
    """Two snapshots 2 s apart: mlx5's per-channel polls give frames per poll where perf
    does not; its lost-frame counters per second; a NAPI thread's CPU and wake-ups per frame."""
    a = _snap(10.0, 1_000_000, 990_000, 0, 5000, 100, (0, 0, 0), (0,) * 8)
    b = _snap(12.0, 1_600_000, 1_590_000, 0, 205_000, 300_100, (600_000, 0, 0), (0, 0, 0, 200, 0, 0, 0, 0))
    a.ethtool["eth1"] = {"ch0_poll": 100, "ch1_poll": 50, "rx_out_of_buffer": 10, "rx_cache_full": 3, "rx_packets": 1}
    b.ethtool["eth1"] = {"ch0_poll": 100 + 60_000, "ch1_poll": 50 + 40_000, "rx_out_of_buffer": 410, "rx_cache_full": 9, "rx_packets": 1}
    a.threads["eth1"] = {77: (5_000_000_000, 1000, 1), 78: (1, 1, 1)}
    b.threads["eth1"] = {77: (5_000_000_000 + 1_200_000_000, 1000 + 150_000, 1)}  # (78 is gone)
    op = point(a, b, ["eth1"], clk_tck=100)
    e = op["interfaces"]["eth1"]
    assert e["ethtool_per_s"] == {"ch0_poll": 30_000, "ch1_poll": 20_000, "rx_out_of_buffer": 200, "rx_cache_full": 3}
    assert e["lost_per_s"] == {"rx_out_of_buffer": 200}
    # 100,000 polls for 600,000 frames.
    assert op["polls_per_s"] == 50_000 and op["packets_per_poll"]["mean"] == 6 and op["polls_per_packet"] == pytest.approx(1 / 6)
    assert op["sources"]["polls_per_s"].startswith("ethtool -S")
    # 1.2 s of the thread's CPU over 600,000 frames: 2 us each; 150,000 wake-ups.
    assert op["napi_thread_ns_per_packet"] == pytest.approx(2000) and op["napi_thread_cpu"] == pytest.approx(0.6)
    assert op["wakeups_per_packet"] == pytest.approx(0.25) and e["napi_threads"]["threads"] == 1
    # With the hard IRQ and softirq time of the CPUs that handle eth1: CPU0 (its vector) and
    # CPU1 (its thread), none here: the thread's time alone.
    assert op["handling_cpus"] == [0, 1] and op["cpu_ns_per_packet"] == pytest.approx(2000)


def test_napi_threads_are_found_by_the_name_the_kernel_gives_them(tmp_path):
    """napi/IFACE-ID, cut to 15 characters as a task's comm is."""
    for pid, comm in ((10, "napi/eth1-8193"), (11, "napi/eth10-8194"), (12, "napi/enp59s0f0n"), (13, "kworker/0:1"), (14, "napi/eth1-8195")):
        (tmp_path / "proc" / str(pid)).mkdir(parents=True)
        (tmp_path / "proc" / str(pid) / "comm").write_text(comm + "\n")
        (tmp_path / "proc" / str(pid) / "schedstat").write_text(f"{pid * 1000} 5 7\n")
        (tmp_path / "proc" / str(pid) / "status").write_text("Name:\tx\nvoluntary_ctxt_switches:\t42\nnonvoluntary_ctxt_switches:\t3\n")
        fields = ["S"] + ["0"] * 35 + ["3"] + ["0"] * 15  # (processor: 3)
        (tmp_path / "proc" / str(pid) / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")
    found = src.napi_threads(["eth1", "enp59s0f0np0"], tmp_path)
    assert sorted(found["eth1"]) == [10, 14] and found["enp59s0f0np0"] == [12]
    assert src.thread_counters(10, tmp_path) == (10_000, 42, 3) and src.thread_counters(99, tmp_path) is None


def test_observe_model_runs_with_the_observed_knobs_its_mode_reads():
    """observe --model sets the knobs seen on the interface (coalescing, deferral, rings)
    before it runs the scenario; one the scenario's I/O mode refuses is named, not applied."""
    import pktsim
    from pktsim.observe import compare

    op = {
        "offered_pps": 200e3,
        "received_pps": 200e3,
        "loss_ratio": 0.0,
        "irqs_per_packet": 0.1,
        "interfaces": {"eth1": {"mean_frame_bytes": 60}},
        "knobs": {
            "eth1": {
                "nic.rx_ring": {"value": "1024", "source": "ethtool -g"},
                "nic.itr.mode": {"value": '"static"', "source": "ethtool -c"},
                "nic.itr.interval": {"value": '"100us"', "source": "ethtool -c"},
            }
        },
    }
    router = pktsim.Scenario.load(ROOT / "examples" / "linux-router-64B.toml", {"measure.duration": "20ms"})
    m = compare(op, router)
    assert m["knobs"] == ["nic.rx_ring=1024", 'nic.itr.mode="static"', 'nic.itr.interval="100us"'] and not m["knobs_left_out"]
    irqs = {r["quantity"]: r for r in m["rows"]}["interrupts per frame"]["predicted"]
    # The run with those knobs set by hand; without them the router's ITR interrupts far more.
    at = {"traffic.rate": "200000.000pps", "traffic.size": "64B"}
    assert irqs == pktsim.run(router, {**at, "nic.rx_ring": 1024, "nic.itr.mode": "static", "nic.itr.interval": "100us"})["irqs_per_packet"]
    assert irqs < 0.5 * pktsim.run(router, at)["irqs_per_packet"]
    server = pktsim.Scenario.load(ROOT / "examples" / "meyer2014-rt.toml", {"measure.duration": "20ms"})
    op["knobs"]["eth1"]["nic.napi.defer_hard_irqs"] = {"value": "2", "source": "sysfs"}
    m = compare(op, server)
    assert any(k.startswith("nic.napi.defer_hard_irqs=2: ") for k in m["knobs_left_out"]), m


def test_import_host_reads_the_napi_sysfs_files(tmp_path):
    """napi.txt (grep . of threaded, napi_defer_hard_irqs, gro_flush_timeout) sets
    nic.napi's keys, each saying where it came from."""
    from pktsim import hostimport

    napi = "/sys/class/net/eth1/threaded:1\n/sys/class/net/eth1/napi_defer_hard_irqs:2\n/sys/class/net/eth1/gro_flush_timeout:20000\n"
    host = hostimport.from_texts({"ethtool-i.txt": "driver: ixgbe\n", "napi.txt": napi}, "eth1")
    got = {k: v.toml for k, v in host.sections["nic.napi"].items()}
    assert got == {"threaded": "true", "defer_hard_irqs": "2", "gro_flush_timeout": '"20000ns"'}
    assert "napi.txt:3" in host.sections["nic.napi"]["gro_flush_timeout"].source
    toml = hostimport.to_toml(host, "test")
    assert "[nic.napi]" in toml and pktsim_scenario(toml).data["nic"]["napi"]["gro_flush_timeout"] == "20us"
    veth = hostimport.from_texts({"ethtool-i.txt": "driver: veth\n", "napi.txt": napi.replace(":1\n", ":0\n", 1)}, "eth1")
    assert "threaded" not in veth.sections.get("nic.napi", {}) and any("threaded = 0" in n for n in veth.notes)


def pktsim_scenario(toml: str):
    import pktsim

    return pktsim.Scenario.from_toml(toml)


def test_polls_in_the_window_take_the_share_inside_of_the_intervals_it_cuts():
    """perf's intervals (each's polls, at the time it came): the window (150, 350] takes half
    of (100, 200], all of (200, 300] and half of (300, 400]; one perf did not cover is None."""
    import threading

    from pktsim.observe import polls

    class Ended:
        returncode = 0

        def poll(self):
            return 0

    c = polls.Counting.__new__(polls.Counting)
    c.n, c.ifaces, c.proc, c.tail = 1, ["eth1"], Ended(), []
    c._cond, c._reader = threading.Condition(), threading.Thread(target=lambda: None)
    c.intervals = [(0, [0]), (100, [20]), (200, [20]), (300, [30]), (400, [40])]
    assert c.polls(150, 350) == {"eth1": 10 + 30 + 20}
    assert c.polls(0, 400) is None and c.polls(-5, 100) is None


@root_only
@pytest.mark.serial
def test_a_killed_observe_leaves_no_perf_counting():
    """SIGKILL gives observe no chance to stop its perf: perf dies with it (the parent's
    death signal), and with it the tracepoint's counting."""
    import shutil

    if shutil.which("perf") is None:
        pytest.skip("perf is not installed")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pktsim", "observe", "--iface", "lo", "--duration", "60s"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )

    def perf_children() -> list[int]:
        out = subprocess.run(["ps", "-eo", "pid=,ppid=,comm="], capture_output=True, text=True).stdout.split("\n")
        return [int(f[0]) for f in (line.split() for line in out) if len(f) == 3 and f[1] == str(proc.pid) and f[2] == "perf"]

    deadline = time.monotonic() + 10
    while not (perfs := perf_children()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert perfs, "observe started no perf"
    proc.kill()
    proc.wait(timeout=5)
    deadline = time.monotonic() + 3
    while any(os.path.exists(f"/proc/{p}") for p in perfs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{p}") for p in perfs), "perf outlived a killed observe"


def test_a_users_sysctl_that_may_not_read_every_key_still_gives_the_budgets(monkeypatch):
    """As a user (not root), `sysctl net.core` exits 1 for bpf_jit_harden and the like and
    prints the rest: the budgets and the kernel's release are still read."""
    import shutil
    import types

    from pktsim import hostimport

    def run(cmd, **kw):
        if cmd[0] == "sysctl":
            out = "net.core.netdev_budget = 600\nnet.core.netdev_budget_usecs = 4000\nkernel.osrelease = 6.18.0\n"
            return types.SimpleNamespace(returncode=1, stdout=out, stderr="sysctl: permission denied on key 'net.core.bpf_jit_harden'\n")
        return types.SimpleNamespace(returncode=1, stdout="", stderr="no such device\n")

    monkeypatch.setattr(hostimport.subprocess, "run", run)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/sbin/{name}")
    host = hostimport.from_live("eth0", files=("ethtool-i.txt", "sysctl.txt"))
    assert host.get("host", "budget") == "600" and host.get("host", "budget_time") == '"4000us"' and host.get("host", "softirq") == '"inline"'


def test_a_driver_whose_counters_do_not_parse_is_named_not_fatal(monkeypatch):
    monkeypatch.setattr(src, "ethtool_text", lambda iface: ("NIC statistics:\n     rx_packets: many\n", ""))
    s = src.take(["lo"], ethtool=True)
    assert "lo" not in s.ethtool and any(m.startswith("ethtool -S lo:2: ") for m in s.missing), s.missing
