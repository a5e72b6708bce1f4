"""Sweeps on a real Dask cluster: a scheduler and two workers as separate processes started
in another directory, a scenario whose cost profile is a relative path, then no worker
left; and `--dask` without the distributed package. Runs in `make test` (about 30 s)."""

import io
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout

import pandas as pd
import pytest
from conftest import ROOT

from pktsim import cli

SCENARIO = """[cpu]
frequency = "2GHz"
[link]
rate = "10Gbit/s"
[traffic]
rate = "1Mpps"
[cost]
profile = "cost.toml"
[measure]
duration = "1ms"
warmup = "0s"
"""
PROFILE = '[cycles]\nRX = "500cycles"\nother = "500cycles"\n'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_a_real_cluster_started_elsewhere_runs_a_relative_profile_then_losing_every_worker_is_a_clear_error(tmp_path):
    distributed = pytest.importorskip("distributed")
    project = tmp_path / "project"
    (project / "scenarios").mkdir(parents=True)
    (project / "scenarios" / "s.toml").write_text(SCENARIO)
    (project / "scenarios" / "cost.toml").write_text(PROFILE)
    elsewhere = tmp_path / "elsewhere"  # the workers' working directory: no scenarios/ here
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    worker = [sys.executable, "-m", "distributed.cli.dask_worker"]
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    log = open(tmp_path / "cluster.log", "w")
    scheduler = subprocess.Popen(
        [*dask, "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"], cwd=elsewhere, env=env, stdout=log, stderr=log
    )
    workers = [
        subprocess.Popen(
            [*worker, address, "--nthreads", "1", "--nworkers", "1", "--dashboard-address", ":0", "--no-nanny"], cwd=elsewhere, env=env, stdout=log, stderr=log
        )
        for _ in range(2)
    ]
    try:
        with distributed.Client(address, timeout="20s") as client:
            client.wait_for_workers(2, timeout=40)
        out = project / "out.parquet"
        sweep = [sys.executable, "-m", "pktsim", "sweep", "scenarios/s.toml", "--param", "traffic.rate", "--values", "0.5Mpps,1Mpps,1.5Mpps", "--dask", address]
        done = subprocess.run([*sweep, "-o", str(out)], cwd=project, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        df = pd.read_parquet(out)
        assert (df["status"] == "ok").all() and len(df) == 3
        # The same as a local run, which reads the profile next to the scenario.
        local = subprocess.run(
            [*sweep[:-2], "--jobs", "1", "-o", str(project / "local.parquet")], cwd=project, env=env, capture_output=True, text=True, timeout=120
        )
        assert local.returncode == 0, local.stderr
        ref = pd.read_parquet(project / "local.parquet")
        for col in ("throughput_pps", "latency_ns_p99", "cpu_utilization"):
            assert df[col].tolist() == ref[col].tolist(), col
        # ... and the profile applied: 1,000 cycles per packet at 2 GHz, not the default's cost.
        assert ref["t_proc_ns"].iloc[0] == pytest.approx(500.0, rel=0.01)

        # pktsim fit's runs go to the cluster too, and fit the same as on one process.
        (project / "m.csv").write_text("traffic.rate,cpu_per_frame\n0.5Mpps,700ns\n1Mpps,650ns\n")
        fit = [sys.executable, "-m", "pktsim", "fit", "scenarios/s.toml", "--data", "m.csv", "--free", "host.t_poll", "--fit-fraction", "1", "--max-runs", "24"]
        on_dask = subprocess.run([*fit, "--dask", address, "--json"], cwd=project, env=env, capture_output=True, text=True, timeout=120)
        assert on_dask.returncode == 0, on_dask.stderr
        alone = subprocess.run([*fit, "--jobs", "1", "--json"], cwd=project, env=env, capture_output=True, text=True, timeout=120)
        assert alone.returncode == 0, alone.stderr
        assert json.loads(on_dask.stdout) == json.loads(alone.stdout)

        _stop(workers)
        t0 = time.monotonic()
        lost = subprocess.run(sweep + ["--set", "seed=7"], cwd=project, env=env, capture_output=True, text=True, timeout=90)
        took = time.monotonic() - t0
        assert lost.returncode == 2, lost.stderr
        assert "no Dask worker left" in lost.stderr and "Traceback" not in lost.stderr
        assert len(lost.stderr.strip().splitlines()) == 1, lost.stderr
        assert took < 40, f"took {took:.1f} s"
    finally:
        _stop(workers + [scheduler])
        log.close()


def test_dask_without_distributed_is_one_line_exit_2(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main(
            ["sweep", str(ROOT / "examples" / "beifuss2015-napi.toml"), "--param", "traffic.rate", "--values", "1Mpps", "--dask", "tcp://127.0.0.1:1"]
        )
    assert rc == 2, err.getvalue()
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and "pip install" in lines[0] and "distributed" in lines[0]
