"""Runs on the testbed: one measurement, repetitions with their spread, a load sweep."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import counters
from .topology import DST_BASE, DUT, DUT_IN, DUT_OUT, GEN, GEN_IF, GEN_IP, SINK, SINK_IF, TestbedError, Topology, child_env, die_with_parent, tb_binary

FRAME_BYTES = 74  # Ethernet frame without FCS: UDP/IPv4 with the 32-byte probe payload (78 B on a wire)
MAX_DURATION_S = 60.0
MAX_RATE_PPS = 5e6
SINK_IDLE_MS = 300
# The sink reads at real-time priority so that it is not queued behind the spinning
# generator on their shared CPU (below the dut NAPI thread's priority).
SINK_PRIORITY = 10
PERCENTILES = ("p50", "p90", "p99", "p999")
# Time perf needs before it counts: runs start this much later, so no poll is missed.
PERF_START_S = 0.3
# Foreign load (CPUs) above which a run is reported as disturbed.
FOREIGN_WARN = 0.05
# Figures averaged over repetitions (their spread is reported too).
NUMERIC = (
    "offered_pps",
    "forwarded_pps",
    "ingress_drop_pps",
    "loss_ratio",
    "dut_ns_per_packet",
    "dut_utilization",
    "packets_per_wakeup",
    "packets_per_poll",
    "foreign_cpu",
)


def _json_out(proc: subprocess.Popen, what: str, timeout: float) -> dict:
    import json

    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise TestbedError(f"{what} did not finish within {timeout:.0f} s: {err.strip()}") from None
    if proc.returncode != 0:
        raise TestbedError(f"{what} failed (exit {proc.returncode}): {err.strip()}")
    try:
        return json.loads(out)
    except ValueError:
        raise TestbedError(f"{what} printed no result: {out[:200]!r} {err.strip()}") from None


def _perf_polls(cpu: int, seconds: float) -> subprocess.Popen | None:
    """Count napi:napi_poll on the dut CPU for the run (None where perf cannot)."""
    if shutil.which("perf") is None:
        return None
    # --timeout rather than a `sleep` workload: no grandchild to outlive perf. perf dies
    # with this process (a killed run leaves no perf counting on).
    return subprocess.Popen(
        ["perf", "stat", "-x", ",", "-e", "napi:napi_poll", "-C", str(cpu), "--timeout", str(max(10, round(seconds * 1000)))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        preexec_fn=die_with_parent(os.getpid()),
    )


# The dut CPU's call stacks for `--perf-record`: software cpu-clock (what a VM has), one
# sample every this many ns of the CPU's time, so each sample weighs its period in ns.
PERF_RECORD_PERIOD_NS = 500_000


def _perf_record(cpu: int, data: Path) -> subprocess.Popen:
    """Sample ``cpu``'s call stacks into ``data`` until stopped (SIGINT)."""
    if shutil.which("perf") is None:
        raise TestbedError("--perf-record: perf is not installed (apt-get install linux-perf, or linux-tools-$(uname -r))")
    argv = ["perf", "record", "--quiet", "-e", "cpu-clock", "-c", str(PERF_RECORD_PERIOD_NS), "-g", "-C", str(cpu), "-o", str(data)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=child_env(), preexec_fn=die_with_parent(os.getpid()))


def _perf_record_stop(proc: subprocess.Popen, data: Path) -> None:
    """Stop ``proc`` (its samples written to ``data``)."""
    import signal

    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise TestbedError("--perf-record: perf record did not stop within 30 s") from None
    if proc.returncode not in (0, -signal.SIGINT) or not data.exists():
        raise TestbedError(f"--perf-record: perf record failed: {err.strip()[-300:] or f'exit {proc.returncode}'}")


def _perf_script(data: Path, out: str) -> dict:
    """``perf script``'s text of the samples in ``data``, written to ``out`` (gzip when it
    ends in .gz): the file and its samples."""
    import gzip

    from ..textio import atomic_write

    script = subprocess.run(["perf", "script", "-i", str(data)], capture_output=True, text=True, env=child_env(), timeout=120)
    if script.returncode != 0:
        raise TestbedError(f"--perf-record: perf script failed: {script.stderr.strip()[-300:]}")
    text = script.stdout
    atomic_write(out, gzip.compress(text.encode(), mtime=0) if out.endswith(".gz") else text)
    return {"file": out, "samples": text.count(" cpu-clock"), "period_ns": PERF_RECORD_PERIOD_NS, "cpu_hz": _cpu_hz()}


