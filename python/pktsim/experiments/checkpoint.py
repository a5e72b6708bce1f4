"""A sweep's checkpoint, ``OUT.partial.jsonl``: the hash of what its rows depend on, the rows
as lines of JSON, the saved rows a resume reuses, and the output path checked before any run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import _core
from ..scenario import Scenario


def sweep_fingerprint(scenario: Scenario, params: Mapping[str, Sequence[str]], variants: Mapping[str, tuple] | None = None) -> str:
    """A hash of everything a sweep's rows depend on: pktsim's version, the resolved
    scenario (every default filled in) with its overrides, the cost-profile file it names
    (bundled profiles are part of the version) and the grid. A checkpoint whose hash differs
    belongs to another sweep."""
    h = hashlib.sha256()
    profile = (scenario.data.get("cost") or {}).get("profile")
    profile_bytes = b""
    if isinstance(profile, str) and profile not in _core.bundled_profiles():
        try:
            profile_bytes = (Path(scenario.base_dir) / profile).read_bytes()
        except OSError:
            profile_bytes = b"<unreadable>"
    doc = {
        "version": _core.VERSION,
        "scenario": scenario.data,
        "sets": [list(kv) for kv in scenario.sets],
        "grid": {k: list(v) for k, v in params.items()},
    }
    if variants:
        doc["variants"] = {k: [list(kv) for kv in v] for k, v in variants.items()}
    h.update(json.dumps(doc, sort_keys=True, default=str).encode())
    h.update(hashlib.sha256(profile_bytes).digest())
    return h.hexdigest()


def _checkpoint_path(output: Path) -> Path:
    return output.with_name(output.name + ".partial.jsonl")


def _checkpoint_line(row: dict, full_json: str | None = None) -> str:
    """A row as one line of JSON; ``full_json``, the core's JSON text of the row's full
    result, stands for ``row["_full"]`` (the same values, without Python encoding them)."""
    if full_json is None or "_full" not in row:
        return json.dumps(row)
    head = json.dumps({k: v for k, v in row.items() if k != "_full"})
    return f'{head[:-1]}, "_full": {full_json}}}' if len(head) > 2 else f'{{"_full": {full_json}}}'


def _load_checkpoint(path: Path, fingerprint: str) -> tuple[dict, str]:
    """The ``ok`` rows saved by an interrupted run of the same sweep, and why none are
    reused ("" when the file is missing or matches). Error rows are not kept: a resume runs
    them again."""
    done: dict = {}
    if not path.is_file():
        return done, ""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        return done, f"cannot read it ({e.strerror or e})"
    header = None
    if lines:
        try:
            header = json.loads(lines[0]).get("_pktsim_sweep")
        except (json.JSONDecodeError, AttributeError):
            header = None
    if not isinstance(header, dict) or header.get("fingerprint") != fingerprint:
        return done, "it was written by a different sweep (the scenario, its overrides, the grid or pktsim changed)"
    for line in lines[1:]:
        try:
            row = json.loads(line)
            key = tuple(row["_key"])
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a line cut by the interruption
        if row.get("status") == "ok":
            done[key] = row
        else:
            done.pop(key, None)
    return done, ""


def check_output(output: str | Path) -> Path:
    """The sweep table's path, checked before any run: a ``.parquet`` or ``.csv`` suffix, and
    a directory where the table and its checkpoint can be written. Raises ``ValueError``
    naming the path and the reason."""
    out = Path(output)
    if out.suffix not in (".parquet", ".csv"):
        raise ValueError(f"{out}: expected a .parquet or .csv output file")
    if out.is_dir():
        raise ValueError(f"{out}: is a directory, expected a .parquet or .csv output file")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        probe = _checkpoint_path(out)
        existed = probe.exists()
        with probe.open("a"):
            pass
        if not existed:
            probe.unlink()
    except OSError as e:
        raise ValueError(f"{out}: cannot write there ({e.strerror or e})") from None
    return out
