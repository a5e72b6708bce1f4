"""pktsim import-host: saved ethtool / sysctl / lscpu / /proc/interrupts output of five
drivers becomes a scenario that model and run accept as is, every value commented."""

import shutil

import pytest
from conftest import ROOT, run_cli

import pktsim

HOSTS = ROOT / "tests" / "data" / "hosts"

# driver dir -> what the scenario must say (key -> TOML value)
EXPECT = {
    "ixgbe": {
        "cores = 4": "ethtool -l",
        'frequency = "3.30GHz"': "lscpu",
        'rate = "10Gbit/s"': "ethtool: Speed",
        "rx_ring = 512": "ethtool -g",
        'mode = "dynamic"': "rx-usecs 1 is ixgbe's dynamic ITR",
        "budget = 300": "netdev_budget",
        'budget_time = "8000us"': "netdev_budget_usecs",
        'l3 = "8MiB"': "lscpu",
        'governor = "teo"': "current_governor",
        'softirq = "defer"': "kernel.osrelease = 5.15.0-91-generic: softirqs raised while ksoftirqd runs are left to it",
        'base_slice = "2100us"': "0.70 ms x (1 + log2 of min(4 CPUs, 8))",
        'states = [{ name = "POLL", latency = "0us", residency = "0us" }, { name = "C1", latency = "2us", residency = "2us" }, '
        '{ name = "C1E", latency = "10us", residency = "20us" }, { name = "C6", latency = "133us", residency = "600us", '
        "flush = true, disable = true }]": "4 states of cpu0, driver intel_idle",
    },
    "i40e": {
        "cores = 16": "ethtool -l",
        'frequency = "2.10GHz"': "lscpu",
        'mode = "static"': "rx-usecs 50",
        'interval = "50us"': "rx-usecs 50",
        "budget = 600": "netdev_budget",
        'l2 = "1MiB"': "16 instances",
        'rate = "40Gbit/s"': "guessed from the driver",
    },
    "mlx5": {
        "cores = 8": "ethtool -l",
        'l3 = "16MiB"': "8 instances",
        'rate = "100Gbit/s"': "ethtool: Speed",
        'mode = "dim"': "mlx5_core runs net_dim",
        'profile = "mlx5-cqe"': "rx_cqe_moder on",
        "rx_ring = 1024": "ethtool -g",
        'frequency = "3.6GHz"': "scaling_max_freq",
        'governor = "powersave"': "driver intel_pstate",
        'min = "1.2GHz"': "scaling_min_freq",
        'softirq = "inline"': "kernel.osrelease = 6.8.0-45-generic",
        'base_slice = "2800us"': "min(8 CPUs, 8)",
    },
    "virtio_net": {
        "cores = 2": "ethtool -l",
        "rx_ring = 256": "ethtool -g",
        'frequency = "3GHz"': "guessed",
        'governor = "haltpoll"': "current_governor",
        'guest_halt_poll = "200000ns"': "guest_halt_poll_ns",
        "guest_halt_poll_shrink = 2": "haltpoll",
    },
    # (No cpuidle.txt: the default states, said to be a published machine's.)
    "veth": {
        'io = "threaded-napi"': "threaded NAPI",
        "cores = 1": "ethtool -l",
        'dma_delay = "0ns"': "veth has no DMA",
        'table = "intel-skx"': "not this host's",
    },
}


@pytest.mark.parametrize("driver", sorted(EXPECT))
def test_saved_outputs_become_a_scenario_model_and_run_accept(driver, tmp_path):
    out = tmp_path / "host.toml"
    run_cli("import-host", "--from", HOSTS / driver, "-o", out)
    text = out.read_text()
    lines = text.splitlines()
    for value, source in EXPECT[driver].items():
        line = next((x for x in lines if x.startswith(value)), None)
        assert line is not None, f"{value!r} not in\n{text}"
        assert source in line.split("#", 1)[1], line
    # Every value says where it came from.
    assert all("#" in x for x in lines if "=" in x and not x.startswith("#") and not x.startswith("name"))
    p = pktsim.predict(out)
    assert p["predicted_pps"] > 0
    r = pktsim.run(out, {"measure.warmup": "1ms", "measure.duration": "2ms"})
    assert r["throughput_pps"] > 0


