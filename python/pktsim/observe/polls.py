"""NAPI polls per interface over the window: ``perf stat`` counting the ``napi:napi_poll``
tracepoint, filtered by device (counting, not sampling: a counter per event, no record of
each), printing its counts every ``INTERVAL_MS`` (``-I``). observe takes its first snapshot
once perf's first interval has come (the counters are on) and adds up the intervals inside
its window, and of the two it cuts, the share inside (polls taken as even within an
interval), so the polls and the frames cover the same time. perf enables the tracepoint for its
run and disables it when it exits; it is stopped when the window ends, counts for a bounded number
of intervals beyond that, and dies with ``pktsim observe`` (SIGKILL included), so nothing
stays enabled. Without perf, or without the right to use it (root, or
``kernel.perf_event_paranoid`` and tracefs permissions), it says why and the figures it
would give are left out."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence

# perf's counting interval (ms): perf costs about 0.5% of a CPU at 100 ms (1.7% at 20 ms,
# measured); the intervals the window cuts are shared out in proportion.
INTERVAL_MS = 100
# How long perf may take to start counting.
START_TIMEOUT_S = 5.0
_LINE = re.compile(r"^\s*(\d+\.\d+),(\d+|<not counted>|<not supported>),[^,]*,napi:napi_poll,")


class Counting:
    """A running ``perf stat -I``: each interval's counts per interface, with when it came."""

    def __init__(self, proc: subprocess.Popen, ifaces: Sequence[str]):
        self.proc = proc
        self.n = len(ifaces)
        self.ifaces = list(ifaces)
        self.intervals: list[tuple[int, list[int]]] = []  # (arrival, CLOCK_MONOTONIC ns; counts)
        self.tail: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stamp, counts = None, []
        for line in self.proc.stderr:
            m = _LINE.match(line)
            if not m:
                self.tail = (self.tail + [line.strip()])[-3:]
                continue
            if m.group(1) != stamp:
                stamp, counts = m.group(1), []
            counts.append(int(m.group(2)) if m.group(2).isdigit() else 0)
            if len(counts) == self.n:
                with self._cond:
                    self.intervals.append((time.monotonic_ns(), counts))
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, after_ns: int, timeout_s: float) -> bool:
        """Whether an interval came after ``after_ns`` (waiting up to ``timeout_s``)."""
        end = time.monotonic() + timeout_s
        with self._cond:
            while not (self.intervals and self.intervals[-1][0] > after_ns):
                left = end - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    return bool(self.intervals and self.intervals[-1][0] > after_ns)
                self._cond.wait(min(left, 0.05))
        return True

    def why_not(self) -> str:
        last = self.tail[-1][:120] if self.tail else f"exit {self.proc.returncode}"
        return f"frames per poll: perf stat gave no napi:napi_poll counts ({last})"

    def polls(self, t0_ns: int, t1_ns: int) -> dict[str, int] | None:
        """Each interface's polls in (t0, t1]: the intervals inside, and the share inside
        of the two the window cuts; None when perf has not counted over the whole window."""
        self.wait_for(t1_ns, 1.0 + INTERVAL_MS / 1e3)
        self.stop()
        with self._cond:
            got = list(self.intervals)
        if not got or got[0][0] > t0_ns or got[-1][0] <= t1_ns:
            return None
        total = [0.0] * self.n
        for (start, _), (end, counts) in zip(got, got[1:]):
            inside = min(end, t1_ns) - max(start, t0_ns)
            if inside > 0:
                share = inside / (end - start)
                total = [t + share * c for t, c in zip(total, counts)]
        return {i: round(total[k]) for k, i in enumerate(self.ifaces)}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start(ifaces: Sequence[str], seconds: float) -> tuple[Counting | None, str]:
    """perf counting each interface's polls for up to ``seconds`` after it has started
    counting (a Counting, ""), or (None, why not)."""
    if shutil.which("perf") is None:
        return None, "frames per poll: perf is not installed (napi:napi_poll)"
    if os.geteuid() != 0:
        return None, "frames per poll: counting napi:napi_poll takes root"
    from ..testbed.topology import die_with_parent

    # (-I takes no --timeout: a count of intervals bounds the run instead.)
    intervals = max(1, round((seconds + START_TIMEOUT_S) * 1000 / INTERVAL_MS))
    argv = ["perf", "stat", "-x", ",", "-a", "-I", str(INTERVAL_MS), "--interval-count", str(intervals)]
    for i in ifaces:
        argv += ["-e", "napi:napi_poll", "--filter", f'dev_name == "{i}"']
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1, preexec_fn=die_with_parent(os.getpid()))
    counting = Counting(proc, ifaces)
    if not counting.wait_for(0, START_TIMEOUT_S):
        why = counting.why_not()
        counting.stop()
        return None, why
    return counting, ""
