"""The edges: a resume that sees a changed input, sources and mixes right for every accepted
value, work bounded before it starts, outputs checked before it starts, processes that die
with their parent, and files pktsim writes that it can read back."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SHORT = {"measure.duration": "2ms", "measure.warmup": "0s"}


def _router_with_profile(d: Path, cycles: int) -> Path:
    """A router scenario in ``d`` whose cost profile is a file of its own (``cost.toml``)."""
    text = (ROOT / "crates" / "pktsim-core" / "profiles" / "raumer2015-64B.toml").read_text()
    (d / "cost.toml").write_text(text.replace('RX = "408cycles"', f'RX = "{cycles}cycles"'))
    text = (EXAMPLES / "linux-router-64B.toml").read_text().replace('profile = "raumer2015-64B"', 'profile = "cost.toml"')
    (d / "router.toml").write_text(text)
    return d / "router.toml"


@pytest.mark.parametrize("changed", ["profile", "pcap"])
def test_a_resume_reruns_the_points_whose_inputs_changed(tmp_path, changed):
    """A sweep's checkpoint holds a hash of every file its points read: the scenario's cost
    profile, a pcap. Changed between an interrupted sweep and its resume, the rows are not
    reused (and the resume says why); unchanged, they are, and it says how many."""
    from pktsim.experiments import SweepInterrupted, run_grid

    if changed == "profile":
        sc = _router_with_profile(tmp_path, 300)
    else:
        shutil.copy(EXAMPLES / "router-trace.toml", tmp_path / "router.toml")
        shutil.copy(EXAMPLES / "trace-small.pcap", tmp_path / "trace-small.pcap")
        sc = tmp_path / "router.toml"
    out = tmp_path / "sweep.csv"
    said: list[str] = []
    grid = {"traffic.rate": ["100kpps", "200kpps", "300kpps"]}

    def interrupted() -> None:
        """A sweep stopped after its first row, its checkpoint left behind."""

        def stop(done, total, what):
            if done >= 1:
                raise KeyboardInterrupt

        with pytest.raises(SweepInterrupted):
            run_grid(str(sc), grid, sets=SHORT, output=out, jobs=1, notify=said.append, progress=stop)

    interrupted()
    first = run_grid(str(sc), grid, sets=SHORT, output=out, jobs=1, notify=said.append)
    assert any("resuming: 1 of 3 runs reused" in s for s in said), said
    interrupted()
    if changed == "profile":
        _router_with_profile(tmp_path, 900)
    else:
        data = bytearray((tmp_path / "trace-small.pcap").read_bytes())
        data[-1] ^= 0xFF  # one byte of the last frame's payload
        (tmp_path / "trace-small.pcap").write_bytes(bytes(data))
    said.clear()
    third = run_grid(str(sc), grid, sets=SHORT, output=out, jobs=1, notify=said.append)
    assert any("a file it reads" in s and "starting over" in s for s in said), said
    assert not any("runs reused" in s for s in said), said
    if changed == "profile":
        assert third["t_proc_ns"].iloc[0] > first["t_proc_ns"].iloc[0]


def test_a_large_cv_keeps_the_offered_rate():
    """cv 3 (gamma gaps where a normal gap would be clipped at 0): the source offers its rate,
    as the model says."""
    import pktsim

    r = pktsim.run(
        str(EXAMPLES / "linux-router-64B.toml"),
        {"traffic.rate": "1Mpps", "traffic.sources": '[{share = "100%", pattern = "normal", cv = 3}]', "measure.duration": "50ms"},
    )
    offered = r["offered_packets"] / 0.05
    assert abs(offered - 1e6) / 1e6 < 0.03, offered
    proc = run_cli("run", EXAMPLES / "linux-router-64B.toml", "--set", 'traffic.sources=[{share = "100%", pattern = "normal", cv = 11}]', check=False)
    assert proc.returncode == 2 and "traffic.sources[0].cv = 11" in proc.stderr and "from 0 to 10" in proc.stderr, proc.stderr


def test_mix_weights_that_overflow_are_normalised():
    import pktsim

    sets = {"traffic.size": '[["64B", 1e308], ["1500B", 1e308]]', "measure.duration": "5ms", "traffic.rate": "100kpps"}
    r = pktsim.run(str(EXAMPLES / "linux-router-64B.toml"), sets)
    sizes = r["throughput_bps"] / r["throughput_pps"] / 8
    assert 700 < sizes < 860, sizes  # half 64 B, half 1500 B: 782 B on average
    proc = run_cli("model", EXAMPLES / "linux-router-64B.toml", "--json", *(a for k, v in sets.items() for a in ("--set", f"{k}={v}")))
    assert proc.returncode == 0, proc.stderr
    assert "782" in proc.stdout or "781.9" in proc.stdout, proc.stdout[:2000]


def test_work_is_bounded_before_it_starts(tmp_path):
    """A one-digit typo in a rate or a duration, a grid of a million runs, tune's loads:
    refused at once with the way past it named, not run for an hour."""
    t0 = time.monotonic()
    proc = run_cli("run", EXAMPLES / "linux-router-64B.toml", "--set", "link.rate=65536Gbit/s", "--set", "traffic.rate=100%", check=False)
    assert proc.returncode == 2 and "--allow-large" in proc.stderr and "measure.duration" in proc.stderr, proc.stderr
    proc = run_cli("run", EXAMPLES / "linux-router-64B.toml", "--set", "measure.duration=999990s", check=False)
    assert proc.returncode == 2 and "--allow-large" in proc.stderr, proc.stderr
    proc = run_cli(
        "sweep", EXAMPLES / "linux-router-64B.toml", "--param", "traffic.rate", "--values", "1kpps:1001kpps:1kpps", "--replications", "101", check=False
    )
    assert proc.returncode == 2 and "101,101 runs" in proc.stderr and "--allow-large" in proc.stderr, proc.stderr
    proc = run_cli("sweep", EXAMPLES / "linux-router-64B.toml", "--param", "traffic.rate", "--values", "1Mpps", "--replications", "1000000000", check=False)
    assert proc.returncode == 2 and "--allow-large" in proc.stderr, proc.stderr
    proc = run_cli("tune", EXAMPLES / "linux-router-64B.toml", "--load-range", "100kpps:1Mpps", "--loads", "100000", "--minimize", "cpu", check=False)
    assert proc.returncode == 2 and "--loads 100000" in proc.stderr, proc.stderr
    proc = run_cli("tune", EXAMPLES / "linux-router-64B.toml", "--load", "100kpps", "--minimize", "cpu", "--seed", "-1", check=False)
    assert proc.returncode == 2 and "--seed -1" in proc.stderr, proc.stderr
    # A chain multiplies each node's memory: two nodes with a million time-series buckets
    # each took 6.5 GB and 39 s; refused at once by its estimate (6.6 GB > 4 GiB).
    proc = run_cli("run", EXAMPLES / "router-firewall-chain.toml", "--set", "measure.duration=100ms", "--set", "measure.interval=100ns", check=False)
    assert proc.returncode == 2 and "measure.interval" in proc.stderr and "4 GiB" in proc.stderr and "--allow-large" in proc.stderr, proc.stderr
    assert time.monotonic() - t0 < 60
    from pktsim.experiments import run_grid

    with pytest.raises(ValueError, match="jobs = 0"):
        run_grid(str(EXAMPLES / "linux-router-64B.toml"), {"traffic.rate": ["1Mpps"]}, jobs=0)
    with pytest.raises(ValueError, match="jobs = -3"):
        run_grid(str(EXAMPLES / "linux-router-64B.toml"), {"traffic.rate": ["1Mpps"]}, jobs=-3)


def test_a_long_run_says_so_first(tmp_path):
    """Above 2e8 frames (about ten seconds and more) a run says so on stderr before it
    starts; Ctrl-C right after the notice stops it at once (a signal that came just before
    the engine started used to go unheard, and the run went on to its end)."""
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "pktsim", "run", str(EXAMPLES / "linux-router-64B.toml"), "--set", "measure.duration=30s"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    try:
        line = proc.stderr.readline()
        assert "frames to simulate" in line and "Ctrl-C" in line, line
    finally:
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert time.monotonic() - t0 < 1.0 and proc.returncode == 130, (time.monotonic() - t0, proc.returncode)


def test_pool_workers_die_with_their_parent(tmp_path):
    """kill -9 of a sweep leaves no worker behind (the kernel kills them with it)."""
    code = (
        "import pktsim\n"
        f"pktsim.sweep({str(EXAMPLES / 'linux-router-64B.toml')!r}, 'traffic.rate', '100kpps:2000kpps:100kpps', "
        "sets={'measure.duration': '2s'}, jobs=2)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    deadline = time.monotonic() + 30
    children: list[int] = []
    while time.monotonic() < deadline and len(children) < 2:
        time.sleep(0.2)
        try:
            children = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        except OSError:
            children = []
    assert len(children) >= 2, "the pool's workers did not start"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{c}").exists() and "Z" not in _state(c) for c in children):
        time.sleep(0.1)
    assert not [c for c in children if Path(f"/proc/{c}").exists() and "Z" not in _state(c)], children


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_a_dask_address_that_is_not_dask_fails_within_ten_seconds():
    """A service that accepts the connection and never speaks Dask's protocol, and an empty
    address: a clear error within about 10 s, not a hang, not a local run."""
    pytest.importorskip("distributed")
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        t0 = time.monotonic()
        port = srv.getsockname()[1]
        proc = run_cli(
            "sweep", EXAMPLES / "linux-router-64B.toml", "--param", "traffic.rate", "--values", "1Mpps", "--dask", f"tcp://127.0.0.1:{port}", check=False
        )
        took = time.monotonic() - t0
        assert proc.returncode == 2 and "Dask scheduler" in proc.stderr, proc.stderr
        assert took < 25, took
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()
    proc = run_cli("sweep", EXAMPLES / "linux-router-64B.toml", "--param", "traffic.rate", "--values", "1Mpps", "--dask", "", check=False)
    assert proc.returncode == 2 and "--dask ''" in proc.stderr, proc.stderr


def test_a_stale_long_table_is_removed(tmp_path):
    """A table written where an earlier sweep left OUT.time_series.csv (this sweep has no time
    series): the stale one goes, so that every table beside OUT is OUT's."""
    from pktsim.experiments import run_grid, write_table

    out = tmp_path / "s.csv"
    stale = tmp_path / "s.time_series.csv"
    stale.write_text("bucket\n1\n")
    df = run_grid(str(EXAMPLES / "linux-router-64B.toml"), {"traffic.rate": ["100kpps"]}, sets=SHORT, jobs=1)
    write_table(df, out)
    assert out.exists() and not stale.exists()


