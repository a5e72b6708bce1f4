"""A run stops promptly on Ctrl-C or SIGTERM whatever the scenario: the engine looks at its
stop flag between events, work units and frames, not once per simulated millisecond (at
10 Tbit/s a simulated millisecond is 15 million frames, which once took over 20 s to reach).
"""

import signal
import subprocess
import sys
import time

import pytest
from conftest import EXAMPLES, ROOT

FAST_LINK = [
    "run",
    str(EXAMPLES / "linux-router-64B.toml"),
    "--set",
    "link.rate=10Tbit/s",
    "--set",
    "traffic.rate=100%",
    "--set",
    "measure.duration=10s",
    "--json",
    "--allow-large",  # 15 Gpps x 10 s: far more than a run is let simulate by default
]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_run_at_15_gpps_stops_within_a_second_of_a_signal(sig):
    proc = subprocess.Popen([sys.executable, "-m", "pktsim", *FAST_LINK], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    time.sleep(1.5)
    assert proc.poll() is None, "the run ended before the signal"
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the run did not stop within 10 s of {sig.name}")
    stopped_s = time.monotonic() - t0
    # 50-70 ms on a 2-vCPU machine, process exit included; the bound leaves room for a
    # loaded CI machine.
    assert stopped_s < 1.0, f"{stopped_s:.2f} s to stop"
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err and out == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["run", str(EXAMPLES / "router-firewall-chain.toml"), "--set", "measure.duration=600s", "--json"],
        ["run", str(EXAMPLES / "router-trace.toml"), "--set", "traffic.loop=true", "--set", "measure.duration=600s", "--json"],
    ],
    ids=["chain", "trace"],
)
def test_a_chain_and_a_replayed_trace_stop_within_a_second_of_sigterm(argv):
    proc = subprocess.Popen([sys.executable, "-m", "pktsim", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    time.sleep(1.5)
    assert proc.poll() is None, "the run ended before the signal"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the run did not stop within 10 s of SIGTERM")
    assert time.monotonic() - t0 < 1.0
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err and out == ""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_reproduce_all_in_worker_processes_stops_at_once_and_leaves_no_worker(sig):
    """`reproduce all` runs its papers side by side in worker processes: a signal stops the
    command within half a second, its workers with it, and nothing half-written reaches
    stdout."""
    import os

    proc = subprocess.Popen([sys.executable, "-m", "pktsim", "reproduce", "all", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 20
    kids: list[str] = []
    while len(kids) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        kids = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert len(kids) >= 2, f"no workers started: {kids}"
    time.sleep(1.0)
    assert proc.poll() is None, "reproduce ended before the signal"
    t0 = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=10)
    assert time.monotonic() - t0 < 0.5
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert out == ""
    deadline = time.monotonic() + 2
    while any(os.path.exists(f"/proc/{k}") for k in kids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [k for k in kids if os.path.exists(f"/proc/{k}")]
