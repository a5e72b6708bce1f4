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
"""

from __future__ import annotations

import fnmatch
import math
import re
import tomllib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

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
    """Samples as stacks (root first) with weights.

    ``stacks`` holds each stack's weight (perf script: the sum of the samples' periods;
    folded: the count; perf report: the percentage). ``counts`` holds how many samples
    each stack stands for, when the format says (perf script, folded); for perf report it
    is empty and ``reported_samples`` is the total from its header, if it has one.
    """

    stacks: Counter = field(default_factory=Counter)
    origin: str = ""
    fmt: str = ""
    counts: Counter = field(default_factory=Counter)
    reported_samples: float | None = None
    # perf script: the sampled events, as perf names them ("cycles", "cpu-clock")
    events: set = field(default_factory=set)

    @property
    def total(self) -> float:
        return float(sum(self.stacks.values()))

    @property
    def n_samples(self) -> float | None:
        """Real number of samples (not their weight), or None when the profile does not say."""
        if self.counts:
            return float(sum(self.counts.values()))
        return self.reported_samples

    def folded(self) -> list[str]:
        return [f"{';'.join(s)} {w:g}" for s, w in sorted(self.stacks.items())]

    def weight_unit(self) -> str:
        """What a stack's weight counts: "samples", their periods in the sampled event's
        unit ("cycles", "ns of cpu-clock") where perf script gives periods, or "% of samples"
        for perf report."""
        if self.fmt == "perf-report":
            return "% of samples"
        if self.fmt != "perf-script" or self.total == self.n_samples:
            return "samples"
        if len(self.events) != 1:
            return "event periods"
        event = _MODIFIERS.sub("", next(iter(self.events)))
        # The software clocks count nanoseconds; hardware events count themselves.
        return f"ns of {event}" if event in ("cpu-clock", "task-clock") else event


_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")
# perf's event modifiers: "cycles:u", "cpu-clock:pppH".
_MODIFIERS = re.compile(r":[ukhpPGHSDIWebRX]+$")


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
        p.counts[frames] += float(m.group("count"))
    if not p.stacks:
        raise _error(origin, None, "at least one folded stack (the file is empty)")
    if not p.total > 0:
        raise _error(origin, None, "at least one folded stack with a sample count above 0 (every count is 0)")
    return p


# perf script: "comm pid/tid [cpu] time: [period] event:" then indented "addr sym+off (dso)".
_HEADER = re.compile(r"^\S.*?\s+\d+(?:/\d+)?\s+(?:\[\d+\]\s+)?\d+\.\d+:\s+(?:(?P<period>\d+)\s+)?(?P<event>\S+?):?(?=\s|$)\s*(?P<rest>.*)$")
_HEX = re.compile(r"[0-9a-fA-F]+\s")
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
            p.counts[tuple(reversed(frames))] += 1
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
        p.events.add(m.group("event"))
        rest = m.group("rest").strip()
        # perf script without -g: the sampled address, symbol and object on the header line
        # (a tracepoint's arguments there are no frame, even where they end in parentheses).
        if _HEX.match(rest):
            fm = _FRAME.match(" " + rest)
            if fm:
                frames.append(_clean(fm.group("sym")))
    flush(len(text.splitlines()) + 1)
    if not p.stacks:
        raise _error(origin, None, "at least one sample with a call stack (the file has none)")
    if not p.total > 0:
        raise _error(origin, None, "at least one sample with a period above 0 (every period is 0)")
    return p


# perf report --stdio: "  12.34%  comm  dso  [k] symbol" (optionally Children and Self columns).
_REPORT = re.compile(r"^\s*(?P<pcts>(?:\d+\.\d+%\s+){1,2})(?P<rest>.*?)\[(?P<kind>[kKuUgH.])\]\s+(?P<sym>.+?)\s*$")
_SAMPLES = re.compile(r"^#\s*Samples:\s*(?P<n>\d+(?:\.\d+)?)(?P<unit>[KMG]?)\s+of event")
_CALLGRAPH = re.compile(r"^\s+[|\-]|^\s+\d+\.\d+%\s*$|^\s+-+$|^\s*$")


def read_perf_report(text: str, origin: str) -> Profile:
    p = Profile(origin=origin, fmt="perf-report")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            h = _SAMPLES.match(line.strip())
            if h:  # perf report rounds it ("120K"): good enough to judge the precision
                p.reported_samples = (p.reported_samples or 0.0) + float(h.group("n")) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[h.group("unit")]
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


def decode_utf8(data: bytes, origin: str, what: str) -> str:
    """The text of a file, or an error naming the line and byte offset of the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        err = _error(origin, line, f"byte offset {e.start} (0x{data[e.start]:02x}) is not UTF-8: expected {what} in UTF-8 text")
        err.path, err.value, err.expected = f"byte {e.start}", f"0x{data[e.start]:02x}", f"{what} in UTF-8 text"
        raise err from None


