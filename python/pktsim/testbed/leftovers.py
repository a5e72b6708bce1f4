"""What testbed runs own and how it is removed: the namespaces (:data:`NAMESPACES`), the
lock a run holds from before it builds until it has torn down (:class:`Lock`, whose record
names the run's PID, its temporary directory and the sysctls it changed), the processes a
run marks (:data:`PARENT_ENV`) and its temporary directories (:data:`TMP_PREFIX`).
:func:`reap` removes what dead runs left, :func:`teardown_all` is ``pktsim testbed
teardown``; :func:`_sh` runs the testbed's commands (in a namespace or not).

:mod:`pktsim.testbed.topology` builds the namespaces and gives these names too.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from .errors import TestbedError

NAMESPACES = ("pktsim-tb-gen", "pktsim-tb-dut", "pktsim-tb-sink")
LOCK_PATH = Path("/run/pktsim-testbed.lock")
# Marks the run's children (their environment) and makes pktsim-tb die with the run.
PARENT_ENV = "PKTSIM_TB_PARENT"
TMP_PREFIX = "pktsim-tb-"
# How long `teardown --force` waits for a live run to stop after SIGTERM (then SIGKILL).
FORCE_WAIT_S = 10.0


def _sh(*cmd: str, input: str | None = None, ns: str | None = None, check: bool = True) -> str:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    try:
        p = subprocess.run(full, input=input, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise TestbedError(f"{cmd[0]}: not found (the testbed needs iproute2, ethtool and nftables; `make install` as root installs them)") from None
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{' '.join(full)}: no answer within 120 s") from None
    if check and p.returncode != 0:
        raise TestbedError(f"{' '.join(full[:8])}{' ...' if len(full) > 8 else ''}: {p.stderr.strip() or f'exit {p.returncode}'}")
    return p.stdout


def stale_namespaces() -> list[str]:
    out = _sh("ip", "netns", "list", check=False)
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n in NAMESPACES]


def teardown() -> list[str]:
    """Delete every namespace the testbed makes (their veths and nftables tables go with
    them), after killing what runs in them. Returns the names deleted."""
    gone = []
    for ns in stale_namespaces():
        _kill_processes_in(ns)
        _sh("ip", "netns", "del", ns, check=False)
        gone.append(ns)
    return gone


def _kill_processes_in(ns: str) -> None:
    out = _sh("ip", "netns", "pids", ns, check=False)
    for pid in out.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


# ---------------------------------------------------------------------------------- the lock


class LockBusy(TestbedError):
    """A live run holds the lock; ``pid`` is the holder's (None if it cannot be told)."""

    def __init__(self, pid: int | None):
        self.pid = pid
        who = f"a live testbed run (PID {pid})" if pid else "a live testbed run"
        super().__init__(f"{who} holds {LOCK_PATH}")


class Lock:
    """The testbed's lock: ``flock`` on :data:`LOCK_PATH`, held from before anything is
    built until everything is torn down. The file names the holder (``pid``) and its
    temporary directory (``tmp``) as JSON; ``previous`` is what the last holder wrote
    (a run killed with SIGKILL releases the lock but leaves its record)."""

    def __init__(self) -> None:
        fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._f = os.fdopen(fd, "r+")
        try:
            fcntl.flock(self._f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_holder(self._f)
            self._f.close()
            raise LockBusy(holder) from None
        self.previous = _read_record(self._f)
        self.record: dict = {}
        self.write(pid=os.getpid())

    def write(self, **fields) -> None:
        self.record.update(fields)
        self._f.seek(0)
        self._f.truncate()
        self._f.write(json.dumps(self.record) + "\n")
        self._f.flush()

    def release(self) -> None:
        if self._f.closed:
            return
        try:
            self._f.seek(0)
            self._f.truncate()  # nothing left to reap
            fcntl.flock(self._f, fcntl.LOCK_UN)
        finally:
            self._f.close()


def _read_record(f) -> dict:
    try:
        f.seek(0)
        rec = json.loads(f.read() or "{}")
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def lock_holder(f=None) -> int | None:
    """The PID holding :data:`LOCK_PATH` (None when it is free or the holder cannot be told):
    from /proc/locks, else from what the holder wrote into the file."""
    try:
        st = os.stat(LOCK_PATH)
    except OSError:
        return None
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split()
        if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            maj, mnr, ino = parts[5].split(":")
            if (int(maj, 16), int(mnr, 16), int(ino)) == want and int(parts[4]) > 0:
                return int(parts[4])  # 0: a holder outside this PID namespace
        except ValueError:
            continue
    if f is not None:
        pid = _read_record(f).get("pid")
        return pid if isinstance(pid, int) and pid > 0 else None
    return None


# ---------------------------------------------------------------------------------- leftovers


def marked_processes(exclude: int | None = None) -> list[int]:
    """Live processes started by a testbed run (``PKTSIM_TB_PARENT`` in their environment),
    except those of run ``exclude``."""
    own = f"{PARENT_ENV}={exclude}".encode() if exclude else None
    key = f"{PARENT_ENV}=".encode()
    found = []
    spare = _ancestors()  # never this process or what started it, marked or not
    for pid in _pids():
        if pid in spare:
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(key) for e in env) and (own is None or own not in env) and not _zombie(pid):
            found.append(pid)
    return found