def test_what_calibrate_and_import_host_write_is_read_back(tmp_path):
    """A profile name that would break the TOML and garbage saved outputs: refused and
    named, nothing written; a normal calibration still writes its profile."""
    data = ROOT / "tests" / "data"
    base = ["calibrate", data / "perf-script.txt", "--rate", "1Mpps", "--freq", "3GHz", "--cpu-load", "100%"]
    ok = run_cli(*base, "-o", tmp_path / "ok.toml")
    assert ok.returncode == 0, ok.stderr
    bad = run_cli(*base, "--name", 'x"\n[evil]', "-o", tmp_path / "bad.toml", check=False)
    assert bad.returncode in (0, 2), bad.stderr
    if bad.returncode == 0:  # the name was escaped: the file reads back
        proc = run_cli("model", EXAMPLES / "linux-router-64B.toml", "--set", f"cost.profile={tmp_path / 'bad.toml'}")
        assert proc.returncode == 0, proc.stderr
    else:
        assert not (tmp_path / "bad.toml").exists()
    junk = tmp_path / "junk"
    shutil.copytree(data / "hosts" / "ixgbe", junk)
    for f in junk.iterdir():
        f.write_bytes(b'eth0"\n[x]\ny = \x01 "\nCPU(s): 4"4\nCPU MHz: nan\n' + f.read_bytes()[:200])
    proc = run_cli("import-host", "--from", junk, "-o", tmp_path / "host.toml", check=False)
    assert proc.returncode in (0, 2) and "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == 0:
        again = run_cli("model", tmp_path / "host.toml")
        assert again.returncode == 0, again.stderr
    else:
        assert not (tmp_path / "host.toml").exists()


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.toml")))
def test_every_example_round_trips_through_a_dict(example):
    from pktsim import Scenario

    sc = Scenario.load(EXAMPLES / example)
    again = Scenario.from_dict(sc.to_dict(), base_dir=EXAMPLES)
    assert json.dumps(again.to_dict(), sort_keys=True) == json.dumps(sc.to_dict(), sort_keys=True)