def _cpu_hz() -> float | None:
    """The clock /proc/cpuinfo gives the first CPU (``cpu MHz``), or None."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return float(line.split(":", 1)[1]) * 1e6
    except (OSError, ValueError, IndexError):
        pass
    return None


def _perf_count(proc: subprocess.Popen | None) -> int | None:
    """The polls perf counted, stopped now (SIGINT: it prints its counts and disables the
    tracepoint) rather than at its timeout, which only bounds it: the run is over."""
    if proc is None:
        return None
    if proc.poll() is None:
        import signal

        proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=MAX_DURATION_S + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return None
    for line in err.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[2] == "napi:napi_poll" and parts[0].strip().isdigit():
            return int(parts[0])
    return None


def check(rate_pps: float | None, duration_s: float, reps: int = 1, points: int | None = None) -> None:
    """The bounds of a run, checked before anything is built."""
    if not 0.05 <= duration_s <= MAX_DURATION_S:
        raise TestbedError(f"--duration {duration_s:g}s: expected from 50ms to {MAX_DURATION_S:g}s")
    if rate_pps is not None and not 0 < rate_pps <= MAX_RATE_PPS:
        raise TestbedError(f"--rate {rate_pps:g}pps: expected above 0 and at most {MAX_RATE_PPS / 1e6:g}Mpps")
    if not 1 <= reps <= 20:
        raise TestbedError(f"--repetitions {reps}: expected from 1 to 20 runs per load")
    if points is not None and not 2 <= points <= 50:
        raise TestbedError(f"--points {points}: expected from 2 to 50 loads")


def measure(topo: Topology, rate_pps: float | None, duration_s: float, run_id: int = 1, app_pid: int | None = None, perf_record: str | None = None) -> dict:
    """One run: offered open-loop CBR at ``rate_pps`` (None: as fast as the generator can).
    ``app_pid``: a user-space forwarder on the dut CPU, whose CPU time counts as the dut's.
    ``perf_record``: the dut CPU's call stacks over the generator's run, written there as
    ``perf script`` text (result: ``perf_record``, with the frames forwarded meanwhile)."""
    check(rate_pps, duration_s)
    tb = tb_binary()
    p = topo.placement
    devs = {"gen": (GEN, GEN_IF), "dut_in": (DUT, DUT_IN), "dut_out": (DUT, DUT_OUT), "sink": (SINK, SINK_IF)}
    count = int(rate_pps * duration_s) if rate_pps else int(MAX_RATE_PPS * duration_s)
    dur_ms = int(duration_s * 1000)
    # Inside the run's directory (topo.tmp), which the lock names, so a killed run's
    # files are found and removed by the next run or `pktsim testbed teardown`.
    with tempfile.TemporaryDirectory(prefix="measure-" if topo.tmp else "pktsim-tb-", dir=topo.tmp) as tmp:
        ready = Path(tmp) / "sink-ready"
        before = counters.Snapshot.take(topo.napi_pid, devs, app_pid)
        perf = _perf_polls(p.dut_cpu, duration_s + PERF_START_S + 1.0)
        procs: list[subprocess.Popen] = [x for x in (perf,) if x]
        if perf:
            time.sleep(PERF_START_S)  # perf counts only once it has set up its counters
        try:
            sink = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    SINK,
                    "chrt",
                    "-f",
                    str(SINK_PRIORITY),
                    tb,
                    "sink",
                    "--iface",
                    SINK_IF,
                    "--duration-ms",
                    str(dur_ms + 5000),
                    "--idle-ms",
                    str(SINK_IDLE_MS),
                    "--cpu",
                    str(p.load_cpu),
                    "--run-id",
                    str(run_id),
                    "--ready-file",
                    str(ready),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=child_env(),
            )
            procs.append(sink)
            deadline = time.monotonic() + 5
            while not ready.exists():
                if sink.poll() is not None or time.monotonic() > deadline:
                    _json_out(sink, "pktsim-tb sink", 1)
                    raise TestbedError("pktsim-tb sink did not get ready within 5 s")
                time.sleep(0.01)
            recording = _perf_record(p.dut_cpu, Path(tmp) / "perf.data") if perf_record else None
            if recording:
                procs.append(recording)
                time.sleep(PERF_START_S)  # perf samples only once it has set up
                fwd_before = counters.Snapshot.take(topo.napi_pid, devs, app_pid).devs["dut_out"]["tx_packets"]
            gen = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    GEN,
                    tb,
                    "gen",
                    "--iface",
                    GEN_IF,
                    "--dst-mac",
                    topo.dut_mac,
                    "--src-ip",
                    GEN_IP,
                    "--dst-ip",
                    str(DST_BASE),
                    "--dst-count",
                    str(topo.destinations),
                    "--rate",
                    f"{rate_pps:.3f}" if rate_pps else "max",
                    "--count",
                    str(max(1, count)),
                    "--duration-ms",
                    str(dur_ms),
                    "--size",
                    str(FRAME_BYTES),
                    "--cpu",
                    str(p.load_cpu),
                    "--run-id",
                    str(run_id),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=child_env(),
            )
            procs.append(gen)
            g = _json_out(gen, "pktsim-tb gen", duration_s + 10)
            if recording:
                time.sleep(0.05)  # the last frames through the dut
                fwd = counters.Snapshot.take(topo.napi_pid, devs, app_pid).devs["dut_out"]["tx_packets"] - fwd_before
                _perf_record_stop(recording, Path(tmp) / "perf.data")
            s = _json_out(sink, "pktsim-tb sink", 15)
            polls = _perf_count(perf)
            after = counters.Snapshot.take(topo.napi_pid, devs, app_pid)
            if recording:  # (after the counters: perf script's own CPU time is not the run's)
                recorded = {**_perf_script(Path(tmp) / "perf.data", perf_record), "forwarded": fwd}
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    ours = {os.getpid(), gen.pid, sink.pid, topo.napi_pid} | {x.pid for x in (perf, recording) if x} | ({app_pid} if app_pid else set())
    out = _figures(g, s, before, after, polls, ours, rate_pps)
    if perf_record:
        out["perf_record"] = recorded
    return out


def _figures(g: dict, s: dict, before, after, polls, ours: set[int], rate_pps) -> dict:
    d = {k: {c: after.devs[k][c] - before.devs[k][c] for c in after.devs[k]} for k in after.devs}
    window_s = max(g["elapsed_ns"], 1) / 1e9
    forwarded = d["dut_out"]["tx_packets"]
    dut_rx = d["dut_in"]["rx_packets"]
    # Frames offered that never entered the dut: refused by the full ring (the send
    # failed), or dropped by either veth.
    drops = max(0, g["offered"] - dut_rx)
    app_ns = after.app_ns - before.app_ns
    napi_ns = after.napi_ns - before.napi_ns + app_ns
    wakeups = after.napi_wakeups - before.napi_wakeups
    foreign_cpu, foreign_top = counters.foreign(before, after, ours)
    span = max(1, after.t_ns - before.t_ns)
    lat = s.get("latency_kernel_ns") or {}
    app = s.get("latency_app_ns") or {}
    return {
        "rate_pps": rate_pps,
        "offered_pps": g["offered"] / window_s,
        "forwarded_pps": forwarded / window_s,
        "ingress_drop_pps": drops / window_s,
        "loss_ratio": 1 - forwarded / g["offered"] if g["offered"] else 0.0,
        "dut_ns_per_packet": napi_ns / forwarded if forwarded else None,
        "dut_utilization": napi_ns / (window_s * 1e9),
        "packets_per_wakeup": forwarded / wakeups if wakeups else None,
        "packets_per_poll": dut_rx / polls if polls else None,
        "latency_ns": {q: lat.get(q) for q in PERCENTILES},
        "latency_app_ns": {q: app.get(q) for q in PERCENTILES},
        "foreign_cpu": foreign_cpu,
        "foreign_top": [{"task": c, "cpu": v} for c, v in foreign_top],
        "cpu_busy": [(b - a) / span for a, b in zip(before.cpus, after.cpus)],
        "counts": {
            "offered": g["offered"],
            "sent": g["sent"],
            "refused": g["refused"],
            "dut_rx": dut_rx,
            "forwarded": forwarded,
            "sink_received": s["received"],
            "napi_runtime_ns": napi_ns - app_ns,
            "app_runtime_ns": app_ns,
            "napi_wakeups": wakeups,
            "napi_polls": polls,
            "window_ns": g["elapsed_ns"],
        },
        "generator_max_late_ns": g.get("max_late_ns"),
        "generator_batch_sizes": g.get("batch_sizes"),
        "generator_frames_per_batch": (g["sent"] + g["refused"]) / g["batches"] if g.get("batches") else None,
        # Each kind of stall (short, long): its rate and the quantiles of its lengths.
        "generator_stalls": [{"rate_hz": k["count"] / window_s, "length_ns": k["length_ns"]} for k in g.get("stalls") or []],
    }


def repeat(topo: Topology, rate_pps: float | None, duration_s: float, reps: int = 3, run_id: int = 1, perf_record: str | None = None) -> dict:
    """``reps`` runs at one rate: their mean for each figure, the spread (min, max, relative
    standard deviation) and every run; ``perf_record``: the first run's dut CPU profiled
    (:func:`measure`)."""
    check(rate_pps, duration_s, reps)
    runs = [measure(topo, rate_pps, duration_s, run_id + i, **({"perf_record": perf_record} if perf_record and i == 0 else {})) for i in range(reps)]
    out = summarize(runs, rate_pps, duration_s)
    if perf_record:
        out["perf_record"] = runs[0]["perf_record"]
    return out


def summarize(runs: list[dict], rate_pps: float | None, duration_s: float) -> dict:
    """Runs at one setting: their mean for each figure, the spread and every run (with a
    warning for each run other tasks disturbed)."""
    reps = len(runs)
    for r in runs:
        if r["foreign_cpu"] > FOREIGN_WARN:
            top = ", ".join(f"{t['task']} {100 * t['cpu']:.0f}%" for t in r["foreign_top"])
            print(
                f"pktsim testbed: warning: other tasks used {100 * r['foreign_cpu']:.0f}% of a CPU during a run at "
                f"{r['offered_pps'] / 1e3:.1f} kpps ({top}): its figures are disturbed",
                file=sys.stderr,
            )
    out = {"rate_pps": rate_pps, "duration_s": duration_s, "repetitions": reps}
    spread = {}
    for k in NUMERIC:
        vals = [r[k] for r in runs if r[k] is not None]
        out[k] = statistics.fmean(vals) if vals else None
        if vals:
            mean = statistics.fmean(vals)
            sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
            spread[k] = {"min": min(vals), "max": max(vals), "rel_sd": sd / mean if mean else 0.0}
    for key in ("latency_ns", "latency_app_ns"):
        out[key] = {}
        for q in PERCENTILES:
            vals = [r[key][q] for r in runs if r[key][q] is not None]
            out[key][q] = statistics.median(vals) if vals else None
            if vals:
                spread[f"{key}.{q}"] = {"min": min(vals), "max": max(vals)}
    out["spread"] = spread
    out["stalls"] = stalls(runs)
    out["runs"] = runs
    return out


def stalls(runs: list[dict]) -> list[dict] | None:
    """The generator's stalls over the runs (``pktsim-tb gen``: each time its pacing loop
    was away from the clock for 2 us or more, and how long), by kind (short, then long from 100 us):
    each kind's mean rate and the mean of each quantile of its lengths over the runs that
    had it (None when no run reports them)."""
    reports = [r["generator_stalls"] for r in runs if r.get("generator_stalls")]
    if not reports:
        return None
    out = []
    for k in range(max(len(r) for r in reports)):
        kinds = [r[k] for r in reports if k < len(r)]
        with_q = [x["length_ns"] for x in kinds if x["length_ns"]]
        n = min((len(q) for q in with_q), default=0)
        out.append(
            {
                "rate_hz": statistics.fmean(x["rate_hz"] for x in kinds),
                "length_ns": [statistics.fmean(q[i] for q in with_q) for i in range(n)],
            }
        )
    return out


def parse_sweep(text: str) -> tuple[float, float]:
    """``10%:120%`` -> (0.10, 1.20), fractions of the measured capacity."""
    try:
        lo, hi = (float(x.strip().rstrip("%")) / 100 for x in text.split(":"))
    except ValueError:
        raise TestbedError(f"--sweep {text!r}: expected LOW%:HIGH% of the measured capacity, e.g. 10%:120%") from None
    if not (0 < lo < hi <= 3):
        raise TestbedError(f"--sweep {text!r}: expected 0% < LOW < HIGH <= 300%")
    return lo, hi


# Overload run before the capacity probe, its figures discarded: the first second of
# traffic through a new topology is slower (the XDP path's first run forwarded 111 kpps at
# 9.0 us per frame where later overloaded runs forwarded 125 kpps at 7.0 us).
WARMUP_S = 0.5


def capacity(topo: Topology, duration_s: float = 1.0) -> dict:
    """The dut's saturation rate: offer as much as the generator can and count what leaves
    (after a discarded warm-up run)."""
    measure(topo, None, WARMUP_S, run_id=998)
    return measure(topo, None, duration_s, run_id=999)


def sweep(topo: Topology, lo: float, hi: float, points: int, duration_s: float, reps: int, progress=None) -> dict:
    check(None, duration_s, reps, points)
    cap = capacity(topo)
    cap_pps = cap["forwarded_pps"]
    if cap["ingress_drop_pps"] < 0.02 * cap["offered_pps"]:
        print(
            f"pktsim testbed: warning: the generator could not overload the dut ({cap['offered_pps'] / 1e3:.0f} kpps offered, "
            "no ingress drops): raise --rules so that the dut, not the generator, is the bottleneck",
            file=sys.stderr,
        )
    fracs = [lo + (hi - lo) * i / (points - 1) for i in range(points)]
    out = []
    for i, f in enumerate(fracs):
        if progress:
            progress(i, len(fracs), f"{100 * f:.0f}% load: {f * cap_pps / 1e3:.1f} kpps")
        r = repeat(topo, f * cap_pps, duration_s, reps, run_id=10 * (i + 1))
        r["load"] = f
        out.append(r)
    return {"capacity_pps": cap_pps, "capacity_probe": cap, "points": out}