def _ancestors() -> set[int]:
    """This process and its ancestors."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _kill_and_wait(pids: list[int], timeout: float = 2.0) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(not _zombie(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)


def _stale_tmp_dirs(previous: dict) -> list[str]:
    found = set(glob.glob(os.path.join(tempfile.gettempdir(), TMP_PREFIX + "*")))
    if isinstance(previous.get("tmp"), str):
        found.add(previous["tmp"])
    return sorted(d for d in found if os.path.basename(d).startswith(TMP_PREFIX) and os.path.isdir(d) and not os.path.islink(d))


def reap(previous: dict) -> dict:
    """Removes what dead runs left: their marked processes, the namespaces (and what runs in
    them), a root-namespace nftables table of ours, and temporary directories. Called with
    the lock held, so no live run owns any of it, and writes back the global sysctls a
    killed ``tune-check`` had changed. Returns what was removed, by kind."""
    procs = marked_processes(exclude=os.getpid())
    _kill_and_wait(procs)
    dead = previous.get("pid")
    gone = {
        "stale_lock": dead if isinstance(dead, int) and dead != os.getpid() else None,  # a killed run's record
        "processes": procs,
        "namespaces": teardown(),
        "nftables": [],
        "directories": [],
    }
    gone["sysctls"] = restore_sysctls(previous.get("sysctls"))
    if shutil.which("nft") and subprocess.run(["nft", "list", "table", "inet", "pktsim_tb"], capture_output=True).returncode == 0:
        _sh("nft", "delete", "table", "inet", "pktsim_tb", check=False)
        gone["nftables"].append("inet pktsim_tb")
    for d in _stale_tmp_dirs(previous):
        shutil.rmtree(d, ignore_errors=True)
        gone["directories"].append(d)
    return gone


def restore_sysctls(saved) -> list[str]:
    """Writes back global sysctls a run changed and recorded in the lock (``{"net.core.x":
    value}``, what they were before it); returns ``name=value`` of each written."""
    done = []
    if not isinstance(saved, dict):
        return done
    for name, value in saved.items():
        if not (isinstance(name, str) and re.fullmatch(r"net\.core\.[a-z_]+", name) and isinstance(value, int)):
            continue  # only what a run of ours writes
        try:
            (Path("/proc/sys") / name.replace(".", "/")).write_text(f"{value}\n")
            done.append(f"{name}={value}")
        except OSError:
            pass
    return done


def teardown_all(force: bool = False) -> dict:
    """``pktsim testbed teardown``: reap what dead runs left. Refuses (:class:`LockBusy`)
    while a live run holds the lock; with ``force`` it stops that run first (SIGTERM, so it
    tears down itself; SIGKILL after :data:`FORCE_WAIT_S`)."""
    stopped = None
    try:
        lock = Lock()
    except LockBusy as e:
        if not force:
            raise
        _stop_holder(e.pid)
        stopped = e.pid
        try:
            lock = Lock()
        except LockBusy as again:
            raise TestbedError(f"{again} even after SIGTERM and SIGKILL; nothing was torn down") from None
    try:
        return {"stopped": stopped, **reap(lock.previous)}
    finally:
        lock.release()


def _stop_holder(pid: int | None) -> None:
    if not pid or b"pktsim" not in _cmdline(pid):
        raise TestbedError(f"{LOCK_PATH} is held by {f'PID {pid}' if pid else 'an unknown process'}, which is not a pktsim run: not stopping it")
    for sig, wait in ((signal.SIGTERM, FORCE_WAIT_S), (signal.SIGKILL, 2.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if lock_holder() != pid:
                return
            time.sleep(0.05)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@contextmanager
def _signals_held():
    """Holds back SIGINT and SIGTERM (they arrive afterwards), so a second Ctrl-C does not
    cut a teardown short."""
    sigs = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]
