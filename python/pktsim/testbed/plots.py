"""The figures of ``pktsim testbed``: measured against predicted for each path of
``pktsim testbed validate`` (``--plot``) and the probe's (``pktsim testbed probe``)."""

from __future__ import annotations

from pathlib import Path

from ..plots import _plt, _save


def _testbed_title(res: dict) -> str:
    m, setup = res.get("machine", {}), res.get("setup", {})
    path = res.get("path", "stack")
    dial = {
        "xdp": f"native XDP redirect, program loop {setup.get('loops', '?')} turns",
        "defer": f"threaded NAPI with deferral, {setup.get('rules', '?')} nftables rules",
        "afxdp": f"AF_XDP copy mode, XSK program loop {setup.get('loops', '?')} turns",
        "share": f"a UDP reader on the receiving CPU, {setup.get('rules', '?')} nftables input rules",
    }.get(path, f"{setup.get('rules', '?')} nftables rules")
    # Two lines: one would be wider than the figure with a long CPU model or dial.
    return f"pktsim testbed --path {path}: measured vs predicted\n{m.get('cpu_model', '?')}, {m.get('cpus', '?')} CPUs, Linux {m.get('kernel', '?')}; {dial}"


def testbed_validation(res: dict, path: str | Path) -> None:
    """Measured (points, min-max bars over the runs) vs predicted (lines) for a
    ``pktsim testbed validate`` result: CPU per frame, forwarded rate, loss and latency
    medians against the offered load (against the deferral timeout for ``--path defer``)."""
    if res.get("path") == "defer":
        return _testbed_defer(res, path)
    if res.get("path") == "afxdp":
        return _testbed_afxdp(res, path)
    if res.get("path") == "share":
        from .shareplot import figure

        return figure(res, path, _plt(), _save, _testbed_title(res))
    plt = _plt()
    sw = res["measurements"]
    pts = sorted(sw["points"], key=lambda p: p["offered_pps"])
    preds = sorted(res["predictions"][: len(pts)], key=lambda p: p["offered_pps"])
    x = [p["offered_pps"] / 1e3 for p in pts]
    xp = [p["offered_pps"] / 1e3 for p in preds]
    fitted = set(res["calibration"].get("from_loads", []))

    def measured(ax, key, scale, sub=None):
        def val(p):
            v = p[key][sub] if sub else p[key]
            return None if v is None else v * scale

        ys = [val(p) for p in pts]
        lo, hi = [], []
        for p, y in zip(pts, ys):
            sp = p.get("spread", {}).get(f"{key}.{sub}" if sub else key)
            lo.append(0 if sp is None or y is None else y - sp["min"] * scale)
            hi.append(0 if sp is None or y is None else sp["max"] * scale - y)
        ax.errorbar(x, ys, yerr=[lo, hi], fmt="o", color="C0", capsize=3, label="measured")
        fx = [xi for xi, p in zip(x, pts) if p.get("load") in fitted]
        fy = [yi for yi, p in zip(ys, pts) if p.get("load") in fitted]
        ax.plot(fx, fy, "o", mfc="none", mec="k", ms=11, label="calibration loads (costs)")

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    ax = axes[0][0]
    measured(ax, "dut_ns_per_packet", 1e-3)
    ax.plot(xp, [p["dut_ns_per_packet"] / 1e3 for p in preds], "-", color="C1", label="pktsim")
    ax.set_ylabel("dut CPU per forwarded frame [µs]")
    ax = axes[0][1]
    measured(ax, "forwarded_pps", 1e-3)
    ax.plot(xp, [p["forwarded_pps"] / 1e3 for p in preds], "-", color="C1", label="pktsim")
    ax.plot([0, max(x)], [0, max(x)], ":", color="grey", label="offered")
    ax.set_ylabel("forwarded [kpps]")
    ax = axes[1][0]
    measured(ax, "loss_ratio", 100)
    ax.plot(xp, [100 * p["loss_ratio"] for p in preds], "-", color="C1", label="pktsim")
    ax.set_ylabel("loss [%]")
    ax = axes[1][1]
    measured(ax, "latency_ns", 1e-3, "p50")
    ax.plot(xp, [p["latency_ns"]["p50"] / 1e3 for p in preds], "-", color="C1", label="pktsim p50")
    ax.plot(x, [p["latency_ns"]["p99"] / 1e3 if p["latency_ns"]["p99"] else None for p in pts], "v", color="C2", label="measured p99")
    ax.plot(xp, [p["latency_ns"]["p99"] / 1e3 for p in preds], "--", color="C2", label="pktsim p99")
    ax.set_yscale("log")
    ax.set_ylabel("latency at dut egress [µs]")
    for a in axes.flat:
        a.set_xlabel("offered [kpps]")
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(_testbed_title(res), fontsize=10)
    _save(fig, path)


