"""``pktsim observe``: a host's operating point, read-only, over a window, in the keys and
units of ``pktsim run --json``, each figure saying where it came from.

It reads only what the kernel already exposes (:mod:`.sources`): nothing is set, nothing
is loaded, no tracepoint is enabled; a source that is missing is named and the figures it
would give are left out. Its own CPU time is measured and reported (``overhead``).

>>> op = pktsim.observe.observe(["eth0"], duration_s=5.0)  # doctest: +SKIP
>>> op["received_pps"], op["irqs_per_packet"], op["softirq_ns_per_packet"]  # doctest: +SKIP
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from . import hostknobs, polls
from .sources import DROP_COUNTER, POLL_COUNTER, ObserveError, Snapshot, napi_thread_prefix, napi_threads, sysctls, take

__all__ = ["observe", "point", "ObserveError"]

# The longest window (a typo's 10h is refused), and the shortest.
MAX_DURATION_S = 3600.0
MIN_DURATION_S = 0.05


def _clk_tck() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError):
        return 100


def _delta(a: dict, b: dict) -> dict:
    return {k: b[k] - a.get(k, 0) for k in b}


def point(a: Snapshot, b: Snapshot, ifaces: Sequence[str], clk_tck: int | None = None) -> dict:
    """The operating point between two snapshots (rates per second over the window)."""
    hz = clk_tck or _clk_tck()
    w = max(b.t_ns - a.t_ns, 1) / 1e9
    src = {}
    per_if = {}
    rx = tx = ring_full = rx_dropped = 0.0
    irqs = 0.0
    # The CPUs that handle the interfaces: where their vectors fired and their NAPI threads ran.
    # (A thread's CPU at the end: it has run in the window, where at its start it may not have
    # run since it was moved.)
    handling: set[int] = {t[2] for i in ifaces for t in b.threads.get(i, {}).values()}
    for i in ifaces:
        d = _delta(a.netdev[i], b.netdev[i])
        vec = {name: sum(c) - sum(a.vectors.get(i, {}).get(name, [0])) for name, c in b.vectors.get(i, {}).items()}
        for name, c in b.vectors.get(i, {}).items():
            was = a.vectors.get(i, {}).get(name, [0] * len(c))
            handling |= {k for k, (x, y) in enumerate(zip(was, c)) if y > x}
        entry = {
            "rx_pps": d["rx_packets"] / w,
            "tx_pps": d.get("tx_packets", 0) / w,
            "rx_bps": 8 * d.get("rx_bytes", 0) / w,
            "mean_frame_bytes": d.get("rx_bytes", 0) / d["rx_packets"] if d["rx_packets"] else None,
            "drops_per_s": {k: d[k] / w for k in ("rx_dropped", "rx_missed_errors", "rx_fifo_errors", "tx_dropped") if k in d},
            "irq_per_s": sum(vec.values()) / w,
            "vectors": sorted(vec),
        }
        per_if[i] = entry
        rx += entry["rx_pps"]
        tx += entry["tx_pps"]
        ring_full += (d.get("rx_missed_errors", 0) + d.get("rx_fifo_errors", 0)) / w
        rx_dropped += d.get("rx_dropped", 0) / w
        irqs += entry["irq_per_s"]
    where = ", ".join(f"/sys/class/net/{i}/statistics" for i in ifaces)
    out: dict = {"window_s": w, "interfaces": per_if}
    out["received_pps"] = rx
    out["transmitted_pps"] = tx
    out["offered_pps"] = rx + ring_full
    src.update(received_pps=f"rx_packets of {where}", transmitted_pps=f"tx_packets of {where}")
    src["offered_pps"] = "received + rx_missed_errors + rx_fifo_errors (frames the NIC had no descriptor for)"
    drops = {"rx_ring_full": ring_full, "rx_dropped": rx_dropped}
    src["drops.rx_ring_full"] = "rx_missed_errors + rx_fifo_errors per second"
    src["drops.rx_dropped"] = "rx_dropped per second (the stack's drops the driver counts)"
    if any(b.vectors.get(i) for i in ifaces):
        out["irq_per_s"] = irqs
        out["irqs_per_packet"] = irqs / rx if rx else None
        src["irq_per_s"] = "/proc/interrupts, the interfaces' vectors: " + ", ".join(v for i in ifaces for v in per_if[i]["vectors"])
    if b.softnet and a.softnet:
        d = [_delta(x, y) for x, y in zip(a.softnet, b.softnet)]
        drops["backlog"] = sum(c["dropped"] for c in d) / w
        out["processed_pps"] = sum(c["processed"] for c in d) / w
        out["time_squeeze"] = sum(c["time_squeeze"] for c in d)
        out["time_squeeze_per_s"] = out["time_squeeze"] / w
        out["processed_pps_per_cpu"] = [c["processed"] / w for c in d]
        src.update(
            {
                "drops.backlog": "/proc/net/softnet_stat, dropped (the backlog was full)",
                "processed_pps": "/proc/net/softnet_stat, processed (every CPU, every device)",
                "time_squeeze": "/proc/net/softnet_stat, time_squeeze (a NET_RX round out of budget or time)",
            }
        )
    if b.softirqs and a.softirqs:
        net_rx = [y - x for x, y in zip(a.softirqs["NET_RX"], b.softirqs["NET_RX"])]
        on = [k for k in sorted(handling) if k < len(net_rx)] or list(range(len(net_rx)))
        out["softirqs_per_s"] = sum(net_rx[k] for k in on) / w
        out["softirqs_per_packet"] = out["softirqs_per_s"] / rx if rx else None
        which = f"CPUs {', '.join(map(str, on))}, those that handle the interfaces" if handling else "every CPU"
        src["softirqs_per_s"] = f"/proc/softirqs, NET_RX ({which})"
    if b.stat and a.stat:
        d = [_delta(x, y) for x, y in zip(a.stat, b.stat)]
        cores = len(d)
        total = [sum(c.values()) for c in d]
        out["cpu_per_core"] = [1 - (c["idle"] + c["iowait"]) / t if t else 0.0 for c, t in zip(d, total)]
        total = [max(1, t) for t in total]
        out["cpu_utilization"] = sum(out["cpu_per_core"]) / cores
        out["cpu_by_context"] = {
            "hardirq": sum(c["irq"] for c in d) / sum(total),
            "softirq": sum(c["softirq"] for c in d) / sum(total),
            "system": sum(c["system"] for c in d) / sum(total),
            "user": sum(c["user"] + c["nice"] for c in d) / sum(total),
        }
        cpus = sorted(k for k in handling if k < cores) or list(range(cores))
        soft_ns = sum(d[k]["softirq"] + d[k]["irq"] for k in cpus) * 1e9 / hz
        out["softirq_ns_per_packet"] = soft_ns / (rx * w) if rx else None
        out["hardirq_ns_per_packet"] = sum(d[k]["irq"] for k in cpus) * 1e9 / hz / (rx * w) if rx else None
        out["handling_cpus"] = cpus
        which = (
            f"CPUs {', '.join(map(str, cpus))} (where the interfaces' vectors fired and their NAPI threads ran)"
            if handling
            else "every CPU (no vector or NAPI thread of the interfaces says which handle them)"
        )
        src["cpu_by_context"] = f"/proc/stat (ticks of 1/{hz} s: a window of {w:.1f} s holds {w * hz:.0f} per CPU)"
        src["softirq_ns_per_packet"] = f"/proc/stat hard IRQ + softirq time of {which}, per frame received"
    if a.udp and b.udp:
        out["udp_datagrams_per_s"] = (b.udp.get("InDatagrams", 0) - a.udp.get("InDatagrams", 0)) / w
        drops["rcvbuf_errors"] = (b.udp.get("RcvbufErrors", 0) - a.udp.get("RcvbufErrors", 0)) / w
        src["udp_datagrams_per_s"] = "/proc/net/snmp, Udp InDatagrams (every socket of the namespace)"
        src["drops.rcvbuf_errors"] = "/proc/net/snmp, Udp RcvbufErrors per second (a datagram for a full socket)"
    _driver_counters(a, b, ifaces, w, out, per_if, src)
    _napi_threads(a, b, ifaces, w, rx, out, per_if, src)
    out["drops"] = drops
    out["loss_ratio"] = (ring_full + drops.get("backlog", 0.0)) / out["offered_pps"] if out["offered_pps"] else 0.0
    src["loss_ratio"] = "(ring full + backlog drops) / offered"
    out["sources"] = src
    out["missing"] = sorted(set(a.missing) | set(b.missing))
    return out


def _driver_counters(a: Snapshot, b: Snapshot, ifaces: Sequence[str], w: float, out: dict, per_if: dict, src: dict) -> None:
    """``ethtool -S``: every counter that moved, per second; those that count lost frames
    (``lost_per_s``); NAPI polls where the driver counts them (mlx5's ``chN_poll``)."""
    all_polls = 0.0
    counted = []
    for i in ifaces:
        if i not in b.ethtool or i not in a.ethtool:
            continue
        moved = {k: (v - a.ethtool[i].get(k, 0)) / w for k, v in b.ethtool[i].items() if v != a.ethtool[i].get(k, 0)}
        per_if[i]["ethtool_per_s"] = moved
        per_if[i]["lost_per_s"] = {k: v for k, v in moved.items() if DROP_COUNTER.search(k)}
        channel_polls = [v for k, v in moved.items() if POLL_COUNTER.match(k)]
        if any(POLL_COUNTER.match(k) for k in b.ethtool[i]):
            per_if[i]["polls_per_s"] = sum(channel_polls)
            all_polls += sum(channel_polls)
            counted.append(i)
    if any("ethtool_per_s" in per_if[i] for i in ifaces):
        src["interfaces.*.ethtool_per_s"] = "ethtool -S: the driver's counters that moved, per second"
        src["interfaces.*.lost_per_s"] = "ethtool -S: the driver's counters of lost frames (drop, discard, miss, buffer shortage, error), per second"
    if counted and len(counted) == len(ifaces):
        frames = out["received_pps"] * w
        out["polls_per_s"] = all_polls
        out["packets_per_poll"] = {"mean": frames / (all_polls * w) if all_polls else None}
        out["polls_per_packet"] = all_polls * w / frames if frames else None
        src["polls_per_s"] = "ethtool -S: the driver's NAPI polls per channel (chN_poll)"


def _napi_threads(a: Snapshot, b: Snapshot, ifaces: Sequence[str], w: float, rx: float, out: dict, per_if: dict, src: dict) -> None:
    """Threaded NAPI: the interfaces' NAPI threads' CPU time and wake-ups, per frame received."""
    ns = wakeups = 0
    found = False
    for i in ifaces:
        before, after = a.threads.get(i, {}), b.threads.get(i, {})
        both = [pid for pid in after if pid in before]
        if not both:
            continue
        found = True
        i_ns = sum(after[p][0] - before[p][0] for p in both)
        i_wake = sum(after[p][1] - before[p][1] for p in both)
        per_if[i]["napi_threads"] = {"threads": len(both), "cpu": i_ns / (w * 1e9), "wakeups_per_s": i_wake / w}
        ns += i_ns
        wakeups += i_wake
    if not found:
        return
    frames = rx * w
    out["napi_thread_cpu"] = ns / (w * 1e9)
    out["wakeups_per_s"] = wakeups / w
    out["wakeups_per_packet"] = wakeups / frames if frames else None
    out["napi_thread_ns_per_packet"] = ns / frames if frames else None
    names = ", ".join(f"{napi_thread_prefix(i)}*" for i in ifaces)
    src["napi_thread_ns_per_packet"] = f"/proc/PID/schedstat of the NAPI threads ({names}): CPU time (ns, exact) per frame received"
    src["wakeups_per_packet"] = (
        f"/proc/PID/status of the NAPI threads ({names}): voluntary context switches (each a sleep it was woken from) per frame received"
    )
    if out.get("hardirq_ns_per_packet") is not None and frames:
        # A threaded NAPI's receive work is its threads'; a softirq on their CPUs is mostly one
        # a thread ran on local_bh_enable (counted in its time already) or other work.
        out["cpu_ns_per_packet"] = out["hardirq_ns_per_packet"] + ns / frames
        src["cpu_ns_per_packet"] = (
            "the NAPI threads' CPU time plus /proc/stat's hard IRQ time of the CPUs that handle the interfaces, per frame received "
            "(not their softirq time: a softirq a thread runs counts in its time)"
        )


def observe(
    ifaces: Sequence[str],
    duration_s: float = 10.0,
    interval_s: float | None = None,
    root: str | Path = "/",
    progress: Callable[[str], None] | None = None,
    opened: Callable[[], None] | None = None,
) -> dict:
    """The operating point of ``ifaces`` over ``duration_s`` (and, with ``interval_s``, one
    per interval in ``series``). Raises :class:`ObserveError` for an unknown interface or
    a source that cannot be read as expected; KeyboardInterrupt stops it within a tenth
    of a second. ``opened`` is called once the window has opened (the knobs read, perf
    counting, the first snapshot taken)."""
    if not ifaces:
        raise ObserveError("no interface to observe; expected --iface NAME (see ip link)")
    if not MIN_DURATION_S <= duration_s <= MAX_DURATION_S:
        raise ObserveError(f"--duration {duration_s:g}s: expected {MIN_DURATION_S:g} s to {MAX_DURATION_S:g} s")
    if interval_s is not None and not MIN_DURATION_S <= interval_s <= duration_s:
        raise ObserveError(f"--interval {interval_s:g}s: expected {MIN_DURATION_S:g} s up to the duration ({duration_s:g} s)")
    r = Path(root)
    for i in ifaces:
        if not (r / "sys/class/net" / i).exists():
            have = ", ".join(sorted(p.name for p in (r / "sys/class/net").iterdir())) if (r / "sys/class/net").is_dir() else "none"
            raise ObserveError(f"--iface {i}: no such interface (have: {have})")
    own0 = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    live = str(r) == "/"
    threads = napi_threads(list(ifaces), r)
    knobs = hostknobs.read(list(ifaces)) if live else {}

    def snap() -> Snapshot:
        return take(list(ifaces), r, threads, ethtool=live)

    counting, why = polls.start(ifaces, duration_s) if live else (None, "")
    try:
        first = prev = snap()
        own_setup = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
        if opened:
            opened()
        series = []
        end = first.t_ns + int(duration_s * 1e9)
        step = int((interval_s or duration_s) * 1e9)
        nxt = first.t_ns + step
        last = first
        while True:
            now = time.monotonic_ns()
            if now >= min(nxt, end):
                last = snap()
                if interval_s:
                    p = point(prev, last, ifaces)
                    series.append({"t_s": (last.t_ns - first.t_ns) / 1e9, **{k: p.get(k) for k in SERIES_KEYS}})
                    if progress:
                        progress(f"{series[-1]['t_s']:.1f} s: {p['received_pps']:,.0f} frames/s received")
                prev = last
                nxt += step
                if last.t_ns >= end:
                    break
            # (Ctrl-C interrupts a sleep at once: the chunk only bounds a late wake-up.)
            time.sleep(min(0.5, max(0.0, (min(nxt, end) - time.monotonic_ns()) / 1e9)))
        n_polls = None
        if counting is not None:
            n_polls = counting.polls(first.t_ns, last.t_ns)
            why = "" if n_polls is not None else counting.why_not()
    finally:
        if counting is not None:
            counting.stop()  # (at once on Ctrl-C: the tracepoint is disabled as perf exits)
    own1 = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    out = point(first, last, ifaces)
    if n_polls is not None:
        total = sum(n_polls.values())
        out["polls_per_s"] = total / out["window_s"]
        frames = out["received_pps"] * out["window_s"]
        out["packets_per_poll"] = {"mean": frames / total if total else None}
        out["polls_per_packet"] = total / frames if frames else None
        for i in ifaces:
            out["interfaces"][i]["polls_per_s"] = n_polls[i] / out["window_s"]
        out["sources"]["polls_per_s"] = (
            f"perf stat -a -I {polls.INTERVAL_MS} -e napi:napi_poll, filtered by device, the intervals inside the window (counted, then disabled)"
        )
    elif why:
        out["missing"].append(why)

    # Its own CPU time and its children's (perf, when it counts polls).
    def used(a, b) -> float:
        return sum((y.ru_utime + y.ru_stime) - (x.ru_utime + x.ru_stime) for x, y in zip(a, b))

    cpu_s, setup_s = used(own0, own1), used(own0, own_setup)
    out["overhead"] = {
        "cpu_s": cpu_s,
        "share_of_one_cpu": cpu_s / out["window_s"],
        # Once, before the window: the knobs (ethtool, sysctl) and the first snapshot.
        "setup_cpu_s": setup_s,
        # While it watches: snapshots, perf's counting (its whole run), the rest.
        "watching_share_of_one_cpu": (cpu_s - setup_s) / out["window_s"],
    }
    out["sysctls"] = sysctls(r)
    if knobs:
        out["knobs"] = knobs
    if series:
        out["series"] = series
    return out


# The figures of each interval in ``series``.
SERIES_KEYS = ("received_pps", "transmitted_pps", "offered_pps", "irq_per_s", "softirqs_per_s", "time_squeeze", "cpu_utilization", "loss_ratio")


def load(path: str | Path) -> tuple[dict, dict]:
    """A saved observation (``pktsim observe -o``) and its row of measurements
    (:func:`as_data_row`); ObserveError ``PATH: why`` when it cannot be read as one."""
    import json

    from ..textio import InputFileError, read_input_text

    try:
        # A regular file of bounded size (a device such as /dev/zero is refused, not read).
        op = json.loads(read_input_text(path, "observation"))
        return op, as_data_row(op)
    except InputFileError as e:
        raise ObserveError(str(e)) from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ObserveError(f"{path}: not an observation of pktsim observe -o ({type(e).__name__}: {e})") from None


def as_data_row(op: dict) -> dict:
    """An observation as a row of measurements ``pktsim fit`` takes: the offered rate and
    frame size it saw, and its CPU per frame (:func:`cpu_ns`), interrupts, NAPI thread
    wake-ups, polls and softirqs per frame and loss where it has them."""
    row = {"traffic.rate": f"{op['offered_pps']:.3f}pps"}
    sizes = [i["mean_frame_bytes"] for i in op["interfaces"].values() if i.get("mean_frame_bytes")]
    if sizes:
        # The kernel counts a frame without its 4 B FCS; a scenario's size holds it.
        row["traffic.size"] = f"{round(sum(sizes) / len(sizes)) + 4}B"
    cpu = cpu_ns(op)
    if cpu is not None:
        row["cpu_per_frame"] = f"{cpu[0]:.1f}ns"
    for key in ("irqs_per_packet", "softirqs_per_packet", "wakeups_per_packet", "polls_per_packet"):
        if op.get(key) is not None:
            row[key] = f"{op[key]:.6g}"
    row["loss_ratio"] = f"{op['loss_ratio']:.6g}"
    return row


def compare(op: dict, scenario, source: str = "pktsim observe") -> dict:
    """The observation beside the model's run of ``scenario`` at the observed offered rate
    and frame size, with the knobs observed on the first interface (``knobs``: rings,
    coalescing, NAPI deferral and threads, budgets) that the scenario's I/O mode reads:
    ``rows`` of the ``reproduce`` contract (every one predicted: nothing was fitted to
    this observation), ``knobs`` applied and ``knobs_left_out`` with why."""
    from .. import sim
    from ..fitting.data import cpu_per_frame_ns, handled_pps, wakeups_per_packet
    from ..reproduce.rows import row

    knobs = next(iter((op.get("knobs") or {}).values()), {})
    scenario, applied, left = hostknobs.apply(scenario, knobs)
    out = {"knobs": [f"{k}={v}" for k, v in applied], "knobs_left_out": [f"{k}={v}: {why}" for k, v, why in left], "rows": []}
    if not op["offered_pps"] > 0:
        return out  # no traffic in the window: nothing to run the model at
    sets = {k: v for k, v in as_data_row(op).items() if k.startswith("traffic.")}
    r = sim.run(scenario, sets)
    rows = out["rows"]
    rows += [
        row("frames received", op["received_pps"], handled_pps(r), "pps", source),
        row("loss", 100 * op["loss_ratio"], 100 * r["loss_ratio"], "%", source),
    ]
    if op.get("irqs_per_packet") is not None:
        rows.append(row("interrupts per frame", op["irqs_per_packet"], r["irqs_per_packet"], "IRQs/frame", source))
    if op.get("wakeups_per_packet") is not None:
        rows.append(row("NAPI thread wake-ups per frame", op["wakeups_per_packet"], wakeups_per_packet(r), "wake-ups/frame", source))
    if (op.get("polls_per_packet")) is not None:
        rows.append(row("NAPI polls per frame", op["polls_per_packet"], r["polls_per_packet"], "polls/frame", source))
    if "rcvbuf_errors" in op.get("drops", {}) and r.get("offered_pps"):
        # (The model's drops are counts over its window: offered_packets / offered_pps.)
        window_s = r["offered_packets"] / r["offered_pps"]
        rows.append(row("RcvbufErrors", op["drops"]["rcvbuf_errors"], r["drops"].get("rcvbuf_errors", 0) / window_s, "1/s", source))
    if op.get("softirqs_per_packet") is not None:
        rows.append(row("NET_RX softirqs per frame", op["softirqs_per_packet"], r["softirqs_per_packet"], "softirqs/frame", source))
    cpu = cpu_ns(op)
    if cpu is not None:
        pred = cpu_per_frame_ns(r)
        rows.append(row(f"CPU per frame ({cpu[1]})", cpu[0] / 1e3, pred / 1e3 if pred else None, "us", source))
    if op.get("time_squeeze_per_s") is not None:
        sq = r["time_squeeze"] / r["sim_time_s"] if r.get("sim_time_s") else None
        rows.append(row("time squeezes", op["time_squeeze_per_s"], sq, "1/s", source))
    return out


def cpu_ns(op: dict) -> tuple[float, str] | None:
    """The observation's CPU time per frame (ns) and what it holds: the NAPI threads' and
    the interrupts' and softirqs' where there are threads, else the interrupts' and softirqs'."""
    if op.get("cpu_ns_per_packet") is not None:
        return op["cpu_ns_per_packet"], "NAPI threads + hard IRQ"
    if op.get("napi_thread_ns_per_packet") is not None:
        return op["napi_thread_ns_per_packet"], "NAPI threads"
    if op.get("softirq_ns_per_packet") is not None:
        return op["softirq_ns_per_packet"], "hard IRQ + softirq"
    return None
