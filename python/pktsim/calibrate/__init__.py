"""Calibration from real profiles: cycles per packet by group, the way 000 does it by hand.

1. Read a profile: ``perf script`` text with call stacks, folded stacks
   (``frame;frame;frame count``, as stackcollapse / inferno write them), or the flat
   ``perf report --stdio`` table.
2. Sort every sample into one of 000's groups with ordered, user-editable rules: a sample
   belongs to the group of its innermost frame that a rule matches (see
   ``linux-forwarding.toml``). Samples no frame matches go to ``other`` and are listed.
3. Scale by 000 Eq. 3: ``C_total = f * CPU_load / R`` (or ``C_active / R``); each group gets
   its share of the active (non-idle) samples.
4. Write a cost-profile file that ``pktsim model`` and ``pktsim run`` take unchanged.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..errors import ScenarioError
from ..model import GROUPS

RULES_DIR = Path(__file__).resolve().parent
BUNDLED_RULES = RULES_DIR / "linux-forwarding.toml"
GROUP_NAMES = (*GROUPS, "idle")

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


class ProfileError(ScenarioError):
    """A profile or rules file that cannot be read; the message names the line."""


def _error(origin: str, line: int | None, expected: str, value: str | None = None) -> ProfileError:
    where = f"{origin}:{line}" if line is not None else origin
    msg = f"{where}: " + (f"{value!r}: expected {expected}" if value is not None else expected)
    e = ProfileError(msg)
    e.origin, e.path, e.value, e.expected = origin, "" if line is None else f"line {line}", value, expected
    return e


# ------------------------------------------------------------------------------------ readers


@dataclass
class Profile:
    """Samples as stacks (root first) with weights."""

    stacks: Counter = field(default_factory=Counter)
    origin: str = ""
    fmt: str = ""

    @property
    def total(self) -> float:
        return float(sum(self.stacks.values()))

    def folded(self) -> list[str]:
        return [f"{';'.join(s)} {w:g}" for s, w in sorted(self.stacks.items())]


_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")


def _clean(sym: str) -> str:
    """``ip_rcv+0x1d`` -> ``ip_rcv``; perf's ``[unknown]`` stays."""
    return _OFFSET.sub("", sym.strip())


_FOLDED = re.compile(r"^(?P<stack>.*\S)\s+(?P<count>\d+(?:\.\d+)?)$")


def read_folded(text: str, origin: str) -> Profile:
    p = Profile(origin=origin, fmt="folded")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _FOLDED.match(line.rstrip())
        if not m:
            raise _error(origin, n, "a folded stack 'frame;frame;frame count' ending in a sample count", line[:80])
        frames = tuple(_clean(f) for f in m.group("stack").split(";"))
        if any(not f for f in frames):
            raise _error(origin, n, "frames separated by ';' with no empty frame", line[:80])
        p.stacks[frames] += float(m.group("count"))
    if not p.stacks:
        raise _error(origin, None, "at least one folded stack (the file is empty)")
    return p


# perf script: "comm pid/tid [cpu] time: [period] event:" then indented "addr sym+off (dso)".
_HEADER = re.compile(r"^\S.*?\s+\d+(?:/\d+)?\s+(?:\[\d+\]\s+)?\d+\.\d+:\s+(?:(?P<period>\d+)\s+)?(?P<event>[\w\-:./]+?):?\s*(?P<rest>.*)$")
_FRAME = re.compile(r"^\s+(?:[0-9a-fA-F]+\s+)?(?P<sym>.+?)\s+\((?P<dso>[^()]*)\)\s*$")


def read_perf_script(text: str, origin: str) -> Profile:
    p = Profile(origin=origin, fmt="perf-script")
    frames: list[str] = []
    weight = 0.0
    in_sample = False
    header_line = 0

    def flush(n: int) -> None:
        nonlocal frames, in_sample
        if in_sample:
            if not frames:
                raise _error(origin, header_line, "a sample followed by its call stack (record with perf record -g)", None)
            p.stacks[tuple(reversed(frames))] += weight
        frames, in_sample = [], False

    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            flush(n)
            continue
        if line.startswith("#"):
            continue
        if line[0].isspace():
            if not in_sample:
                raise _error(origin, n, "a stack frame only after a sample header", line.strip()[:80])
            m = _FRAME.match(line)
            if not m:
                raise _error(origin, n, "a stack frame 'address symbol+offset (object)'", line.strip()[:80])
            frames.append(_clean(m.group("sym")))
            continue
        flush(n)
        m = _HEADER.match(line)
        if not m:
            raise _error(origin, n, "a perf script sample header 'comm pid [cpu] time: [period] event:'", line[:80])
        in_sample, header_line = True, n
        weight = float(m.group("period")) if m.group("period") else 1.0
        rest = m.group("rest").strip()
        if rest:  # perf script without -g: the sampled IP on the header line
            fm = _FRAME.match(" " + rest)
            if fm:
                frames.append(_clean(fm.group("sym")))
    flush(len(text.splitlines()) + 1)
    if not p.stacks:
        raise _error(origin, None, "at least one sample with a call stack (the file has none)")
    return p


