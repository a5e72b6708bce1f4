"""docs/architecture.md's extension table holds: the files a new extension of each kind
touches, counted from the code as the files that name one existing extension of that kind
(its tests and comments left out)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
CORE = ROOT / "crates" / "pktsim-core" / "src"
PACKAGE = ROOT / "python" / "pktsim"

# Per kind: the table row's first cell, one existing extension's names in the code, and the
# files the row names (relative to the core's src/ or to the package), the new file first.
KINDS = {
    "moderation policy": (
        CORE,
        r"\b(Dim|ItrDim|DimProfile)\b|\bdim::",
        ["engine/moderation/dim.rs"],
        ["engine/moderation/mod.rs", "scenario/nic.rs", "scenario/mod.rs"],
    ),
    "I/O mode": (
        CORE,
        r"\b(ThreadedNapiIo|ThreadedNapi)\b|\bthreaded::",
        ["engine/io/threaded.rs"],
        ["engine/io/mod.rs", "scenario/host.rs", "scenario/mod.rs"],
    ),
    "ring strategy": (CORE, r"\bDrr\b|\bdrr::", ["engine/strategy/drr.rs"], ["engine/strategy/mod.rs", "scenario/host.rs"]),
    "traffic pattern": (CORE, r"\bPattern::Burst\b", [], ["scenario/traffic.rs", "engine/traffic.rs"]),
    "traffic source": (
        CORE,
        r"\b(PcapReplay|TraceReplay)\b",
        ["engine/trace.rs"],
        ["engine/build.rs", "scenario/traffic.rs", "scenario/mod.rs"],
    ),
    "a tuning knob": (PACKAGE, r"[\"']host\.budget[\"']", [], ["tune/knobs.py", "testbed/dutknobs.py"]),
}


def _code(path: Path) -> str:
    """A source file without its tests and comments."""
    text = path.read_text()
    if path.suffix == ".rs":
        text = text.split("#[cfg(test)]\nmod tests", 1)[0]
        return re.sub(r"//[^\n]*", "", text)
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def _naming(base: Path, pattern: str) -> set[str]:
    suffix = "*.rs" if base == CORE else "*.py"
    return {str(p.relative_to(base)) for p in base.rglob(suffix) if re.search(pattern, _code(p))}


def _row(kind: str) -> str:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith(f"| {kind} |")]
    assert len(rows) == 1, f"docs/architecture.md has {len(rows)} rows for {kind!r}"
    return rows[0]


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_extension_table_counts_the_files_the_code_names(kind):
    base, pattern, new, touched = KINDS[kind]
    assert _naming(base, pattern) == set(new + touched), f"{kind}: the code names one in other files than the table says"
    row = _row(kind)
    assert f"{len(new)} new + {len(touched) - (kind == 'a tuning knob')}" in row, row
    for f in touched:
        assert f"`{f}`" in row, f"{kind}: {f} not in the row: {row}"
