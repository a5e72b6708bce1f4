"""Profiles as perf and the flame-graph tools write them, read into stacks with weights:
``perf script`` text with call stacks, folded stacks (``frame;frame;frame count``), the
flat ``perf report --stdio`` table; the format found from the text, and the errors
(:class:`ProfileError`) that name the line."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ScenarioError
from ..textio import InputFileError, read_input_bytes

# A profile larger than this is refused before it is read (``perf script`` of a long
# recording with call stacks reaches hundreds of MiB; a device must not fill memory).
MAX_PROFILE_BYTES = 2 << 30


class ProfileError(ScenarioError):
    """A profile or rules file that cannot be read; the message names the line."""


def _error(origin: str, line: int | None, expected: str, value: str | None = None) -> ProfileError:
    where = f"{origin}:{line}" if line is not None else origin
    msg = f"{where}: " + (f"{value!r}: expected {expected}" if value is not None else expected)
    e = ProfileError(msg)
    e.origin, e.path, e.value, e.expected = origin, "" if line is None else f"line {line}", value, expected
    return e


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


# The object may hold one level of parentheses: a deleted file, "(/memfd:x (deleted))".
_FRAME = re.compile(r"^\s+(?:[0-9a-fA-F]+\s+)?(?P<sym>.+?)\s+\((?P<dso>(?:[^()]|\([^()]*\))*)\)\s*$")


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
        data = read_input_bytes(path, "profile", MAX_PROFILE_BYTES)
    except InputFileError as e:
        raise _error(str(path), None, f"a readable profile ({str(e).split(': ', 1)[-1]})") from None
    if data[:2] == b"\x1f\x8b":  # gzip (perf script's text compressed, as examples/ ships one)
        import gzip
        import io
        import zlib

        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
                data = gz.read(MAX_PROFILE_BYTES + 1)
        except (OSError, EOFError, zlib.error) as e:
            raise _error(str(path), None, f"a readable gzip file ({e})") from None
        if len(data) > MAX_PROFILE_BYTES:
            raise _error(str(path), None, f"a profile of at most {MAX_PROFILE_BYTES >> 20} MiB uncompressed")
    text = decode_utf8(data, str(path), "a profile")
    fmt = detect_format(text) if fmt == "auto" else fmt
    if fmt not in READERS:
        raise _error(str(path), None, f"a format among {', '.join(READERS)} or auto", fmt)
    return READERS[fmt](text, str(path))