# perf report --stdio: "  12.34%  comm  dso  [k] symbol" (optionally Children and Self columns).
_REPORT = re.compile(r"^\s*(?P<pcts>(?:\d+\.\d+%\s+){1,2})(?P<rest>.*?)\[(?P<kind>[kKuUgH.])\]\s+(?P<sym>.+?)\s*$")
_CALLGRAPH = re.compile(r"^\s+[|\-]|^\s+\d+\.\d+%\s*$|^\s+-+$|^\s*$")


def read_perf_report(text: str, origin: str) -> Profile:
    p = Profile(origin=origin, fmt="perf-report")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _REPORT.match(line)
        if m:
            pcts = m.group("pcts").split()
            share = float(pcts[-1].rstrip("%"))  # Self when Children and Self are both shown
            if share > 0:
                p.stacks[(_clean(m.group("sym")),)] += share
            continue
        if _CALLGRAPH.match(line) or line.lstrip().startswith(("|", "---", "--")):
            continue
        raise _error(origin, n, "a perf report --stdio row 'NN.NN%  command  object  [k] symbol'", line[:80])
    if not p.stacks:
        raise _error(origin, None, "at least one perf report row with a percentage (the file has none)")
    return p


READERS = {"folded": read_folded, "perf-script": read_perf_script, "perf-report": read_perf_report}


def detect_format(text: str) -> str:
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if _REPORT.match(line):
            return "perf-report"
        if _HEADER.match(line):
            return "perf-script"
        return "folded"
    return "folded"


def read_profile(path: str | Path, fmt: str = "auto") -> Profile:
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise _error(str(path), None, f"a readable profile ({e.strerror or e})") from None
    fmt = detect_format(text) if fmt == "auto" else fmt
    if fmt not in READERS:
        raise _error(str(path), None, f"a format among {', '.join(READERS)} or auto", fmt)
    return READERS[fmt](text, str(path))


# ------------------------------------------------------------------------------------ rules


@dataclass
class Rule:
    group: str
    exact: frozenset = frozenset()
    prefix: tuple = ()
    glob: tuple = ()
    regex: tuple = ()

    def matches(self, name: str) -> bool:
        return (
            name in self.exact
            or any(name.startswith(x) for x in self.prefix)
            or any(fnmatch.fnmatchcase(name, g) for g in self.glob)
            or any(r.search(name) for r in self.regex)
        )


class Rules:
    """Ordered rules: a function's group is that of the first rule matching its name."""

    def __init__(self, rules: list[Rule], origin: str):
        self.rules = rules
        self.origin = origin
        self._cache: dict[str, str | None] = {}

    @classmethod
    def load(cls, path: str | Path | None = None) -> "Rules":
        path = Path(path) if path else BUNDLED_RULES
        try:
            data = tomllib.loads(path.read_text())
        except OSError as e:
            raise _error(str(path), None, f"a readable rules file ({e.strerror or e})") from None
        except tomllib.TOMLDecodeError as e:
            raise _error(str(path), getattr(e, "lineno", None), f"valid TOML ({e})") from None
        unknown = set(data) - {"rule"}
        if unknown:
            raise _error(str(path), None, "only [[rule]] tables", ", ".join(sorted(unknown)))
        rules = []
        for i, r in enumerate(data.get("rule", [])):
            key = f"rule[{i}]"
            extra = set(r) - {"group", "exact", "prefix", "glob", "regex"}
            if extra:
                raise _error(str(path), None, "keys group, exact, prefix, glob, regex", f"{key}.{sorted(extra)[0]}")
            group = r.get("group")
            if group not in GROUP_NAMES:
                raise _error(str(path), None, f"{key}.group one of {', '.join(GROUP_NAMES)}", str(group))
            try:
                regex = tuple(re.compile(x) for x in r.get("regex", []))
            except re.error as e:
                raise _error(str(path), None, f"{key}.regex a valid regular expression ({e})") from None
            rules.append(Rule(group, frozenset(r.get("exact", [])), tuple(r.get("prefix", [])), tuple(r.get("glob", [])), regex))
        if not rules:
            raise _error(str(path), None, "at least one [[rule]]")
        return cls(rules, str(path))

    def group_of(self, name: str) -> str | None:
        if name not in self._cache:
            self._cache[name] = next((r.group for r in self.rules if r.matches(name)), None)
        return self._cache[name]

    def attribute(self, stack: tuple) -> tuple[str | None, str]:
        """(group of the innermost matching frame or None, the leaf function)."""
        for frame in reversed(stack):
            g = self.group_of(frame)
            if g is not None:
                return g, stack[-1]
        return None, stack[-1]


