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
