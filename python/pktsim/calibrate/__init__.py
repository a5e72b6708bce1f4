"""Calibration from real profiles: cycles per packet by group, the way 000 does it by hand.

1. Read a profile: ``perf script`` text with call stacks, folded stacks
   (``frame;frame;frame count``, as stackcollapse / inferno write them), or the flat
   ``perf report --stdio`` table.
2. Sort every sample into one of 000's groups with ordered, user-editable rules: a sample
   belongs to the group of its innermost frame that a rule counts for (see
   ``linux-forwarding.toml``). Rules follow the packet: a shared entry point (softirq,
   interrupt, syscall, scheduler) counts for a packet group only through a packet frame
   below it, and a shared helper (the allocators) only when a packet frame calls it; other
   work under an entry point is ``other``, listed as outside the packet path. Samples no
   frame matches go to ``other`` and are listed.
3. Scale by 000 Eq. 3: ``C_total = f * CPU_load / R`` (or ``C_active / R``); each group gets
   its share of the active (non-idle) samples.
4. Write a cost-profile file that ``pktsim model`` and ``pktsim run`` take unchanged.

Reading profiles is :mod:`~pktsim.calibrate.profiles`, the rules
:mod:`~pktsim.calibrate.rules`; the calibration, the flame graph and the bar chart are here,
and every name is also reached as ``pktsim.calibrate.NAME``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..model import GROUPS
from .profiles import READERS, Profile, ProfileError, decode_utf8, detect_format, read_folded, read_perf_report, read_perf_script, read_profile
from .rules import BUNDLED_RULES, GROUP_NAMES, PACKET_GROUPS, PATTERN_KEYS, ROLES, RULES_DIR, Rule, Rules

__all__ = [
    "calibrate",
    "Calibration",
    "read_profile",
    "Profile",
    "ProfileError",
    "Rules",
    "Rule",
    "flamegraph",
    "bar_chart",
    "read_folded",
    "read_perf_script",
    "read_perf_report",
    "READERS",
    "detect_format",
    "decode_utf8",
    "RULES_DIR",
    "BUNDLED_RULES",
    "GROUP_NAMES",
    "GROUP_COLORS",
    "PACKET_GROUPS",
    "ROLES",
    "PATTERN_KEYS",
    "MIN_GROUP_SAMPLES",
]

# Colours of the groups in flame graphs and bar charts (colour-blind-safe where possible).
GROUP_COLORS = {
    "RX": (0x1F, 0x77, 0xB4),
    "alloc": (0xFF, 0x7F, 0x0E),
    "prerouting": (0x2C, 0xA0, 0x2C),
    "routing": (0xD6, 0x27, 0x28),
    "postrouting": (0x94, 0x67, 0xBD),
    "free": (0x8C, 0x56, 0x4B),
    "TX": (0xE3, 0x77, 0xC2),
    "other": (0x7F, 0x7F, 0x7F),
    "idle": (0xC7, 0xC7, 0xC7),
}


# A group's share from n samples is uncertain by about 1/sqrt(n) of itself (Poisson): below
# this many samples per reported group, the share's first digit is in doubt (±10% or worse).
MIN_GROUP_SAMPLES = 100


@dataclass
class Calibration:
    origin: str
    fmt: str
    rate_pps: float
    frequency_hz: float
    active_cycles_per_s: float
    samples: float  # the samples' total weight (perf script: periods; perf report: percent)
    samples_by_group: dict  # weight by group
    unmatched: Counter
    idle_into_other: bool
    outside: Counter = field(default_factory=Counter)  # weight under entry points with no packet frame, by what ran
    n_samples: float | None = None  # real number of samples, when the profile says
    counts_by_group: dict | None = None  # real samples by group (estimated from the header for perf report)

    @property
    def active_samples(self) -> float:
        idle = 0.0 if self.idle_into_other else self.samples_by_group.get("idle", 0.0)
        return self.samples - idle

    @property
    def c_total_cycles(self) -> float:
        return self.active_cycles_per_s / self.rate_pps

    @property
    def cycles_by_group(self) -> dict:
        active = self.active_samples
        return {g: self.c_total_cycles * self.samples_by_group.get(g, 0.0) / active for g in GROUPS}

    @property
    def unmatched_share(self) -> float:
        return sum(self.unmatched.values()) / self.active_samples

    def unmatched_top(self, n: int = 15) -> list:
        return [[name, w / self.active_samples] for name, w in self.unmatched.most_common(n)]

    @property
    def outside_share(self) -> float:
        """Share of the active samples that ran under a shared entry point with no packet frame (in C_other)."""
        return sum(self.outside.values()) / self.active_samples

    def outside_top(self, n: int = 15) -> list:
        return [[name, w / self.active_samples] for name, w in self.outside.most_common(n)]

    def warnings(self) -> list[str]:
        """Why the shares may be less precise than they are printed."""
        out = []
        load = self.active_cycles_per_s / self.frequency_hz
        if load > 1 + 1e-9:
            out.append(
                f"{self.active_cycles_per_s:g} active cycles per second is {load:.0%} of {self.frequency_hz / 1e9:g} GHz, more than "
                "one core has: the cycles per packet assume one core forwarding the whole rate"
            )
        if self.counts_by_group is None:
            return out + ["the profile does not say how many samples it has, so the precision of the shares is unknown"]
        groups = [g for g in GROUPS if self.samples_by_group.get(g, 0.0) > 0]
        few = [g for g in groups if self.counts_by_group.get(g, 0.0) < MIN_GROUP_SAMPLES]
        if not few:
            return out
        n = self.n_samples or 0.0
        listed = ", ".join(f"{g} {self.counts_by_group[g]:.0f}" for g in few)
        est = " (estimated from the header's total)" if self.fmt == "perf-report" else ""
        return out + [
            f"only {n:.0f} sample{'s' if n != 1 else ''}{est}; groups with fewer than {MIN_GROUP_SAMPLES} "
            f"({listed}) have shares uncertain by more than ±10% of their value: profile longer or at a higher frequency"
        ]

    def to_json(self) -> dict:
        return {
            "c_total_cycles": self.c_total_cycles,
            "cycles_by_group": self.cycles_by_group,
            "unmatched_share": self.unmatched_share,
            "unmatched_top": self.unmatched_top(),
            "outside_packet_path_share": self.outside_share,
            "outside_packet_path_top": self.outside_top(),
            "idle_share": self.samples_by_group.get("idle", 0.0) / self.samples,
            "samples": self.n_samples,
            "samples_by_group": None if self.counts_by_group is None else {g: self.counts_by_group.get(g, 0.0) for g in GROUP_NAMES},
            "sample_weight": self.samples,
            "warnings": self.warnings(),
            "rate_pps": self.rate_pps,
            "frequency_hz": self.frequency_hz,
            "cpu_load": self.active_cycles_per_s / self.frequency_hz,
            "profile": self.origin,
            "format": self.fmt,
        }

    def samples_text(self) -> str:
        """ "5 samples", "5 samples (1.25e+06 ns of cpu-clock periods)"... what the profile really holds."""
        if self.fmt == "perf-report":
            head = f"{self.n_samples:g} samples per its header" if self.n_samples is not None else "sample count not given"
            return f"percentages, {head}"
        n = self.n_samples or 0.0
        text = f"{n:g} sample{'s' if n != 1 else ''}"
        if self.fmt == "perf-script" and self.samples != n:
            text += f", weighted by their period: {self.samples:g} in all"
        return text

    def to_profile_toml(self, name: str, reference_routes: int = 1, reference_flows: int = 1) -> str:
        def q(x: str) -> str:
            return '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"'

        lines = [
            f"# Cycles per packet by group, calibrated by pktsim from {Path(self.origin).name}",
            f"# ({self.fmt}, {self.samples_text()}): {self.rate_pps:g} pps at {self.active_cycles_per_s / self.frequency_hz:.1%} CPU load,",
            f"# {self.frequency_hz / 1e9:g} GHz (000 Eq. 3). Unmatched functions ({self.unmatched_share:.1%}) and work outside",
            f"# the packet path under shared entry points ({self.outside_share:.1%}) are in C_other.",
            "[profile]",
            f"name = {q(name)}",
            f"source = {q(f'calibrated from {Path(self.origin).name}')}",
            f'frequency = "{self.frequency_hz / 1e9:g}GHz"',
            f"reference_routes = {reference_routes}",
            f"reference_flows = {reference_flows}",
            "",
            "[cycles]",
        ]
        lines += [f'{g} = "{c:.3f}cycles"' for g, c in self.cycles_by_group.items()]
        return "\n".join(lines) + "\n"


def calibrate(
    profile: Profile,
    rules: Rules,
    rate_pps: float,
    frequency_hz: float,
    cpu_load: float | None = None,
    active_cycles_per_s: float | None = None,
    idle_into_other: bool = False,
    frames: float | None = None,
) -> Calibration:
    """Sort samples into groups and scale them to cycles per packet (000 Eq. 3). The
    active cycles come from ``cpu_load`` (of ``frequency_hz``), ``active_cycles_per_s``, or
    the profile itself: with ``frames`` (the frames the profiled CPU handled while it was
    sampled, at ``rate_pps``), its non-idle samples' time (cpu-clock or task-clock periods,
    in ns) per frame."""
    if not (rate_pps > 0 and math.isfinite(rate_pps)):
        raise ValueError(f"rate = {rate_pps} pps: expected a packet rate above 0")
    if not (frequency_hz > 0 and math.isfinite(frequency_hz)):
        raise ValueError(f"frequency = {frequency_hz:g} Hz: expected a CPU clock above 0 Hz, e.g. 3.3GHz")
    if sum(x is not None for x in (cpu_load, active_cycles_per_s, frames)) != 1:
        raise ValueError("give one of the CPU load, the active cycles per second or the frames handled while profiled")
    if frames is not None:
        if not (frames > 0 and math.isfinite(frames)):
            raise ValueError(f"frames = {frames:g}: expected the frames handled while profiled, above 0")
        if not profile.weight_unit().startswith("ns of"):
            raise ValueError(
                f"{profile.origin}: its samples weigh {profile.weight_unit()}, not CPU time; --frames takes a profile of cpu-clock or task-clock "
                "samples with their periods (perf record -e cpu-clock, perf script); give --cpu-load instead"
            )
    if cpu_load is not None and not 0 < cpu_load <= 1:
        raise ValueError(f"cpu-load = {cpu_load:.0%}: expected above 0% and at most 100%")
    if active_cycles_per_s is not None and not (active_cycles_per_s > 0 and math.isfinite(active_cycles_per_s)):
        raise ValueError(f"active cycles = {active_cycles_per_s:g} per second: expected a finite number of cycles per second above 0")
    active = frequency_hz * cpu_load if cpu_load is not None else active_cycles_per_s or 0.0
    by_group: dict = {g: 0.0 for g in GROUP_NAMES}
    counts: dict | None = {g: 0.0 for g in GROUP_NAMES} if profile.counts else None
    unmatched: Counter = Counter()
    outside: Counter = Counter()
    for stack, w in profile.stacks.items():
        g, how, fn = rules.classify(stack)
        if how == "unmatched":
            g = "other"
            unmatched[fn] += w
        elif how == "entry":
            outside[fn] += w
        if g == "idle" and idle_into_other:
            g = "other"
        by_group[g] += w
        if counts is not None:
            counts[g] += profile.counts.get(stack, 0.0)
    if not profile.total - (0 if idle_into_other else by_group["idle"]) > 0:
        raise ValueError(f"{profile.origin}: every sample is idle; nothing to calibrate")
    if frames is not None:
        # The busy time the samples weigh (ns), per frame, in cycles, at the rate.
        busy_ns = profile.total - (0 if idle_into_other else by_group["idle"])
        active = busy_ns * 1e-9 * frequency_hz / frames * rate_pps
    n = profile.n_samples
    if counts is None and n is not None and profile.total > 0:
        counts = {g: n * by_group[g] / profile.total for g in GROUP_NAMES}
    return Calibration(profile.origin, profile.fmt, rate_pps, frequency_hz, active, profile.total, by_group, unmatched, idle_into_other, outside, n, counts)


def flamegraph(profile: Profile, rules: Rules, title: str) -> str:
    """SVG flame graph with every frame in the colour of its group (unmatched: hot palette)."""
    from .. import _core

    names = {f for stack in profile.stacks for f in stack}
    groups = {n: g for n in sorted(names) if (g := rules.group_of(n)) is not None}
    colors = [(n, GROUP_COLORS[g]) for n, g in groups.items()]
    legend = [(f"C_{g}" if g != "idle" else "idle", GROUP_COLORS[g]) for g in GROUP_COLORS if g in set(groups.values())]
    legend.append(("unmatched (hot)", (0xE6, 0x8C, 0x2A)))
    return _core.flamegraph_svg(profile.folded(), colors, title, profile.weight_unit(), legend)


def bar_chart(
    profiles: Iterable[tuple[str, dict]], path: str | Path, title: str = "Cycles per packet by group", reported: list[float] | None = None, dpi: int = 200
) -> None:
    """Stacked bars of cycles per group, one bar per (label, cycles_by_group); PNG, SVG or
    PDF by the file's suffix, PNG at ``dpi``. ``reported``: a paper's total per bar, drawn
    as black crosses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = list(profiles)
    fig, ax = plt.subplots(figsize=(max(4.2, 1.6 + 1.3 * len(items)), 4.8))
    bottoms = [0.0] * len(items)
    x = range(len(items))
    for g in GROUPS:
        vals = [c.get(g, 0.0) for _, c in items]
        ax.bar(x, vals, bottom=bottoms, color=[tuple(v / 255 for v in GROUP_COLORS[g])], label=f"C_{g}", width=0.6)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    top = max(bottoms + list(reported or []) + [1.0])
    for i, total in enumerate(bottoms):
        above = max(total, reported[i] if reported else 0.0)
        # The bar's total, and the paper's beside it where there is one.
        text = f"{total:.0f}" if not reported else f"{total:.0f}\npaper {reported[i]:.0f}"
        ax.text(i, above + 0.025 * top, text, ha="center", va="bottom", fontsize=8 if reported else 9)
    if reported:
        ax.plot(list(x), reported, "kx", markersize=9, markeredgewidth=2, label="paper: C_total", zorder=5)
    ax.set_ylim(0, (1.2 if reported else 1.12) * top)  # room for the totals under the title
    ax.set_xticks(list(x), [label for label, _ in items], rotation=20, ha="right")
    ax.set_ylabel("CPU cycles per packet")
    import textwrap

    # Wrapped to the figure's width, so that a long title is never cut off.
    ax.set_title("\n".join(textwrap.wrap(title, max(20, int(9 * fig.get_figwidth())))), fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    import io

    from ..textio import atomic_write

    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png", dpi=dpi)
    plt.close(fig)
    atomic_write(path, buf.getvalue())
