"""Where a sweep's tasks run: local worker processes or a Dask cluster, in chunks of
consecutive tasks, each chunk's rows handed back as they finish."""

from __future__ import annotations

import time
from collections.abc import Sequence

from .tasks import Task, _failed_row, run_task


def _worker_init(parent: int | None = None) -> None:
    """Local worker processes leave Ctrl-C to the parent, which stops them at once (a
    terminated worker ends quietly: not with the command's SIGTERM handler, inherited by
    the fork, which would raise KeyboardInterrupt in it). And they die with the process
    that started them, even one killed with SIGKILL, which can stop nothing: the kernel
    sends them SIGKILL then (``prctl(PR_SET_PDEATHSIG)``); one whose parent is already gone
    exits at once."""
    import os
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if parent is not None and os.getppid() != parent:
        os._exit(0)


def _spawner() -> int | None:
    """The pid a pool worker's parent has: this process when workers are forked (Linux's
    default start method), else a server process of multiprocessing's (not known here)."""
    import multiprocessing
    import os

    # (The pool takes the same default context.)
    return os.getpid() if multiprocessing.get_context().get_start_method() == "fork" else None


def run_chunk(tasks: Sequence[Task]) -> list:
    """Run a few points in turn (one pool or Dask task): their rows, in order."""
    return [run_task(t) for t in tasks]


# Points per pool or Dask task: enough that the per-task cost (pickling, a round trip to
# the worker, the scheduler's bookkeeping) is spread over many short points, few enough
# that every worker gets about CHUNKS_PER_WORKER tasks (the last ones balance the load)
# and that finished rows reach the checkpoint and the progress bar as they come.
MAX_CHUNK = 64


CHUNKS_PER_WORKER = 8


def chunks(tasks: Sequence[Task], workers: int, max_chunk: int = MAX_CHUNK) -> list:
    """The tasks cut into consecutive chunks for ``workers`` processes (see ``MAX_CHUNK``)."""
    size = max(1, min(max_chunk, len(tasks) // max(1, workers * CHUNKS_PER_WORKER)))
    return [list(tasks[i : i + size]) for i in range(0, len(tasks), size)]


def _finish_chunk(chunk: Sequence[Task], fut, finished) -> None:
    try:
        rows = fut.result()
    except Exception as e:  # a worker died (or was lost): the chunk's points failed
        rows = [_failed_row(t, f"{type(e).__name__}: {e}") for t in chunk]
    finished(list(zip(chunk, rows)))


def _run_processes(workers: int, tasks: Sequence[Task], finished) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ex = ProcessPoolExecutor(max_workers=workers, initializer=_worker_init, initargs=(_spawner(),))
    try:
        futures = {ex.submit(run_chunk, c): c for c in chunks(tasks, workers)}
        for fut in as_completed(futures):
            _finish_chunk(futures[fut], fut, finished)
    except BaseException:
        # Ctrl-C: the running points are abandoned, not waited for.
        abandon_pool(ex)
        raise
    ex.shutdown(wait=True)


def abandon_pool(ex) -> None:
    """Stop a process pool at once: its queued work cancelled, its workers terminated,
    and its manager thread given a second to close its wakeup pipe, so that the
    interpreter's exit does not write to that pipe as it closes (CPython 3.11's
    ``_python_exit`` checks the pipe and writes without a lock: an "Exception ignored"
    traceback on stderr after Ctrl-C or SIGTERM)."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    manager = getattr(ex, "_executor_manager_thread", None)
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        p.terminate()
    for p in procs:
        p.join(1.0)
    if manager is not None:
        manager.join(1.0)


class DaskClusterError(ValueError):
    """The Dask cluster cannot run the sweep: ``distributed`` is not installed, the
    scheduler is gone, or no worker is left."""


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise DaskClusterError("--dask needs Dask's distributed package, which is not installed: pip install 'dask[distributed]'") from None
    return distributed


def _reason(e: BaseException) -> str:
    text = (str(e).strip().splitlines() or [""])[0].rstrip(":")
    if "cancelled" in text.lower():
        return "its futures were cancelled"
    return text or type(e).__name__


# Points per Dask task at most: the scheduler's cost per task is larger than a pool's.
DASK_MAX_CHUNK = 256


def _runs(pending, by_future) -> int:
    """The runs (points) in the pending futures' chunks."""
    return sum(len(by_future[f]) for f in pending)


def _run_dask(address: str, tasks: Sequence[Task], finished, lost_after_s: float = 10.0) -> None:
    """Run the tasks on the cluster at ``address``; the client's own log lines (reconnect
    attempts) are muted while it runs, since a lost cluster ends in one error here."""
    import logging

    _import_distributed()
    names = ["distributed"] + [n for n in list(logging.root.manager.loggerDict) if n.startswith("distributed.")]
    levels = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.CRITICAL + 1)
    try:
        _run_dask_quiet(address, tasks, finished, lost_after_s)
    finally:
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)