@pytest.mark.parametrize("driver", sorted(EXPECT))
def test_an_imported_host_starts_at_a_light_load_and_names_its_default_costs(driver, tmp_path):
    """A 100 Gbit/s NIC offered 10% of its line rate was overloaded (14.9 Mpps, 46% loss):
    the first load is 30% of the loss-free capacity the model gives the host."""
    from pktsim.hostload import LIGHT_LOAD

    out = tmp_path / "host.toml"
    proc = run_cli("import-host", "--from", HOSTS / driver, "-o", out)
    p = pktsim.predict(out)
    assert p["offered_pps"] == pytest.approx(LIGHT_LOAD * p["capacity_pps"], rel=0.01)
    line = next(x for x in out.read_text().splitlines() if x.startswith("rate = ") and "light load" in x)
    assert "30% of the loss-free capacity" in line
    r = pktsim.run(out, {"measure.warmup": "1ms", "measure.duration": "5ms"})
    assert r["loss_ratio"] == 0 and r["cpu_utilization"] < 0.8
    # Every cost that is a default or a guess is named on stderr.
    assert "traffic.rate = " in proc.stderr and "host.t_poll" in proc.stderr and "cost.profile" in proc.stderr


def test_a_clock_governor_pktsim_does_not_have_is_said_and_left_out(tmp_path):
    out = tmp_path / "host.toml"
    run_cli("import-host", "--from", HOSTS / "i40e", "-o", out)
    text = out.read_text()
    assert "[cpu.freq]" not in text
    assert "cpufreq governor 'ondemand' of acpi-cpufreq" in text


def test_missing_files_fall_back_to_defaults_and_say_so(tmp_path):
    d = tmp_path / "few"
    d.mkdir()
    shutil.copy(HOSTS / "ixgbe" / "ethtool-g.txt", d)
    text = run_cli("import-host", "--from", d).stdout
    assert "lscpu.txt missing" in text and "unknown driver: 10 Gbit/s guessed" in text
    assert pktsim.predict(pktsim.Scenario.from_toml(text, origin="imported"))["predicted_pps"] > 0


def test_bad_saved_output_is_a_clear_error(tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "lscpu.txt").write_bytes(b"CPU(s): 4\n\xff\xfe\n")
    proc = run_cli("import-host", "--from", d, check=False)
    assert proc.returncode == 2 and "lscpu.txt" in proc.stderr and "UTF-8" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("import-host", "--from", tmp_path / "nowhere", check=False)
    assert proc.returncode == 2 and "not a directory" in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli("import-host", "--from", empty, check=False)
    assert proc.returncode == 2 and "none of" in proc.stderr


def test_the_live_machine_gives_a_scenario_too():
    text = run_cli("import-host").stdout
    assert "[host]" in text
    assert pktsim.predict(pktsim.Scenario.from_toml(text, origin="live"))["predicted_pps"] > 0


def test_values_the_scenario_cannot_take_are_noted_not_written(tmp_path):
    """An igb-sized rx-usecs beyond the ixgbe EITR range nic.itr models, and a netdev
    budget a NAPI thread (veth) never reads: each left out, with a note, and the scenario
    still loads."""
    i40e, veth = tmp_path / "i40e", tmp_path / "veth"
    shutil.copytree(HOSTS / "i40e", i40e)
    shutil.copytree(HOSTS / "veth", veth)
    coalesce = i40e / "ethtool-c.txt"
    coalesce.write_text(coalesce.read_text().replace("rx-usecs: 50", "rx-usecs: 2000"))
    sysctl = veth / "sysctl.txt"
    sysctl.write_text(sysctl.read_text().replace("net.core.netdev_budget = 300", "net.core.netdev_budget = 600"))
    for d, note, absent in (
        (i40e, "rx-usecs 2000 is beyond the 1022 us", "interval ="),
        (veth, "netdev_budget = 600: a NAPI thread does not read it", "budget ="),
    ):
        text = run_cli("import-host", "--from", d).stdout
        assert note in text, text
        assert not any(x.startswith(absent) for x in text.splitlines()), text
        assert pktsim.predict(pktsim.Scenario.from_toml(text, origin="imported"))["predicted_pps"] > 0


@pytest.mark.parametrize(
    "release, softirq",
    [
        ("4.8.17", "inline"),
        ("4.9.0", "defer"),
        ("5.10.228", "defer"),
        ("5.15.133-rt70", "inline"),
        ("5.15.148-generic", "defer"),
        ("6.1.46-rt13", "inline"),
        ("6.1.141", "defer"),
        ("6.4.16", "defer"),
        ("6.5.0", "inline"),
        ("6.8.0-45-generic", "inline"),
    ],
)
def test_the_kernel_release_sets_where_softirqs_run(release, softirq):
    """host.softirq from kernel.osrelease: deferred to ksoftirqd from 4.9 to 6.4 and in the
    stable trees, inline before and after the 2023 revert (and in the -rt trees that took it)."""
    from pktsim import hostimport

    host = hostimport.Host(driver="ixgbe")
    hostimport.parse_sysctl(f"kernel.osrelease = {release}\n", host, "sysctl.txt")
    assert host.get("host", "softirq") == f'"{softirq}"'
    bad = hostimport.Host(driver="ixgbe")
    hostimport.parse_sysctl("kernel.osrelease = unknown\n", bad, "sysctl.txt")
    assert bad.get("host", "softirq") is None and "not a version" in bad.notes[0]