# ------------------------------------------------------------------------------------ calibration


@dataclass
class Calibration:
    origin: str
    fmt: str
    rate_pps: float
    frequency_hz: float
    active_cycles_per_s: float
    samples: float
    samples_by_group: dict
    unmatched: Counter
    idle_into_other: bool

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

    def to_json(self) -> dict:
        return {
            "c_total_cycles": self.c_total_cycles,
            "cycles_by_group": self.cycles_by_group,
            "unmatched_share": self.unmatched_share,
            "unmatched_top": self.unmatched_top(),
            "idle_share": self.samples_by_group.get("idle", 0.0) / self.samples,
            "samples": self.samples,
            "rate_pps": self.rate_pps,
            "frequency_hz": self.frequency_hz,
            "cpu_load": self.active_cycles_per_s / self.frequency_hz,
            "profile": self.origin,
            "format": self.fmt,
        }

    def to_profile_toml(self, name: str, reference_routes: int = 1, reference_flows: int = 1) -> str:
        def q(x: str) -> str:
            return '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"'

        lines = [
            f"# Cycles per packet by group, calibrated by pktsim from {Path(self.origin).name}",
            f"# ({self.fmt}, {self.samples:g} samples): {self.rate_pps:g} pps at {self.active_cycles_per_s / self.frequency_hz:.1%} CPU load,",
            f"# {self.frequency_hz / 1e9:g} GHz (000 Eq. 3). Unmatched functions ({self.unmatched_share:.1%}) are in C_other.",
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
) -> Calibration:
    """Sort samples into groups and scale them to cycles per packet (000 Eq. 3)."""
    if not rate_pps > 0:
        raise ValueError(f"rate = {rate_pps} pps: expected a packet rate above 0")
    if (cpu_load is None) == (active_cycles_per_s is None):
        raise ValueError("give either the CPU load or the active cycles per second")
    if cpu_load is not None and not 0 < cpu_load <= 1:
        raise ValueError(f"cpu-load = {cpu_load:.0%}: expected above 0% and at most 100%")
    active = frequency_hz * cpu_load if cpu_load is not None else active_cycles_per_s
    by_group: dict = {g: 0.0 for g in GROUP_NAMES}
    unmatched: Counter = Counter()
    for stack, w in profile.stacks.items():
        g, leaf = rules.attribute(stack)
        if g is None:
            g = "other"
            unmatched[leaf] += w
        if g == "idle" and idle_into_other:
            g = "other"
        by_group[g] += w
    if not profile.total - (0 if idle_into_other else by_group["idle"]) > 0:
        raise ValueError(f"{profile.origin}: every sample is idle; nothing to calibrate")
    return Calibration(profile.origin, profile.fmt, rate_pps, frequency_hz, active, profile.total, by_group, unmatched, idle_into_other)


def flamegraph(profile: Profile, rules: Rules, title: str) -> str:
    """SVG flame graph with every frame in the colour of its group (unmatched: hot palette)."""
    from .. import _core

    names = {f for stack in profile.stacks for f in stack}
    colors = [(n, GROUP_COLORS[g]) for n in sorted(names) if (g := rules.group_of(n)) is not None]
    return _core.flamegraph_svg(profile.folded(), colors, title, "samples")


def bar_chart(profiles: Iterable[tuple[str, dict]], path: str | Path, title: str = "Cycles per packet by group") -> None:
    """Stacked bars of cycles per group, one bar per (label, cycles_by_group); PNG or SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = list(profiles)
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(items), 4.8))
    bottoms = [0.0] * len(items)
    x = range(len(items))
    for g in GROUPS:
        vals = [c.get(g, 0.0) for _, c in items]
        ax.bar(x, vals, bottom=bottoms, color=[tuple(v / 255 for v in GROUP_COLORS[g])], label=f"C_{g}", width=0.6)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for i, total in enumerate(bottoms):
        ax.text(i, total, f"{total:.0f}", ha="center", va="bottom", fontsize=9)
    ax.set_xticks(list(x), [label for label, _ in items], rotation=20, ha="right")
    ax.set_ylabel("CPU cycles per packet")
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    from ..textio import atomic_write
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png", dpi=120)
    plt.close(fig)
    atomic_write(path, buf.getvalue())
