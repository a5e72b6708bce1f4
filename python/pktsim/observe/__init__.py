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

from . import polls
from .sources import ObserveError, Snapshot, sysctls, take

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
    for i in ifaces:
        d = _delta(a.netdev[i], b.netdev[i])
        vec = {name: sum(c) - sum(a.vectors.get(i, {}).get(name, [0])) for name, c in b.vectors.get(i, {}).items()}
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
        out["softirqs_per_s"] = sum(net_rx) / w
        out["softirqs_per_packet"] = out["softirqs_per_s"] / rx if rx else None
        src["softirqs_per_s"] = "/proc/softirqs, NET_RX (every CPU)"
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
        soft_ns = sum(c["softirq"] + c["irq"] for c in d) * 1e9 / hz
        out["softirq_ns_per_packet"] = soft_ns / (rx * w) if rx else None
        src["cpu_by_context"] = f"/proc/stat (ticks of 1/{hz} s: a window of {w:.1f} s holds {w * hz:.0f} per CPU)"
        src["softirq_ns_per_packet"] = "/proc/stat hard IRQ + softirq time, every CPU, per frame received (frames in ksoftirqd or threads not counted)"
    out["drops"] = drops
    out["loss_ratio"] = (ring_full + drops.get("backlog", 0.0)) / out["offered_pps"] if out["offered_pps"] else 0.0
    src["loss_ratio"] = "(ring full + backlog drops) / offered"
    out["sources"] = src
    out["missing"] = sorted(set(a.missing) | set(b.missing))
    return out


def observe(
    ifaces: Sequence[str],
    duration_s: float = 10.0,
    interval_s: float | None = None,
    root: str | Path = "/",
    progress: Callable[[str], None] | None = None,
) -> dict:
    """The operating point of ``ifaces`` over ``duration_s`` (and, with ``interval_s``, one
    per interval in ``series``). Raises :class:`ObserveError` for an unknown interface or
    a source that cannot be read as expected; KeyboardInterrupt stops it within a tenth
    of a second."""
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
    counting, why = polls.start(ifaces, duration_s) if str(r) == "/" else (None, "")
    first = prev = take(list(ifaces), r)
    series = []
    end = first.t_ns + int(duration_s * 1e9)
    step = int((interval_s or duration_s) * 1e9)
    nxt = first.t_ns + step
    last = first
    while True:
        now = time.monotonic_ns()
        if now >= min(nxt, end):
            last = take(list(ifaces), r)
            if interval_s:
                p = point(prev, last, ifaces)
                series.append({"t_s": (last.t_ns - first.t_ns) / 1e9, **{k: p.get(k) for k in SERIES_KEYS}})
                if progress:
                    progress(f"{series[-1]['t_s']:.1f} s: {p['received_pps']:,.0f} frames/s received")
            prev = last
            nxt += step
            if last.t_ns >= end:
                break
        time.sleep(min(0.05, max(0.0, (min(nxt, end) - time.monotonic_ns()) / 1e9)))
    n_polls = None
    if counting is not None:
        n_polls, why = polls.counts(counting, ifaces, 10.0)
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
        out["sources"]["polls_per_s"] = "perf stat -a -e napi:napi_poll, filtered by device (counted, then disabled)"
    elif why:
        out["missing"].append(why)
    # Its own CPU time and its children's (perf, when it counts polls).
    cpu_s = sum((b.ru_utime + b.ru_stime) - (a.ru_utime + a.ru_stime) for a, b in zip(own0, own1))
    out["overhead"] = {"cpu_s": cpu_s, "share_of_one_cpu": cpu_s / out["window_s"]}
    out["sysctls"] = sysctls(r)
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
    frame size it saw, and its CPU per frame (hard IRQ and softirq time), interrupts,
    softirqs per frame and loss where it has them."""
    row = {"traffic.rate": f"{op['offered_pps']:.3f}pps"}
    sizes = [i["mean_frame_bytes"] for i in op["interfaces"].values() if i.get("mean_frame_bytes")]
    if sizes:
        # The kernel counts a frame without its 4 B FCS; a scenario's size holds it.
        row["traffic.size"] = f"{round(sum(sizes) / len(sizes)) + 4}B"
    if op.get("softirq_ns_per_packet") is not None:
        row["cpu_per_frame"] = f"{op['softirq_ns_per_packet']:.1f}ns"
    for key in ("irqs_per_packet", "softirqs_per_packet"):
        if op.get(key) is not None:
            row[key] = f"{op[key]:.6g}"
    row["loss_ratio"] = f"{op['loss_ratio']:.6g}"
    return row


def compare(op: dict, scenario, source: str = "pktsim observe") -> list[dict]:
    """The observation beside the model's run of ``scenario`` at the observed offered rate
    and frame size: rows of the ``reproduce`` contract (every one predicted: nothing was
    fitted to this observation)."""
    from .. import sim
    from ..fitting.data import cpu_per_frame_ns, handled_pps
    from ..reproduce.rows import row

    if not op["offered_pps"] > 0:
        return []  # no traffic in the window: nothing to run the model at
    sets = {k: v for k, v in as_data_row(op).items() if k.startswith("traffic.")}
    r = sim.run(scenario, sets)
    out = [
        row("frames received", op["received_pps"], handled_pps(r), "pps", source),
        row("loss", 100 * op["loss_ratio"], 100 * r["loss_ratio"], "%", source),
    ]
    if op.get("irqs_per_packet") is not None:
        out.append(row("interrupts per frame", op["irqs_per_packet"], r["irqs_per_packet"], "IRQs/frame", source))
    if op.get("softirqs_per_packet") is not None:
        out.append(row("NET_RX softirqs per frame", op["softirqs_per_packet"], r["softirqs_per_packet"], "softirqs/frame", source))
    if op.get("softirq_ns_per_packet") is not None:
        pred = cpu_per_frame_ns(r)
        out.append(row("CPU per frame (hard IRQ + softirq)", op["softirq_ns_per_packet"] / 1e3, pred / 1e3 if pred else None, "us", source))
    if op.get("time_squeeze_per_s") is not None:
        sq = r["time_squeeze"] / r["sim_time_s"] if r.get("sim_time_s") else None
        out.append(row("time squeezes", op["time_squeeze_per_s"], sq, "1/s", source))
    return out