def test_the_api_names_a_value_a_dict_cannot_carry():
    """A NaN in a scenario dict names its key; a dict nested 2,000 deep is a ScenarioError,
    not a RecursionError."""
    from pktsim import Scenario, ScenarioError

    d = Scenario.load(EXAMPLES / "linux-router-64B.toml").to_dict()
    d["traffic"]["flows"] = float("nan")
    with pytest.raises(ScenarioError, match=r"traffic\.flows = nan: expected a finite number"):
        Scenario.from_dict(d)
    deep: dict = {}
    cur = deep
    for _ in range(2000):
        cur["a"] = {}
        cur = cur["a"]
    with pytest.raises(ScenarioError, match="levels deep"):
        Scenario.from_dict(deep)


def test_what_the_long_fuzz_run_found():
    """Cases `make fuzz` (100,000) found and the short run had not: a tune whose scenario
    sits off a knob's grid (rx_ring 1000), a node with no cost per frame in `model`, and
    `model --from-measurement` given a chain."""
    scen = ROOT / "python" / "pktsim" / "scenarios" / "veth-udp-receiver.toml"
    short = ["--set", "measure.duration=1ms", "--set", "measure.warmup=0s"]
    proc = run_cli("tune", scen, *short, "--jobs", "1", "--budget", "3", "--maximize", "cpu", check=False)
    assert proc.returncode == 0 and "what mattered" in proc.stdout, proc.stderr
    proc = run_cli("model", EXAMPLES / "beifuss2015-napi.toml", "--set", "host.t_proc=0ns", check=False)
    assert proc.returncode == 0 and "C_total" in proc.stdout, proc.stderr
    proc = run_cli("model", EXAMPLES / "router-firewall-chain.toml", "--from-measurement", "--rate", "1Mpps", "--cpu-load", "50%", check=False)
    assert proc.returncode == 2 and "is a chain" in proc.stderr, proc.stderr
