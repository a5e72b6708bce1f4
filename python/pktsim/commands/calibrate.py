"""``pktsim calibrate`` (cycles per packet by group from a perf profile, 000 Eq. 3) and
``pktsim plot-groups`` (cost profiles' groups side by side)."""

from __future__ import annotations

import math
from pathlib import Path

from .. import _core
from ..errors import UsageError
from ..textio import atomic_write, json_text, si, table
from .common import _load_or_active, _quantity


def cmd_calibrate(args) -> int:
    from pathlib import Path as _P

    from .. import calibrate as cal

    if args.rate is None:
        raise UsageError("calibrate: --rate is required (the measured forwarding rate, e.g. --rate 1.67Mpps)")
    if args.freq is None:
        raise UsageError("calibrate: --freq is required (the CPU clock, e.g. --freq 3.3GHz)")
    rate = _quantity("packetrate", "--rate", args.rate)
    freq = _quantity("frequency", "--freq", args.freq)
    if not (freq > 0 and math.isfinite(freq)):
        raise UsageError(f"--freq {args.freq!r}: expected a CPU clock above 0 Hz, e.g. 3.3GHz")
    load, active = _load_or_active(args)
    frames = args.frames
    if frames is not None and not (1 <= frames <= 2**63 - 1):
        raise UsageError(f"--frames {frames}: expected the frames forwarded while the profile was taken, a whole number of at least 1")
    if sum(x is not None for x in (load, active, frames)) != 1:
        raise UsageError("calibrate: give --cpu-load (e.g. 100%), --active-cycles or --frames (the CPU time from the profile), one of them")
    for option, value, what in (("--routes", args.routes, "routes in the FIB"), ("--flows", args.flows, "flows in the traffic")):
        if not 1 <= value <= 2**63 - 1:
            raise UsageError(f"{option} {value}: expected the number of {what} when profiled, a whole number from 1 to 2^63-1")
    rules = cal.Rules.load(args.rules)
    profile = cal.read_profile(args.profile, args.format)
    try:
        c = cal.calibrate(profile, rules, rate, freq, load, active, idle_into_other=args.idle_into_other, frames=frames)
    except ValueError as e:
        raise UsageError(f"calibrate: {e}") from None
    name = args.name or _P(args.profile).stem
    if not 20 <= args.dpi <= 1200:
        raise UsageError(f"--dpi {args.dpi}: expected 20 to 1200 dots per inch")
    if args.bars and _P(args.bars).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"--bars {args.bars!r}: expected a file name ending in .png, .svg or .pdf")
    text = c.to_profile_toml(name, args.routes, args.flows)
    if args.output:
        _read_back(text, args.profile)
    outputs = (
        ("-o", args.output, lambda p: atomic_write(p, text)),
        ("--flamegraph", args.flamegraph, lambda p: atomic_write(p, cal.flamegraph(profile, rules, f"{name}: cycles by group"))),
        ("--bars", args.bars, lambda p: cal.bar_chart([(name, c.cycles_by_group)], p, f"{name}: cycles per packet by group", dpi=args.dpi)),
    )
    for option, path, write in outputs:
        if not path:
            continue
        try:
            write(path)
        except OSError as e:
            raise UsageError(f"{option} {path!r}: expected a writable file path ({e.strerror or e})") from None
    if args.json:
        print(json_text(c.to_json()))
        return 0
    j = c.to_json()
    print(f"pktsim calibrate: {args.profile} ({profile.fmt}, {c.samples_text()}, rules {rules.origin})")
    print(f"  {si(rate, 'pps')} at {100 * j['cpu_load']:.1f}% of {si(freq, 'Hz', 2)}: C_total = {c.c_total_cycles:.1f} cycles/packet (000 Eq. 3)")
    print()
    rows = [[g, f"{c.samples_by_group.get(g, 0.0) / c.active_samples:.1%}", f"{v:.1f}"] for g, v in c.cycles_by_group.items()]
    rows.append(["C_total", "100.0%", f"{c.c_total_cycles:.1f}"])
    print(table(rows, ["group", "share", "cycles/packet"], "lrr"))
    if j["idle_share"] > 0:
        print(f"\n  idle samples: {j['idle_share']:.1%} of all (left out of the active cycles)")
    if c.outside:
        print(f"\n  outside the packet path: {c.outside_share:.1%} of active samples (in C_other): work under shared")
        print("  entry points (softirq, interrupts, ...) with no packet frame below; by what ran:")
        for fn, share in c.outside_top(10):
            print(f"    {share:6.1%}  {fn}")
    print(f"\n  unmatched: {c.unmatched_share:.1%} of active samples (in C_other); top functions:")
    for fn, share in c.unmatched_top(10):
        print(f"    {share:6.1%}  {fn}")
    for w in j["warnings"]:
        print(f"\n  warning: {w}")
    for label, p in (("cost profile", args.output), ("flame graph", args.flamegraph), ("bar chart", args.bars)):
        if p:
            print(f"  wrote {label}: {p}")
    return 0


def _read_back(text: str, source: str) -> None:
    """A cost profile, read back as a scenario reads one before it is written: one pktsim
    would refuse (a cost that is not a finite number, a name that breaks the TOML) is not
    written but named."""
    import tempfile

    from ..errors import ScenarioError
    from ..scenario import Scenario

    with tempfile.TemporaryDirectory(prefix="pktsim-calibrate-") as d:
        (Path(d) / "profile.toml").write_text(text, encoding="utf-8")
        sc = {"cpu": {"frequency": "1GHz"}, "link": {"rate": "100Gbit/s"}, "traffic": {"rate": "1kpps"}, "cost": {"profile": "profile.toml"}}
        try:
            Scenario.from_dict(sc, origin=f"<profile calibrated from {source}>", base_dir=d)
        except ScenarioError as e:
            raise UsageError(f"calibrate: the profile made from {source} is not valid, so it is not written: {e}") from None


def cmd_plot_groups(args) -> int:
    from .. import calibrate as cal

    if not 20 <= args.dpi <= 1200:
        raise UsageError(f"--dpi {args.dpi}: expected 20 to 1200 dots per inch")
    if Path(args.output).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"-o {args.output!r}: expected a file name ending in .png, .svg or .pdf")
    items = [profile_groups(name) for name in args.profiles]
    cal.bar_chart(items, args.output, args.title, dpi=args.dpi)
    print(f"wrote {args.output}")
    return 0


def profile_groups(name: str) -> tuple[str, dict]:
    """A cost profile's label and cycles per group, as measured: at the FIB it was
    measured with, so that its routing cycles are as written (at another FIB size the
    model would move them)."""
    from ..model import predict
    from ..scenario import Scenario
    from ..tomlread import tomllib

    file = Path(name).is_file()
    sc = {"cpu": {"frequency": "1GHz"}, "link": {"rate": "100Gbit/s"}, "traffic": {"rate": "1kpps"}, "cost": {"profile": Path(name).name if file else name}}
    try:
        text = Path(name).read_text() if file else _core.bundled_profile_text(name)
        measured = tomllib.loads(text).get("profile", {})
        sc["traffic"]["flows"] = int(measured.get("reference_flows", 1))
        sc["fib"] = {"routes": int(measured.get("reference_routes", 1))}
    except (OSError, UnicodeDecodeError, ValueError, TypeError):
        pass  # the core names what is wrong with the profile
    p = predict(Scenario.from_dict(sc, origin=f"<profile {name}>", base_dir=str(Path(name).parent) if file else "."))
    return (Path(name).stem if file else name, p["cycles_by_group"])