def _testbed_afxdp(res: dict, path: str | Path) -> None:
    """``--path afxdp``: CPU per frame and forwarding rate against the batch size, measured
    (min-max bars over the runs) and the batching law fitted at two batch sizes."""
    plt = _plt()
    pts = sorted(res["measurements"]["points"], key=lambda p: p["batch"])
    cal = res["calibration"]
    fitted = set(cal["from_batches"])
    b = [p["batch"] for p in pts]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))

    def measured(ax, key, scale):
        ys = [p[key] * scale if p[key] else None for p in pts]
        lo = [0 if not p.get("spread", {}).get(key) or y is None else y - p["spread"][key]["min"] * scale for p, y in zip(pts, ys)]
        hi = [0 if not p.get("spread", {}).get(key) or y is None else p["spread"][key]["max"] * scale - y for p, y in zip(pts, ys)]
        ax.errorbar(b, ys, yerr=[lo, hi], fmt="o", color="C0", capsize=3, label="measured")
        ax.plot([x for x in b if x in fitted], [y for x, y in zip(b, ys) if x in fitted], "o", mfc="none", mec="k", ms=11, label="calibration batch sizes")

    preds = {q["batch"]: q for q in res["predictions"]}
    ax = axes[0]
    measured(ax, "dut_ns_per_packet", 1e-3)
    ax.plot(
        b,
        [preds[x]["dut_ns_per_packet"] / 1e3 for x in b],
        "-",
        color="C1",
        label=f"t_frame + t_call / b ({cal['t_frame_ns'] / 1e3:.2f} + {cal['t_call_ns'] / 1e3:.2f} us / b)",
    )
    ax.set_ylabel("dut CPU per forwarded frame [µs]")
    ax = axes[1]
    measured(ax, "forwarded_pps", 1e-3)
    ax.plot(b, [preds[x]["forwarded_pps"] / 1e3 for x in b], "-", color="C1", label="pktsim (law)")
    ax.set_ylabel("forwarded, dut overloaded [kpps]")
    ax = axes[2]
    ax.plot(b, [p["frames_per_batch"] for p in pts], "o-", color="C0", label="frames per batch (forwarder)")
    ax.plot(b, [preds[x].get("frames_per_call") for x in b], "s--", color="C2", label="frames per sendto (at most 32)")
    ax.plot(b, b, ":", color="grey", label="batch size B")
    ax.set_yscale("log", base=2)
    ax.set_ylabel("frames [per batch, per call]")
    for a in axes:
        a.set_xscale("log", base=2)
        a.set_xlabel("batch size B [frames]")
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(_testbed_title(res), fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def _testbed_defer(res: dict, path: str | Path) -> None:
    """``--path defer``: each figure against gro_flush_timeout (0: deferral off), one
    colour per load; measured points (min-max bars over the runs), predicted lines."""
    plt = _plt()
    pairs = [(p, q) for p, q in zip(res["measurements"]["points"], res["predictions"]) if not p.get("calibration")]
    loads = sorted({p["load"] for p, _ in pairs})
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    panels = [
        (axes[0][0], "dut CPU per forwarded frame [µs]", lambda p: p["dut_ns_per_packet"] / 1e3 if p["dut_ns_per_packet"] else None, "dut_ns_per_packet", 1e-3),
        (axes[0][1], "frames per poll", lambda p: p["packets_per_poll"], "packets_per_poll", 1.0),
        (axes[1][0], "NAPI thread wake-ups per frame", lambda p: 1 / p["packets_per_wakeup"] if p["packets_per_wakeup"] else None, None, 1.0),
        (axes[1][1], "latency p50 at dut egress [µs]", lambda p: p["latency_ns"]["p50"] / 1e3 if p["latency_ns"]["p50"] else None, "latency_ns.p50", 1e-3),
    ]
    for ax, label, f, spread_key, scale in panels:
        for i, load in enumerate(loads):
            sel = sorted(((p, q) for p, q in pairs if p["load"] == load), key=lambda pq: pq[0]["gro_flush_timeout_ns"])
            x = [p["gro_flush_timeout_ns"] / 1e3 for p, _ in sel]
            ys = [f(p) for p, _ in sel]
            lo, hi = [], []
            for (p, _), y in zip(sel, ys):
                sp = p.get("spread", {}).get(spread_key) if spread_key else None
                lo.append(0 if sp is None or y is None else max(0.0, y - sp["min"] * scale))
                hi.append(0 if sp is None or y is None else max(0.0, sp["max"] * scale - y))
            kpps = sel[0][0]["offered_pps"] / 1e3 if sel else 0
            ax.errorbar(x, ys, yerr=[lo, hi], fmt="o", color=f"C{i}", capsize=3, label=f"measured, {100 * load:.0f}% load ({kpps:.0f} kpps)")
            ax.plot(x, [f(q) for _, q in sel], "-", color=f"C{i}", label=f"pktsim, {100 * load:.0f}% load")
        ax.set_ylabel(label)
        ax.set_xlabel("gro_flush_timeout [µs] (napi_defer_hard_irqs 2; 0: deferral off)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[1][1].set_yscale("log")
    cal = res.get("calibration", {})
    src = cal.get("t_timer_from")
    what = "calibrated with deferral off; every point here is predicted"
    if src:
        # The point the deferral timer's cost was fitted on: an open marker on the CPU panel.
        fit = [p for p, _ in pairs if p["load"] == src["load"] and p["gro_flush_timeout_ns"] == src["gro_flush_timeout_ns"]]
        for p in fit:
            axes[0][0].plot(
                [p["gro_flush_timeout_ns"] / 1e3], [p["dut_ns_per_packet"] / 1e3], "o", ms=12, mfc="none", color="k", label="fitted: the deferral timer's cost"
            )
        axes[0][0].legend(fontsize=7)
        what = (
            f"calibrated with deferral off, and the deferral timer's cost ({cal['t_timer_ns'] / 1e3:.1f} µs) on the CPU at "
            f"{src['gro_flush_timeout_ns'] / 1e3:.0f} µs and {100 * src['load']:.0f}% load (circled); every other point is predicted"
        )
    fig.suptitle(_testbed_title(res) + "\n" + what, fontsize=10)
    _save(fig, path)


def testbed_probe(res: dict, path: str | Path) -> None:
    """``pktsim testbed probe``: the gaps an idle spinning thread on the dut CPU saw — where
    they fall in the tick's period, and the distribution of their lengths (the tick's and
    the rest's) as a survival function."""
    import numpy as np

    plt = _plt()
    g = np.array(res["raw"].get("listed") or [], dtype=float).reshape(-1, 2)
    t = res.get("tick")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    ax = axes[0]
    if t and len(g):
        period = t["period_ns"]
        ax.hist((g[:, 0] % period) / 1e3, bins=100, color="C0")
        ax.set_xlabel(f"gap start within the tick period [µs] ({t['hz']} Hz)")
    ax.set_ylabel("gaps")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax = axes[1]
    if len(g):
        if t:
            per = t["period_ns"]
            starts = g[:, 0] % per
            mode = np.argmax(np.histogram(starts, bins=100, range=(0, per))[0])
            phase = (mode + 0.5) * per / 100
            d = np.abs(((starts - phase) / per + 0.5) % 1.0 - 0.5)
            groups = [("tick", g[d <= 0.02, 1], "C1"), ("the rest", g[d > 0.02, 1], "C2")]
        else:
            groups = [("all gaps", g[:, 1], "C0")]
        for name, lens, color in groups:
            if len(lens):
                x = np.sort(lens) / 1e3
                ax.step(x, 1 - np.arange(len(x)) / len(x), where="post", color=color, label=f"{name} ({len(x)} gaps, {len(x) / res['observed_s']:.0f}/s)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    ax.set_xlabel("gap length [µs]")
    ax.set_ylabel("share of gaps longer")
    ax.grid(alpha=0.3, which="both")
    raw = res["raw"]
    fig.suptitle(
        f"pktsim testbed probe: CPU {raw['cpu']} at SCHED_FIFO {raw['priority']}, {res['observed_s']:.1f} s observed, "
        f"{100 * res['stolen_share']:.2f}% of the CPU taken (gaps over {res['threshold_ns'] / 1e3:g} us)",
        fontsize=10,
    )
    fig.tight_layout()
    _save(fig, path)
