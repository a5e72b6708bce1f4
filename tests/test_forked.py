"""Work beside the process (pktsim.forked): the child's result, its failure, its stop, and
the sweep figures two processes draw against one process's."""

import os
import time

import pandas as pd
import pytest
from conftest import EXAMPLES

from pktsim.forked import Forked

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one CPU: nothing is forked")


def _pid():
    return os.getpid()


def _fail():
    raise ValueError("no such column")


def test_the_child_runs_the_work_with_what_this_process_had():
    table = {"rows": 3}  # (not pickled on the way in: the child has it from the fork)
    with Forked(lambda: (os.getpid(), table["rows"])) as child:
        assert child.started
        ok, (pid, rows) = child.result()
    assert ok and pid != os.getpid() and rows == 3


def test_a_call_sent_later_and_a_failure_said_not_raised():
    with Forked(warm=lambda: None) as child:
        child.send(_pid)
        ok, pid = child.result()
    assert ok and pid != os.getpid()
    with Forked(_fail) as child:
        ok, why = child.result()
    assert not ok and why == "ValueError: no such column"


def test_close_stops_a_busy_child_at_once():
    child = Forked(lambda: time.sleep(30))
    pid = child.proc.pid
    t0 = time.monotonic()
    child.close()
    assert time.monotonic() - t0 < 1.0
    time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]


def test_sweep_plots_two_processes_draw_what_one_draws(tmp_path, cli, monkeypatch):
    table = tmp_path / "s.csv"
    cli(
        "sweep",
        EXAMPLES / "napi-deferral.toml",
        "--set",
        "measure.duration=5ms",
        "--param",
        "traffic.rate",
        "--values",
        "100kpps,300kpps",
        "--param",
        "nic.napi.gro_flush_timeout",
        "--values",
        "10us,50us",
        "--jobs",
        "1",
        "-o",
        table,
    )
    from pktsim.plots import sweep_figures, sweep_plots

    df = pd.read_csv(table)
    drew = []
    result = Forked.result
    monkeypatch.setattr(Forked, "result", lambda self: drew.append(result(self)) or drew[-1])
    both = sweep_plots(df, tmp_path / "two", dpi=60)
    assert len(drew) == 1 and drew[0][0] and len(drew[0][1]) == len(both) // 2, drew  # the child's share
    one = sweep_figures(df, tmp_path / "one", dpi=60)
    assert [p.name for p in both] == [p.name for p, _ in one.values()] and len(both) >= 4
    for p, _ in one.values():
        assert (tmp_path / "two" / p.name).read_bytes() == p.read_bytes(), p.name


def _inside_a_daemon(q):
    with Forked(lambda: 1) as child:
        q.put((child.started, child.result()))


def test_a_daemonic_process_does_the_work_itself():
    """A pool's daemonic worker may not have children: nothing is forked, and the caller
    draws itself (as where there is no fork)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_inside_a_daemon, args=(q,), daemon=True)
    p.start()
    started, (ok, why) = q.get(timeout=10)
    p.join(5)
    assert not started and not ok and why == "not forked"
