"""The ``afxdp`` path: a user-space forwarder between two AF_XDP sockets (copy mode).

``pktsim-tb xskfwd`` runs on the dut CPU: an XDP program on the dut's ingress veth
redirects every frame to an AF_XDP socket (veth's NAPI thread copies it into the socket's
umem and, at the end of its poll, wakes the forwarder); the forwarder takes up to B frames
from the rx ring, copies them into the egress socket's umem and sends them with
``sendto`` (copy mode: ``xsk_generic_xmit`` builds an skb per frame and transmits it
through the egress veth, at most 32 per call), then sleeps in ``poll`` when the ring is
empty. It runs at a real-time priority above the NAPI thread's, so that once woken it
empties the ring before the thread polls again.

For each batch size B in 1, 2, 4, ..., 256 the dut is overloaded (the generator flat out)
and its CPU per frame (NAPI thread + forwarder) and forwarding rate measured. The model
is the batching law of the seed paper on batching, ``CPU per frame = t_frame + t_call /
b``, with ``b`` the frames a system call moved: B, up to the 64 frames a NAPI poll
delivers before the forwarder runs, and at most 32 per ``sendto``. It is fitted at two
batch sizes (1 and 32, the ends of the range where a batch is one call) and held at the
other seven; overloaded, the dut forwards ``1 / (CPU per frame)``.

A busy-polling forwarder is not part of this path: an AF_XDP socket on veth learns no NAPI
id (``SO_INCOMING_NAPI_ID`` is 0 on this kernel), so ``recvfrom`` with
``SO_PREFER_BUSY_POLL`` cannot run veth's NAPI, and a forwarder spinning on its ring
competes with the NAPI thread for the one dut CPU (measured: the thread took 95% of it and
the forwarder moved 6-19 kpps of 630-700 kpps received). ``pktsim-tb xskfwd --mode busy``
is there for devices whose NAPI it can run.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from ..reproduce.rows import row, summary
from . import runner
from .topology import DUT, DUT_IN, DUT_OUT, TestbedError, Topology, child_env

NAME = "afxdp"
TITLE = "User-space forwarding between two AF_XDP sockets (copy mode) over veth, measured on this machine"
SOURCE = "testbed"
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
QUICK_BATCHES = (1, 4, 16)
# The law's calibration: the ends of the range where one batch is one sendto (copy-mode
# transmit sends at most 32 frames a call, TX_BATCH_SIZE), for the most leverage on t_call.
FIT_BATCHES = (1, 32)
# The XSK program's cost dial (turns of its empty loop per frame): the dut must be slower
# than the generator for every batch size.
DEFAULT_LOOPS = 3000
# The sleeping forwarder's real-time priority: above the NAPI thread's.
SLEEP_PRIORITY = 60


@contextmanager
def forwarder(topo: Topology, batch: int, mode: str, seconds: float, loops: int = 0):
    """``pktsim-tb xskfwd`` on the dut CPU for at most ``seconds``; yields its PID, then
    stops it (SIGTERM) and sets ``.result`` on the returned holder to its JSON report."""
    holder = type("Forwarder", (), {})()
    ready = Path(topo.tmp or "/tmp") / f"xskfwd-{batch}-{mode}-ready"
    # Sleeping, the forwarder runs above the NAPI thread (SCHED_FIFO): woken by the poll's
    # xsk_flush it empties the ring before the thread polls again (below it, the thread
    # would fill the ring and drop for as long as frames come).
    prio = ["chrt", "-f", str(SLEEP_PRIORITY)] if mode == "sleep" else []
    proc = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            DUT,
            *prio,
            runner.tb_binary(),
            "xskfwd",
            "--in",
            DUT_IN,
            "--out",
            DUT_OUT,
            "--batch",
            str(batch),
            "--mode",
            mode,
            "--duration-ms",
            str(int(seconds * 1000)),
            "--loops",
            str(loops),
            "--cpu",
            str(topo.placement.dut_cpu),
            "--ready-file",
            str(ready),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    topo._holders.append(proc)
    try:
        deadline = time.monotonic() + 5
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                if proc.poll() is None:
                    proc.kill()
                raise TestbedError(
                    f"pktsim-tb xskfwd did not start: {proc.communicate()[1].strip() or 'no answer within 5 s'} (AF_XDP on veth needs Linux 5.9 or later)"
                )
            time.sleep(0.01)
        holder.pid = proc.pid
        yield holder
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        topo._holders.remove(proc)
        try:
            holder.result = json.loads(out) if out.strip() else None
        except ValueError:
            holder.result = None
        if proc.returncode not in (0, -signal.SIGTERM) and holder.result is None:
            raise TestbedError(f"pktsim-tb xskfwd failed (exit {proc.returncode}): {err.strip()}")


def measure(topo: Topology, quick: bool, duration_s: float, reps: int, progress=None) -> dict:
    """The dut overloaded (the generator flat out) with the sleeping forwarder at each
    batch size (in :func:`interleaved` order): one forwarder per batch size, ``reps`` runs
    of ``duration_s``."""
    batches = interleaved(QUICK_BATCHES if quick else BATCHES)
    topo.set_deferral(0, 0)
    points = []
    for i, b in enumerate(batches):
        if progress:
            progress(i, len(batches), f"batch {b}, generator flat out")
        runs = []
        with forwarder(topo, b, "sleep", reps * (duration_s + 3) + 10, loops=topo.xdp_loops) as fwd:
            for k in range(reps):
                runs.append(runner.measure(topo, None, duration_s, run_id=100 * (i + 1) + k, app_pid=fwd.pid))
        r = runner.summarize(runs, None, duration_s)
        f = fwd.result or {}
        r.update(
            batch=b,
            mode="sleep",
            forwarder=f,
            frames_per_batch=f.get("frames_per_batch"),
            app_share=sum(x["counts"]["app_runtime_ns"] for x in runs)
            / max(1, sum(x["counts"]["napi_runtime_ns"] + x["counts"]["app_runtime_ns"] for x in runs)),
        )
        points.append(r)
    return {"points": points, "loops": topo.xdp_loops}


def interleaved(batches: tuple[int, ...]) -> list[int]:
    """Smallest, largest, second smallest, ...: a drift of the dut's speed over the sweep
    (this VM's slows by up to 17% within minutes) does not line up with the batch size."""
    s = sorted(batches)
    return [s[i // 2] if i % 2 == 0 else s[-1 - i // 2] for i in range(len(s))]


def frames_per_call(p: dict) -> float | None:
    """Frames per transmit system call, as the forwarder counted them: the batch's frames,
    or 32 of them per ``sendto`` beyond 32 (copy mode's TX_BATCH_SIZE)."""
    f = p.get("forwarder") or {}
    if f.get("tx_calls"):
        return f["forwarded"] / f["tx_calls"]
    return p.get("frames_per_batch")


def law(points: list[dict]) -> dict:
    """``t_frame`` and ``t_call`` (ns) of ``CPU per frame = t_frame + t_call / b`` from the
    two points (b: the frames a system call moved, :func:`frames_per_call`)."""
    (b1, c1), (b2, c2) = [(frames_per_call(p), p["dut_ns_per_packet"]) for p in points]
    if not b1 or not b2 or abs(1 / b1 - 1 / b2) < 1e-9:
        raise TestbedError("the two calibration batch sizes moved the same number of frames per batch: nothing to fit")
    t_call = (c1 - c2) / (1 / b1 - 1 / b2)
    return {"t_frame_ns": c1 - t_call / b1, "t_call_ns": t_call, "from_batches": [p["batch"] for p in points]}


def compare(sw: dict) -> dict:
    pts = sorted(sw["points"], key=lambda p: p["batch"])
    usable = [p for p in pts if p["dut_ns_per_packet"] and frames_per_call(p)]
    fit_pts = [p for p in usable if p["batch"] in FIT_BATCHES]
    if len(fit_pts) < 2:
        fit_pts = [usable[0], usable[len(usable) // 2]] if len(usable) >= 2 else []
    if len(fit_pts) < 2:
        raise TestbedError("fewer than two batch sizes forwarded anything: nothing to calibrate from")
    cal = law(fit_pts)
    rows, preds = [], []
    for p in pts:
        b = frames_per_call(p)
        c = cal["t_frame_ns"] + cal["t_call_ns"] / b if b else None
        fit = {"fitted": True} if any(p is q for q in fit_pts) else {}
        tag = f"batch {p['batch']} ({p['frames_per_batch']:.1f} frames per batch, {b:.1f} per call)" if b else f"batch {p['batch']}"
        rows.append(row(f"dut CPU per frame, {tag}", p["dut_ns_per_packet"], c, "ns", SOURCE, **fit))
        # Overloaded, the dut CPU is busy all the time: it forwards 1 / (CPU per frame)
        # (derived where that CPU per frame was fitted).
        rows.append(row(f"forwarded, {tag}", p["forwarded_pps"] / 1e3, 1e6 / c if c else None, "kpps", SOURCE, kind="derived" if fit else None))
        preds.append(
            {
                "batch": p["batch"],
                "frames_per_batch": p["frames_per_batch"],
                "frames_per_call": b,
                "dut_ns_per_packet": c,
                "forwarded_pps": 1e9 / c if c else None,
            }
        )
    return {"rows": rows, "summary": summary(rows), "calibration": cal, "predictions": preds}


def describe(res: dict) -> str:
    c = res["calibration"]
    return (
        f"the law CPU per frame = t_frame + t_call / b fitted at batch {c['from_batches'][0]} and {c['from_batches'][1]}: "
        f"t_frame {c['t_frame_ns']:.0f} ns, t_call {c['t_call_ns']:.0f} ns; the other batch sizes are predicted"
    )
