"""Scenarios: a TOML file, TOML text or a Python dict, validated by pktsim's one schema.

The schema lives in the Rust core (serde types); this module only carries the text to it.
``Scenario.schema()`` returns the JSON Schema generated from those types. Overrides, units
and the core's parse are in :mod:`pktsim.parse` (re-exported here).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import _core
from .errors import ScenarioError  # noqa: F401 - as it always was here
from .parse import (  # noqa: F401 - re-exported: pktsim.scenario.unit_kind and friends
    BASE_UNITS,
    _check_profile_file,
    _normalise_sets,
    _value_text,
    parsed,
    quantity_text,
    read_scenario_file,
    resolve,
    unit_kind,
)

# typing is only needed by type checkers (annotations are not evaluated): not imported at
# run time, so that the command starts without it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class Scenario:
    """A validated scenario. Build with :meth:`load`, :meth:`from_toml` or :meth:`from_dict`."""

    text: str
    format: str
    origin: str
    base_dir: str
    sets: tuple[tuple[str, str], ...] = ()
    data: dict = field(default_factory=dict, compare=False, repr=False)

    def __repr__(self) -> str:
        extra = f", sets={[f'{k}={v}' for k, v in self.sets]}" if self.sets else ""
        return f"Scenario({self.name!r}, origin={self.origin!r}{extra})"

    @classmethod
    def _make(cls, text: str, fmt: str, origin: str, base_dir: str, sets) -> Scenario:
        sets_t = tuple(_normalise_sets(sets))
        return cls(text, fmt, origin, base_dir, sets_t, resolve(text, fmt, origin, base_dir, sets_t).data())

    @classmethod
    def load(cls, path: str | Path, sets=None) -> Scenario:
        """Read and validate a TOML scenario file."""
        text, origin, base_dir = read_scenario_file(path)
        return cls._make(text, "toml", origin, base_dir, sets)

    @classmethod
    def from_toml(cls, text: str, origin: str = "<toml text>", base_dir: str | Path = ".", sets=None) -> Scenario:
        return cls._make(text, "toml", origin, str(base_dir), sets)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], origin: str = "<python dict>", base_dir: str | Path = ".", sets=None) -> Scenario:
        """A scenario from a dict (as :meth:`to_dict` gives it); a value JSON cannot carry
        (NaN, infinity, another object) or nesting deeper than a scenario has raises
        :class:`~pktsim.errors.ScenarioError` naming the key."""
        _check_plain(data, origin)
        return cls._make(json.dumps(data, allow_nan=False, default=lambda o: o.item()), "json", origin, str(base_dir), sets)

    def with_set(self, key: str, value: Any) -> Scenario:
        """A copy with one more ``key=value`` override (as ``--set`` does)."""
        return self.with_sets([(key, value)])

    def with_sets(self, sets) -> Scenario:
        added = tuple(_normalise_sets(sets))
        new_sets = self.sets + added
        return replace(self, sets=new_sets, data=self._resolve(added).data())

    def _resolve(self, added=()) -> _core.Resolved:
        """The core's validated scenario with ``added`` overrides (``[(key, value text),
        ...]``) on top of this one's; a cost-profile file they name is checked first."""
        checks = any(k == "cost.profile" for k, _ in added)
        return resolve(self.text, self.format, self.origin, self.base_dir, [*self.sets, *added], check_profile=checks)

    @property
    def name(self) -> str:
        return self.data.get("name") or Path(self.origin).stem

    @property
    def seed(self) -> int:
        return int(self.data["seed"])

    def to_dict(self) -> dict:
        """The normalised scenario (every default filled in, every unit written out), as
        :meth:`from_dict` takes it back: a key with no value (null in the core's JSON) is
        left out, as a TOML file leaves it out."""

        def plain(v):
            if isinstance(v, dict):
                return {k: plain(x) for k, x in v.items() if x is not None}
            if isinstance(v, list):
                return [plain(x) for x in v]
            return v

        d = plain(json.loads(json.dumps(self.data)))
        if "nodes" in d:
            # A chain: its node names and links are derived from the nodes (each node's
            # name, and its [link]), not keys of the chain's file.
            d.pop("node_names", None)
            d.pop("links", None)
        return d

    @staticmethod
    def schema() -> dict:
        """JSON Schema of the scenario format."""
        return json.loads(_core.schema("scenario"))


# No scenario nests deeper (nodes.N.cpu.idle.states.N.name is 6).
MAX_DEPTH = 32


def _check_plain(value: Any, origin: str, path: str = "", depth: int = 0) -> None:
    """``value`` holds only what a scenario's JSON can: a ScenarioError names the first key
    that does not (a NaN or infinite number, an object of another type, too deep)."""
    import math

    def fail(expected: str, shown: str):
        e = ScenarioError(f"{origin}: {path or '(top)'} = {shown}: expected {expected}")
        e.origin, e.path, e.value, e.expected = origin, path, shown, expected
        raise e

    if depth > MAX_DEPTH:
        fail(f"a scenario nested at most {MAX_DEPTH} levels deep", "...")
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                fail("keys that are strings", repr(k))
            _check_plain(v, origin, f"{path}.{k}" if path else k, depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_plain(v, origin, f"{path}[{i}]", depth + 1)
    elif hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar
        _check_plain(value.item(), origin, path, depth)
    elif isinstance(value, float):
        if not math.isfinite(value):
            fail("a finite number (with its unit where the key has one)", repr(value))
    elif not (value is None or isinstance(value, (str, int, bool))):
        fail("a string, number, boolean, list or table", f"{type(value).__name__} {value!r}"[:80])


def as_scenario(obj: Scenario | str | Path | Mapping[str, Any], sets=None) -> Scenario:
    """Accept a Scenario, a path or a dict."""
    if isinstance(obj, Scenario):
        return obj.with_sets(sets) if sets else obj
    if isinstance(obj, (str, Path)):
        return Scenario.load(obj, sets)
    if isinstance(obj, Mapping):
        return Scenario.from_dict(obj, sets=sets)
    raise TypeError(f"expected a Scenario, a path or a dict, not {type(obj).__name__}")