def read_profile(path: str | Path, fmt: str = "auto") -> Profile:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise _error(str(path), None, f"a readable profile ({e.strerror or e})") from None
    text = decode_utf8(data, str(path), "a profile")
    fmt = detect_format(text) if fmt == "auto" else fmt
    if fmt not in READERS:
        raise _error(str(path), None, f"a format among {', '.join(READERS)} or auto", fmt)
    return READERS[fmt](text, str(path))


# ------------------------------------------------------------------------------------ rules

PACKET_GROUPS = tuple(g for g in GROUPS if g != "other")
ROLES = ("packet", "entry", "helper")
PATTERN_KEYS = ("exact", "prefix", "glob", "regex")


@dataclass
class Rule:
    """Function-name patterns of one group.

    ``role`` says where a match counts:

    - ``packet`` (the default): the function is work of ``group`` wherever it appears.
    - ``entry``: a shared kernel entry point (softirq, ksoftirqd, interrupt entry and exit,
      syscall entry, scheduler, kworker loops). It never makes a sample packet work by
      itself: a sample under it counts for a packet group only through a packet frame
      below it (``net_rx_action`` -> driver poll -> ``__netif_receive_skb`` ...); other
      work under it (RCU callbacks, timers, tasklets, an idle ksoftirqd) is C_other, and
      is reported as work outside the packet path, not as unmatched.
    - ``helper``: a function shared with the rest of the kernel (the slab and page
      allocators, ...). It counts for ``group`` only when a packet frame calls it (with
      no entry point in between), or when the sample has no call stack (perf report);
      elsewhere the search goes on to its callers.
    """

    group: str
    exact: frozenset = frozenset()
    prefix: tuple = ()
    glob: tuple = ()
    regex: tuple = ()
    role: str = "packet"

    def matches(self, name: str) -> bool:
        return (
            name in self.exact
            or any(name.startswith(x) for x in self.prefix)
            or any(fnmatch.fnmatchcase(name, g) for g in self.glob)
            or any(r.search(name) for r in self.regex)
        )

    @property
    def is_packet_frame(self) -> bool:
        return self.role == "packet" and self.group in PACKET_GROUPS


def _rule_error(origin: str, key: str, value, expected: str) -> ProfileError:
    shown = _toml_value(value)
    e = _error(origin, None, f"{key} = {shown}: expected {expected}")
    e.path, e.value, e.expected = key, shown, expected
    return e


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v[:4]) + (", ..." if len(v) > 4 else "") + "]"
    if isinstance(v, dict):
        return "{...} (a table)"
    return str(v)


def _names(origin: str, key: str, value) -> tuple:
    """A pattern list: a TOML array of strings (a lone string would match letter by letter)."""
    if not isinstance(value, list):
        hint = f" (write {key.rsplit('.', 1)[1]} = [{_toml_value(value)}])" if isinstance(value, str) else ""
        raise _rule_error(origin, key, value, f"an array of function-name strings{hint}")
    for i, x in enumerate(value):
        if not isinstance(x, str) or not x:
            raise _rule_error(origin, f"{key}[{i}]", x, "a function name or pattern as a non-empty string")
    return tuple(value)


