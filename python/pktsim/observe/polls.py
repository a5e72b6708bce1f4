"""NAPI polls per interface over the window: ``perf stat`` counting the ``napi:napi_poll``
tracepoint, filtered by device (counting, not sampling: a counter per event, no record of
each). perf enables the tracepoint for its run and disables it when it exits; it runs with
a timeout of the window and dies with ``pktsim observe`` (SIGKILL included), so nothing
stays enabled. Without perf, or without the right to use it (root, or
``kernel.perf_event_paranoid`` and tracefs permissions), it says why and the figures it
would give are left out."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence


def start(ifaces: Sequence[str], seconds: float) -> tuple[subprocess.Popen | None, str]:
    """perf counting each interface's polls for ``seconds`` (process, ""), or (None, why not)."""
    if shutil.which("perf") is None:
        return None, "frames per poll: perf is not installed (napi:napi_poll)"
    if os.geteuid() != 0:
        return None, "frames per poll: counting napi:napi_poll takes root"
    from ..testbed.topology import die_with_parent

    argv = ["perf", "stat", "-x", ",", "-a", "--timeout", str(max(10, round(seconds * 1000)))]
    for i in ifaces:
        argv += ["-e", "napi:napi_poll", "--filter", f'dev_name == "{i}"']
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent(os.getpid()))
    return proc, ""


def counts(proc: subprocess.Popen, ifaces: Sequence[str], timeout_s: float) -> tuple[dict[str, int] | None, str]:
    """The polls of each interface (in the order perf was given them), or (None, why)."""
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None, "frames per poll: perf stat did not end with the window"
    found = [int(line.split(",", 1)[0]) for line in err.splitlines() if re.match(r"^\d+,[^,]*,napi:napi_poll,", line)]
    if len(found) != len(ifaces):
        last = err.strip().splitlines()[-1][:120] if err.strip() else f"exit {proc.returncode}"
        return None, f"frames per poll: perf stat gave no napi:napi_poll counts ({last})"
    return dict(zip(ifaces, found)), ""
