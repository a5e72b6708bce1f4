"""Scenario text as the core parses it, without the :class:`~pktsim.scenario.Scenario`
class: ``--set`` overrides in every form Python accepts, plain numbers written in a key's
base unit, the parsed text of recent scenarios kept per process, and validation into the
core's resolved scenario. :mod:`pktsim.scenario` builds its class on this module (and
re-exports its names); ``pktsim run`` and the runs of a sweep need only this one, which
starts faster (no dataclasses).
"""

from __future__ import annotations

import functools
import json
import numbers
import os
from collections.abc import Iterable, Mapping

from . import _core, schema_info
from .errors import ScenarioError

# typing is only needed by type checkers (annotations are not evaluated): not imported at
# run time, so that the command starts without it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


def _normalise_sets(sets: Iterable[Any] | Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Accept ``["a.b=1", ...]``, ``[("a.b", 1), ...]`` or ``{"a.b": 1}``."""
    if sets is None:
        return []
    items = sets.items() if isinstance(sets, Mapping) else sets
    out: list[tuple[str, str]] = []
    for item in items:
        if isinstance(item, str):
            key, sep, value = item.partition("=")
            if not sep:
                err = ScenarioError(f"--set: {item}: expected key=value, e.g. traffic.rate=1.2Mpps")
                err.origin, err.path, err.value, err.expected = "--set", item, None, "key=value"
                raise err
            out.append((key.strip(), value.strip()))
        else:
            key, value = item
            out.append((str(key), _value_text(value, str(key))))
    return out


# Base unit written after a plain number, by the schema type of the key it sets.
BASE_UNITS = {
    "OfferedRate": "pps",
    "BitRate": "bit/s",
    "Bytes": "B",
    "Cycles": "cycles",
    "CyclesPerByte": "cycles/B",
    "Duration": "s",
    "TimeSpan": "s",  # a run's length, a trace's window: a Duration without the 10 s bound
    "Frequency": "Hz",
    "TimePerByte": "ns/B",  # the core has no s/B; plain numbers are taken in seconds per byte
}
_UNIT_SCALE = {"TimePerByte": 1e9}


def _schema_defs() -> tuple[dict, dict]:
    s = schema_info.schema()
    return s, s.get("$defs", {})


@functools.lru_cache(maxsize=4096)
def unit_kind(key: str) -> str | None:
    """The schema type of a scenario key's value ("Duration", "OfferedRate", ...), or None
    when the key is not a quantity (a count, a name, a flag) or is unknown."""
    root, defs = _schema_defs()

    def deref(node):
        while isinstance(node, dict) and "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name in BASE_UNITS:
                return name
            node = defs.get(name, {})
        if isinstance(node, dict):
            for alt in node.get("anyOf", []) + node.get("allOf", []):
                got = deref(alt)
                if isinstance(got, str) or (isinstance(got, dict) and got.get("properties")):
                    return got
        return node

    node = root
    for part in key.split("."):
        node = deref(node)
        if not isinstance(node, dict):
            return None
        props = node.get("properties") or {}
        # A tagged section: the key is one of its alternatives' (each a table of its own).
        tagged = [deref(alt).get("properties", {}) for alt in node.get("oneOf", []) if isinstance(deref(alt), dict)]
        if part in props:
            node = props[part]
        elif any(part in alt for alt in tagged):
            node = next(alt[part] for alt in tagged if part in alt)
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    node = deref(node)
    return node if isinstance(node, str) else None


def quantity_text(key: str, value: Any) -> str | None:
    """A plain number for a quantity key, written in the key's base unit (pps, bit/s, B,
    cycles, s, Hz): ``quantity_text("traffic.rate", 1.2e6) == "1200000pps"``. None when
    ``value`` is not a plain number or the key is not a quantity."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    kind = unit_kind(key)
    if kind is None:
        return None
    v = float(value) * _UNIT_SCALE.get(kind, 1.0)
    return f"{v:.12g}{BASE_UNITS[kind]}"


# The parsed text of recent scenarios (a sweep's worker parses its scenario once).
_PARSED: dict = {}
_PARSED_KEEP = 16