class Rules:
    """Ordered rules: a function's rule is the first one matching its name."""

    def __init__(self, rules: list[Rule], origin: str):
        self.rules = rules
        self.origin = origin
        self._cache: dict[str, Rule | None] = {}

    @classmethod
    def load(cls, path: str | Path | None = None) -> Rules:
        path = Path(path) if path else BUNDLED_RULES
        origin = str(path)
        try:
            data = tomllib.loads(decode_utf8(path.read_bytes(), origin, "a rules file"))
        except OSError as e:
            raise _error(origin, None, f"a readable rules file ({e.strerror or e})") from None
        except tomllib.TOMLDecodeError as e:
            raise _error(origin, getattr(e, "lineno", None), f"valid TOML ({e})") from None
        unknown = set(data) - {"rule"}
        if unknown:
            raise _error(origin, None, "only [[rule]] tables", ", ".join(sorted(unknown)))
        if not isinstance(data.get("rule", []), list):
            raise _rule_error(origin, "rule", data["rule"], "an array of tables, written [[rule]]")
        rules = []
        for i, r in enumerate(data.get("rule", [])):
            key = f"rule[{i}]"
            if not isinstance(r, dict):
                raise _rule_error(origin, key, r, "a table, written [[rule]]")
            allowed = ("group", "role", *PATTERN_KEYS)
            extra = set(r) - set(allowed)
            if extra:
                raise _error(origin, None, f"keys {', '.join(allowed)}", f"{key}.{sorted(extra)[0]}")
            role = r.get("role", "packet")
            if role not in ROLES:
                raise _rule_error(origin, f"{key}.role", role, f"one of {', '.join(ROLES)}")
            if role == "entry":
                # An entry point has no group of its own: its samples go to the packet frame below it.
                group = r.get("group", "other")
                if group != "other":
                    raise _rule_error(
                        origin,
                        f"{key}.group",
                        group,
                        'no group (or "other") for role = "entry": its samples count for the group of the '
                        "packet frame below it, or for C_other when there is none",
                    )
            else:
                if "group" not in r:
                    raise _error(origin, None, f'{key}.group: a group for every rule but role = "entry" (one of {", ".join(GROUP_NAMES)})')
                group = r["group"]
                if not isinstance(group, str) or group not in GROUP_NAMES:
                    raise _rule_error(origin, f"{key}.group", group, f"one of {', '.join(GROUP_NAMES)}")
            pats = {k: _names(origin, f"{key}.{k}", r[k]) for k in PATTERN_KEYS if k in r}
            regex = []
            for j, x in enumerate(pats.get("regex", ())):
                try:
                    regex.append(re.compile(x))
                except re.error as e:
                    raise _rule_error(origin, f"{key}.regex[{j}]", x, f"a valid regular expression ({e})") from None
            rules.append(Rule(group, frozenset(pats.get("exact", ())), pats.get("prefix", ()), pats.get("glob", ()), tuple(regex), role))
        if not rules:
            raise _error(origin, None, "at least one [[rule]]")
        return cls(rules, origin)

    def rule_of(self, name: str) -> Rule | None:
        if name not in self._cache:
            self._cache[name] = next((r for r in self.rules if r.matches(name)), None)
        return self._cache[name]

    def group_of(self, name: str) -> str | None:
        """The group of the first rule matching ``name`` (entry points: "other"), ignoring the stack."""
        r = self.rule_of(name)
        return None if r is None else r.group

    def classify(self, stack: tuple) -> tuple[str | None, str, str]:
        """(group or None, how, function) for one stack, root first.

        The innermost frame (closest to the leaf) that counts decides: a packet rule always
        counts; a helper counts when a packet frame calls it with no entry point in between;
        an entry point ends the search, and the sample is C_other (work outside the packet
        path). ``how`` is "rule", "entry" or "unmatched"; ``function`` is the leaf, or for
        "entry" the frame the entry point called (what the work was: rcu_core,
        run_timer_softirq, ...), or the entry point itself when it is the leaf.
        """
        rules = [self.rule_of(f) for f in stack]
        # packet_ctx[i]: a packet frame lies above frame i (towards the root) with no entry point in between.
        packet_ctx, inside = [], False
        for r in rules:
            packet_ctx.append(inside)
            if r is not None:
                if r.role == "entry":
                    inside = False
                elif r.is_packet_frame:
                    inside = True
        for i in range(len(stack) - 1, -1, -1):
            r = rules[i]
            if r is None:
                continue
            if r.role == "helper":
                if packet_ctx[i] or len(stack) == 1:  # a sample without a call stack: nothing to judge by
                    return r.group, "rule", stack[-1]
                continue
            if r.role == "entry":
                return "other", "entry", stack[i + 1] if i + 1 < len(stack) else stack[i]
            return r.group, "rule", stack[-1]
        return None, "unmatched", stack[-1]

    def attribute(self, stack: tuple) -> tuple[str | None, str]:
        """(group of the frame that decides, or None when no rule matched; the leaf function)."""
        g, how, _ = self.classify(stack)
        return (None if how == "unmatched" else g), stack[-1]


# ------------------------------------------------------------------------------------ calibration

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
) -> Calibration:
    """Sort samples into groups and scale them to cycles per packet (000 Eq. 3)."""
    if not (rate_pps > 0 and math.isfinite(rate_pps)):
        raise ValueError(f"rate = {rate_pps} pps: expected a packet rate above 0")
    if not (frequency_hz > 0 and math.isfinite(frequency_hz)):
        raise ValueError(f"frequency = {frequency_hz:g} Hz: expected a CPU clock above 0 Hz, e.g. 3.3GHz")
    if (cpu_load is None) == (active_cycles_per_s is None):
        raise ValueError("give either the CPU load or the active cycles per second")
    if cpu_load is not None and not 0 < cpu_load <= 1:
        raise ValueError(f"cpu-load = {cpu_load:.0%}: expected above 0% and at most 100%")
    if active_cycles_per_s is not None and not (active_cycles_per_s > 0 and math.isfinite(active_cycles_per_s)):
        raise ValueError(f"active cycles = {active_cycles_per_s:g} per second: expected a finite number of cycles per second above 0")
    active = frequency_hz * cpu_load if cpu_load is not None else active_cycles_per_s
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


def bar_chart(profiles: Iterable[tuple[str, dict]], path: str | Path, title: str = "Cycles per packet by group", reported: list[float] | None = None) -> None:
    """Stacked bars of cycles per group, one bar per (label, cycles_by_group); PNG or SVG.
    ``reported``: a paper's total per bar, drawn as black crosses."""
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
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png", dpi=120)
    plt.close(fig)
    atomic_write(path, buf.getvalue())
