"""A sweep's checkpoint, ``OUT.partial.jsonl``: the hash of what its rows depend on, the rows
as lines of JSON, the saved rows a resume reuses, and the output path checked before any run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import _core
from ..scenario import Scenario


def _digest(path: Path) -> str:
    """A hash of the content of the regular file ``path``, read in pieces."""
    h = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _strings(value, out: set[str]) -> None:
    if isinstance(value, str):
        out.add(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _strings(v, out)


def input_paths(scenario: Scenario, params: Mapping[str, Sequence[str]] | None = None, variants: Mapping[str, tuple] | None = None) -> dict[str, Path]:
    """Every file a point of a sweep may read: each string of the scenario, its overrides,
    the grid and the variants that names a regular file (against the scenario's directory,
    or absolute) — a cost profile, a pcap, a chain's node file, a swept file — and, inside a
    TOML file found so, the files it names (against its own directory). Keyed by the path as
    written (a nested file's after its parent's and " > ")."""
    import os
    import stat

    from ..tomlread import tomllib

    found: dict[str, Path] = {}
    todo: list[tuple[Path, str, object]] = [(Path(scenario.base_dir), "", [scenario.data, list(scenario.sets), dict(params or {}), dict(variants or {})])]
    seen: set[Path] = set()
    while todo:
        base, prefix, value = todo.pop()
        names: set[str] = set()
        _strings(value, names)
        for name in sorted(names):
            if not name or len(name) > 4096 or "\n" in name or "\0" in name:
                continue
            path = base / name
            try:
                if not stat.S_ISREG(os.stat(path).st_mode):
                    continue
                real = path.resolve()
                if real in seen:
                    continue
                seen.add(real)
                found[prefix + name] = path
            except (OSError, ValueError):
                continue
            if path.suffix == ".toml" and path.stat().st_size <= 16 << 20:
                try:
                    todo.append((path.parent, f"{prefix}{name} > ", tomllib.loads(path.read_text(encoding="utf-8"))))
                except (OSError, ValueError):
                    pass
    return found


def input_files(scenario: Scenario, params: Mapping[str, Sequence[str]] | None = None, variants: Mapping[str, tuple] | None = None) -> dict[str, str]:
    """:func:`input_paths`, each with a hash of its content."""
    out = {}
    for shown, path in input_paths(scenario, params, variants).items():
        try:
            out[shown] = _digest(path)
        except OSError:
            out[shown] = "<unreadable>"
    return out


def sweep_fingerprint(scenario: Scenario, params: Mapping[str, Sequence[str]], variants: Mapping[str, tuple] | None = None) -> str:
    """A hash of everything a sweep's rows depend on: pktsim's version, the resolved
    scenario (every default filled in) with its overrides, the grid, and the content of
    every file a point reads (:func:`input_files`: profiles, pcaps, chain node files, swept
    files; bundled profiles are part of the version). A checkpoint whose hash differs
    belongs to another sweep."""
    h = hashlib.sha256()
    doc = {
        "version": _core.VERSION,
        "scenario": scenario.data,
        "sets": [list(kv) for kv in scenario.sets],
        "grid": {k: list(v) for k, v in params.items()},
        "files": input_files(scenario, params, variants),
    }
    if variants:
        doc["variants"] = {k: [list(kv) for kv in v] for k, v in variants.items()}
    h.update(json.dumps(doc, sort_keys=True, default=str).encode())
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
        return done, "it was written by a different sweep (the scenario, its overrides, the grid, a file it reads or pktsim changed)"
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
    from ..textio import output_target

    out = Path(output)
    if out.suffix not in (".parquet", ".csv"):
        raise ValueError(f"{out}: expected a .parquet or .csv output file")
    output_target(out, "sweep table")
    output_target(_checkpoint_path(out), "sweep's checkpoint")
    return out