def parsed(text: str, fmt: str, origin: str, base_dir: str | Path) -> _core.Parsed:
    """The core's parse of scenario text (``fmt`` "toml" or "json"), kept for the last few
    texts: a sweep or a loaded :class:`Scenario` reads its text once per process, and each
    set of overrides is resolved on a copy of the parsed table. A syntax error raises
    :class:`~pktsim.errors.ScenarioError` (and is not kept)."""
    key = (text, fmt, origin, str(base_dir))
    p = _PARSED.get(key)
    if p is None:
        p = _core.Parsed(text, fmt, origin, str(base_dir))
        if len(_PARSED) >= _PARSED_KEEP:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = p
    return p


def _check_profile_file(p: _core.Parsed, origin: str, base_dir: str, sets) -> None:
    """Refuse a cost-profile file the core could not read as text (not UTF-8, a device, too
    large) with the file, the byte offset and the key, before the core reads it whole."""
    name = next((v for k, v in reversed(tuple(sets)) if k == "cost.profile"), None)
    key = "--set cost.profile" if name is not None else "cost.profile"
    if name is None:
        name = p.profile
    if not isinstance(name, str) or not name or name in _core.bundled_profiles():
        return
    from pathlib import Path

    path = Path(base_dir) / name
    if not path.exists():
        return  # the core says it is neither bundled nor a file
    from .textio import InputFileError, read_input_text

    try:
        read_input_text(path, "cost profile")
    except InputFileError as e:
        err = ScenarioError(f"{origin}: {key} = {json.dumps(name)}: {e}")
        err.origin, err.path, err.value, err.expected = origin, "cost.profile", name, "a UTF-8 cost-profile file"
        raise err from None


def resolve(text: str, fmt: str, origin: str, base_dir: str | Path, sets, check_profile: bool = True) -> _core.Resolved:
    """The core's validated scenario for text with overrides (``[(key, value text), ...]``),
    the text parsed once per process (:func:`parsed`). With ``check_profile`` a cost-profile
    file it names is checked first (:func:`_check_profile_file`)."""
    p = parsed(text, fmt, origin, base_dir)
    if check_profile:
        _check_profile_file(p, origin, str(base_dir), sets)
    return p.resolve(list(sets))


def _value_text(value: Any, key: str = "") -> str:
    """A Python value as the text of a ``--set`` (strings stay bare so "1.2Mpps" works; a
    plain number for a quantity key is taken in its base unit; numpy scalars are numbers)."""
    if isinstance(value, str):
        return value
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
        try:
            value = value.item()  # a numpy scalar
        except (TypeError, ValueError):
            pass
    if isinstance(value, bool):
        return "true" if value else "false"
    if key:
        text = quantity_text(key, value)
        if text is not None:
            return text
    return _toml_inline(value)


def _toml_inline(value: Any) -> str:
    """A value as a TOML inline value: lists as arrays, dicts as inline tables (``{name =
    "halt", latency = "5us"}``), strings quoted, numpy scalars as numbers."""
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_inline(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_inline(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def read_scenario_file(path: str | Path) -> tuple[str, str, str]:
    """A TOML scenario file's text, origin (the path as given) and base directory (where
    its relative profile paths are read), or :class:`~pktsim.errors.ScenarioError` naming
    the file when it cannot be read as UTF-8 text."""
    from .textio import InputFileError, read_input_text

    # The path as pathlib shows it (`./a//b.toml` as `a/b.toml`), without importing it
    # (`pktsim run` starts ~4 ms sooner); with `..` as given, which normpath would fold
    # away where pathlib keeps it (a symlink may come before it).
    p = os.fspath(path)
    if ".." not in p.split(os.sep):
        p = os.path.normpath(p)
    try:
        text = read_input_text(p, "scenario file")
    except InputFileError as e:
        err = ScenarioError(str(e))
        err.origin, err.path, err.value, err.expected = p, "", None, "a readable UTF-8 TOML file"
        raise err from None
    return text, p, os.path.dirname(p) or "."
