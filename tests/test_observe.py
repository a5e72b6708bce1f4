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
    assert op["drops"] == {"rx_ring_full": 5000, "rx_dropped": 0, "backlog": 20}
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
def test_observe_reads_the_rate_the_testbed_forwards():
    """observe inside the dut's namespace while the testbed forwards 30 kpps through it:
    the received rate is the offered one within 3%, and nothing of observe's is left."""
    from pktsim.testbed.topology import DUT, DUT_IN

    tb = subprocess.Popen(
        [sys.executable, "-m", "pktsim", "testbed", "run", "--rate", "30kpps", "--duration", "6s", "--repetitions", "1", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            if DUT in ns and subprocess.run(["ip", "netns", "exec", DUT, "ip", "link", "show", DUT_IN], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        time.sleep(2.0)  # the sink, then the generator, start
        p = subprocess.run(
            [
                *("ip", "netns", "exec", DUT, sys.executable, "-m", "pktsim", "observe", "--iface", DUT_IN, "--duration", "3s", "--json"),
                *("--model", ROOT / "examples" / "veth-threaded-napi.toml"),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
    finally:
        out, err = tb.communicate(timeout=60)
    assert tb.returncode == 0, err
    assert p.returncode == 0, p.stderr
    op = json.loads(p.stdout)
    assert op["received_pps"] == pytest.approx(30e3, rel=0.03)
    assert op["overhead"]["share_of_one_cpu"] < 0.05
    # Frames per poll (perf, the dut's device alone, the middle 3 s) near the testbed's (its
    # dut CPU, the whole run): 1.29 against 1.54 on a machine busy with a build.
    tb_ppp = json.loads(out)["packets_per_poll"]
    assert 1.0 <= op["packets_per_poll"]["mean"] <= 64 and op["packets_per_poll"]["mean"] == pytest.approx(tb_ppp, rel=0.35)
    # The path's model at the observed rate: every row predicted, the rate within 3%.
    rows = {r["quantity"]: r for r in op["model"]["rows"]}
    assert all(r["kind"] == "predicted" for r in rows.values())
    assert rows["frames received"]["predicted"] == pytest.approx(op["received_pps"], rel=0.03)


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
    rows = __import__("pktsim.observe", fromlist=["compare"]).compare(json.loads(files[1].read_text()), pktsim.Scenario.load(router, base))
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
    obs.write_text(json.dumps({"offered_pps": 250_000, "received_pps": 250_000, "loss_ratio": 0.0, "interfaces": {"eth1": {"mean_frame_bytes": 60}}}))
    t = json.loads(
        run_cli(
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
        ).stdout
    )
    assert t["load_pps"] == pytest.approx(250_000) and "traffic.size=64B" in t["sets"]
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