# How long a Dask scheduler has to answer, whatever listens at the address.
DASK_CONNECT_S = 10.0


def _connect(address: str):
    """A client of the Dask scheduler at ``address``, or :class:`DaskClusterError` within
    :data:`DASK_CONNECT_S` seconds: the client's own timeout covers the connection, not a
    service that accepts it and never speaks Dask's protocol, so the client is made on a
    thread of its own and given up on after that long."""
    import threading

    distributed = _import_distributed()
    if not str(address).strip():
        raise DaskClusterError("--dask '': expected the address of a Dask scheduler, such as tcp://host:8786 (leave --dask out to run locally)")
    box: dict = {}

    def make():
        try:
            box["client"] = distributed.Client(address, timeout=f"{DASK_CONNECT_S:g}s")
        except BaseException as e:  # noqa: BLE001 - reported below
            box["error"] = e

    t = threading.Thread(target=make, name="pktsim-dask-connect", daemon=True)
    t.start()
    t.join(DASK_CONNECT_S + 1.0)
    if "client" in box:
        return box["client"]
    why = f"{box['error']}" if "error" in box else f"no answer as a Dask scheduler within {DASK_CONNECT_S:g} s"
    raise DaskClusterError(f"--dask {address}: cannot reach the Dask scheduler ({why}); expected an address such as tcp://host:8786")


def _run_dask_quiet(address: str, tasks: Sequence[Task], finished, lost_after_s: float) -> None:
    distributed = _import_distributed()
    client = _connect(address)
    with client:
        try:
            threads = sum(client.nthreads().values()) or 2  # no worker yet: sized for two
        except Exception:  # noqa: BLE001 - sized for two workers then
            threads = 2
        parts = chunks(tasks, threads, DASK_MAX_CHUNK)
        futures = client.map(run_chunk, parts, pure=False)
        by_future = dict(zip(futures, parts))
        pending = set(futures)
        no_worker_since = None
        try:
            while pending:
                try:
                    done, pending = distributed.wait(pending, timeout=0.5, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    done = set()
                except Exception as e:  # noqa: BLE001 - the scheduler went away
                    if type(e).__name__ != "TimeoutError":
                        raise DaskClusterError(
                            f"--dask {address}: lost the connection to the Dask scheduler ({_reason(e)}); "
                            f"{_runs(pending, by_future)} of {len(tasks)} runs not done"
                        ) from None
                    done = set()
                for fut in done:
                    _finish_chunk(by_future[fut], fut, finished)
                if done or not pending:
                    continue
                try:
                    workers = len(client.nthreads())
                except Exception as e:  # noqa: BLE001
                    raise DaskClusterError(
                        f"--dask {address}: lost the connection to the Dask scheduler ({_reason(e)}); {_runs(pending, by_future)} of {len(tasks)} runs not done"
                    ) from None
                if workers:
                    no_worker_since = None
                elif no_worker_since is None:
                    no_worker_since = time.monotonic()
                elif time.monotonic() - no_worker_since > lost_after_s:
                    raise DaskClusterError(
                        f"--dask {address}: no Dask worker left for {lost_after_s:g} s; {_runs(pending, by_future)} of {len(tasks)} runs not done "
                        "(finished rows are kept in the checkpoint when the sweep writes -o OUT; start workers and run it again to resume)"
                    )
        finally:
            if pending:
                client.cancel(list(pending))
