"""Work done beside this process, in a child forked from it: a figure drawn on the other CPU
while this process draws the rest (``pktsim plot``), or matplotlib imported while a search
runs and the figure drawn at its end (``pktsim tune -o``).

The child has everything this process had when it forked (a sweep table, the modules
imported so far) and nothing to pickle but its result. It leaves Ctrl-C to this process,
dies with it (``prctl(PR_SET_PDEATHSIG)``, as the sweep's workers do), and stops at once on
:meth:`Forked.close`; what it writes it writes whole (:func:`pktsim.textio.atomic_write`),
so a stop leaves nothing behind. Where there is no ``fork`` (or one CPU, where it gains
nothing), :attr:`Forked.started` is False and the caller does the work itself; so too
when the child fails (:meth:`result` says so), which then raises the error where the
user sees it.
"""

from __future__ import annotations

import os
from collections.abc import Callable


class Forked:
    def __init__(self, work: Callable[[], object] | None = None, warm: Callable[[], object] | None = None):
        """Fork now. The child calls ``warm()`` (imports, say), then runs ``work()``, or
        without it waits for the call :meth:`send` gives it."""
        import multiprocessing as mp

        self.proc = self.conn = None
        self.done = False
        if (os.cpu_count() or 1) < 2:
            return
        try:
            ctx = mp.get_context("fork")
        except ValueError:
            return
        self.conn, child = ctx.Pipe()
        proc = ctx.Process(target=_child, args=(child, os.getpid(), warm, work), name="pktsim-forked", daemon=True)
        try:
            proc.start()
        except (AssertionError, OSError):  # a daemonic process (a pool's worker) has no children; no fork left
            self.conn.close()
            return
        finally:
            child.close()
        self.proc = proc

    @property
    def started(self) -> bool:
        return self.proc is not None

    def send(self, fn: Callable, *args) -> None:
        """The call the child makes (``fn`` and ``args`` are pickled: a module's function)."""
        if self.proc is not None:
            try:
                self.conn.send((fn, args))
            except OSError:
                self.close()

    def result(self) -> tuple[bool, object]:
        """(True, what the call returned), or (False, why not) where the child did not
        finish it."""
        if self.proc is None:
            return False, "not forked"
        try:
            ok, value = self.conn.recv()
        except (EOFError, OSError) as e:
            return False, f"the child ended: {e}"
        self.done = ok
        return ok, value

    def close(self) -> None:
        """End the child: at once unless it has just finished (it is exiting then). SIGTERM
        first (a file half-written is removed); a child not gone 0.2 s later (one still in
        its start, with the handlers it inherited) gets SIGKILL."""
        if self.proc is not None:
            self.conn.close()
            self.proc.join(0.5 if self.done else 0.0)
            if self.proc.is_alive():
                self.proc.terminate()
                self.proc.join(0.2)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(1.0)
            self.proc = None

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _child(conn, parent: int, warm, work) -> None:
    import signal
    import sys

    from .experiments.workers import _worker_init

    _worker_init(parent)
    # A stop while a file is being written removes its temporary file (atomic_write).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if warm is not None:
        try:
            warm()
        except Exception:  # the call's own import says what is wrong
            pass
    if work is None:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):
            return
        work = lambda: fn(*args)  # noqa: E731
    try:
        out = work()
    except Exception as e:
        conn.send((False, f"{type(e).__name__}: {e}"))
        return
    conn.send((True, out))
