"""What the scenario format declares, as the core declares it: read from its JSON Schema
(``pktsim schema``, parsed once per process) or, where the schema does not say it, asked of
the core by loading a scenario. Python restates none of it.

- :func:`tagged`: a tagged section (``host.io``: the I/O modes; ``nic.itr.mode``: the
  moderation policies), its alternatives in the format's order, its default, and which
  keys each alternative reads (:meth:`Tagged.reads`): the keys of its table from the
  schema; keys of other sections that only some alternatives read (``nic.itr``,
  ``nic.napi.defer_hard_irqs``) as the core's check of a scenario's table answers.
- :func:`io_modes` / :func:`io_mode`: the I/O modes, the one registry of them.
- :func:`values`: the names a key takes (``nic.itr.profile``: the DIM tables).
- :func:`aliases`: the other names the core accepts for a key (its Linux name), as the
  key declares them in the schema (``x-aliases``: ``rx_usecs`` for ``nic.itr.interval``).
- :func:`largest`: the largest whole number a key takes, as the core's checks answer.

Only ``json`` and the core are imported here, so that
``pktsim run`` can use it without slowing its start.
"""

from __future__ import annotations

import functools
import json

from . import _core


@functools.cache
def schema() -> dict:
    """The scenario format's JSON Schema (parsed once)."""
    return json.loads(_core.schema("scenario"))


def _defs() -> dict:
    return schema().get("$defs", {})


def _deref(node: dict) -> dict:
    """A node with its ``$ref`` followed, and a nullable one (``anyOf`` [X, null]) as X."""
    while isinstance(node, dict):
        if "$ref" in node and "oneOf" not in node and "properties" not in node:
            node = _defs().get(node["$ref"].rsplit("/", 1)[-1], {})
            continue
        alts = [a for a in node.get("anyOf", []) if a.get("type") != "null"]
        if len(alts) == 1 and "properties" not in node:
            node = alts[0]
            continue
        return node
    return {}


def _alternative(alt: dict) -> dict:
    """One alternative of a tagged section as one table: its own properties (the tag) and
    those of the type it refers to."""
    target = _deref({"$ref": alt["$ref"]}) if "$ref" in alt else {}
    return {
        "properties": {**target.get("properties", {}), **alt.get("properties", {})},
        "required": list(alt.get("required", [])) + list(target.get("required", [])),
        "description": alt.get("description") or target.get("description") or "",
    }


def _alternatives(node: dict) -> list[dict]:
    """A tagged section's alternatives (each a table with a ``const`` tag), or []."""
    alts = [_alternative(a) for a in _deref(node).get("oneOf", []) if isinstance(a, dict) and ("$ref" in a or "properties" in a)]
    if alts and all(any("const" in v for v in a["properties"].values()) for a in alts):
        return alts
    return []


def _children(node: dict) -> dict:
    """The keys of a table node: its own, and every alternative's when it is tagged."""
    node = _deref(node)
    out = dict(node.get("properties", {}))
    for alt in _alternatives(node):
        for k, v in alt["properties"].items():
            out.setdefault(k, v)
    return out


def node(path: str) -> dict | None:
    """The schema of a dotted key (``nic.itr.interval``), its ``$ref`` followed; None for a
    key the format does not have. A key of a tagged section is found in whichever
    alternative reads it."""
    cur: dict = schema()
    for part in path.split("."):
        children = _children(cur)
        if part not in children:
            return None
        cur = children[part]
    return cur


def _leaves(props: dict, prefix: str, seen: tuple = ()) -> list[str]:
    """The dotted keys of a table's properties, a sub-table's keys as well as the sub-table."""
    out = []
    for k, v in props.items():
        path = f"{prefix}.{k}" if prefix else k
        out.append(path)
        ref = v.get("$ref") or next((a["$ref"] for a in v.get("anyOf", []) if "$ref" in a), None)
        if ref in seen:
            continue
        sub = _deref(v)
        if sub.get("properties") and not _alternatives(sub):
            out += _leaves(sub["properties"], path, seen + (ref,))
    return out


class Alternative:
    """One alternative of a tagged section: its tag value (``name``), its doc string, and
    the keys its table reads (``keys``: dotted paths from the scenario's top, its own and
    those every alternative reads)."""

    __slots__ = ("section", "name", "description", "keys", "required", "default")

    def __init__(self, section: Tagged, name: str, description: str, keys: frozenset, required: tuple, default: bool):
        self.section, self.name, self.description = section, name, description
        self.keys, self.required, self.default = keys, required, default

    def reads(self, key: str) -> bool:
        """Whether this alternative reads ``key`` (a dotted path from the scenario's top)."""
        return self.section.reads(self.name, key)

    def __repr__(self) -> str:
        return f"<{self.section.tag_path} = {self.name!r}>"


class Tagged:
    """A tagged section: the table at ``path`` whose key ``tag`` picks one of
    ``alternatives`` (in the format's order); ``default`` is the one a table without the
    tag is."""

    def __init__(self, tag_path: str):
        path, _, tag = tag_path.rpartition(".")
        found = node(path) if path else schema()
        alts = _alternatives(found) if found is not None else []
        if not alts or not all(tag in a["properties"] and "const" in a["properties"][tag] for a in alts):
            raise KeyError(f"{tag_path}: not the tag of a tagged section of the scenario format")
        self.path, self.tag, self.tag_path = path, tag, tag_path
        common = {k: v for k, v in _deref(found).get("properties", {}).items()}
        self.alternatives: dict[str, Alternative] = {}
        for a in alts:
            name = a["properties"][tag]["const"]
            own = {k: v for k, v in a["properties"].items() if k != tag}
            keys = frozenset(f"{path}.{k}" for k in _leaves({**common, **own}, ""))
            required = tuple(k for k in a["required"] if k != tag)
            # The default alternative is the one whose tag the schema gives as the default.
            default = a["properties"][tag].get("default") == name
            self.alternatives[name] = Alternative(self, name, a["description"], keys, required, default)
        defaults = [a.name for a in self.alternatives.values() if a.default]
        if len(defaults) != 1:
            raise KeyError(f"{tag_path}: the schema marks {len(defaults)} alternatives as the default")
        self.default = defaults[0]

    @property
    def names(self) -> tuple:
        return tuple(self.alternatives)

    def __getitem__(self, name: str) -> Alternative:
        return self.alternatives[name]

    def reads(self, name: str, key: str) -> bool:
        """Whether alternative ``name`` reads ``key`` (a dotted path from the scenario's
        top). A key of the section's table: whether the alternative's table has it (the
        schema). A key elsewhere: whether the core takes it, set apart from its default,
        with this alternative (a key no alternative is refused with is read by all)."""
        if name not in self.alternatives:
            raise KeyError(f"{self.tag_path} = {name!r}: expected one of {', '.join(self.alternatives)}")
        if key == self.path or key.startswith(self.path + "."):
            return key in self.alternatives[name].keys
        return _taken_with(self.tag_path, name, key)

    def readers(self, key: str) -> tuple:
        """The alternatives that read ``key``, in the format's order."""
        return tuple(n for n in self.alternatives if self.reads(n, key))


@functools.cache
def tagged(tag_path: str) -> Tagged:
    """The tagged section whose tag is at ``tag_path`` (``host.io``, ``nic.itr.mode``)."""
    return Tagged(tag_path)


def io_modes() -> tuple:
    """Every I/O mode (``host.io``), in the format's order: the one registry of them."""
    return tuple(tagged("host.io").alternatives.values())


def io_mode(name: str | None = None) -> Alternative:
    """The I/O mode ``name`` (None: the default one); KeyError for a name the format does
    not have."""
    section = tagged("host.io")
    return section[section.default if name is None else name]


def values(key: str) -> tuple:
    """The names ``key`` takes where its value is one of a list (``nic.itr.profile``: the
    DIM tables; a tag: its section's alternatives), in the format's order; () for any
    other key."""
    section, _, last = key.rpartition(".")
    if _tag_of(section) == last:
        return tagged(key).names
    n = node(key)
    if n is None:
        return ()
    n = _deref(n)
    if "enum" in n:
        return tuple(n["enum"])
    return tuple(a["const"] for a in n.get("oneOf", []) if isinstance(a, dict) and "const" in a)


@functools.cache
def _all_aliases() -> dict:
    out: dict = {}

    def walk(props: dict, prefix: str, seen: tuple) -> None:
        for k, v in props.items():
            path = f"{prefix}.{k}" if prefix else k
            for other in v.get("x-aliases") or ():
                full = f"{prefix}.{other}" if prefix else other
                if full not in out.setdefault(path, ()):
                    out[path] += (full,)
            ref = v.get("$ref") or next((a["$ref"] for a in v.get("anyOf", []) if "$ref" in a), None)
            if ref not in seen:
                walk(_children(v), path, seen + (ref,))

    walk(_children(schema()), "", ())
    return out


def aliases(key: str) -> tuple:
    """The other names the core accepts for ``key``, as dotted paths
    (``aliases("nic.itr.interval") == ("nic.itr.rx_usecs",)``): those the key declares in
    the schema (``x-aliases``, beside serde's ``alias``; a core test keeps the two equal)."""
    return _all_aliases().get(key, ())


def linux(key: str) -> str:
    """The kernel's (or the driver's, or ethtool's) name for ``key`` as the core declares
    it (``x-linux`` in the schema; ``linux("nic.rx_ring") == "ethtool -G rx"``), or ""."""
    n = node(key)
    return (n or {}).get("x-linux", "")


def bounds(key: str) -> tuple:
    """The declared range of a whole-number key, ``(minimum, maximum)`` (either None where
    the schema gives none): the range the core checks (``scenario/ranges.rs``)."""
    n = node(key) or {}
    branches = [n, *(b for b in n.get("anyOf", ()) if isinstance(b, dict))]
    for b in branches:
        if "maximum" in b or "minimum" in b:
            return b.get("minimum"), b.get("maximum")
    return None, None


# ----- asking the core --------------------------------------------------------------------


def _refusal(text: str, sets: tuple):
    """The core's refusal of scenario ``text`` with ``sets``, or None when it takes it."""
    from .errors import ScenarioError

    try:
        _core.Parsed(text, "toml", "pktsim.schema_info", ".").resolve(list(sets))
    except ScenarioError as e:
        return e
    return None


def refused_with(data: dict, key: str, value: str):
    """The core's refusal of ``key = value`` in scenario ``data`` (a dict), or None where it
    takes it there (a refusal elsewhere in ``data``, a profile file it cannot find from
    here, does not count)."""
    import json

    from .errors import ScenarioError

    try:
        _core.Parsed(json.dumps(data, default=str), "json", "pktsim.schema_info", ".").resolve([(key, value)])
    except ScenarioError as e:
        return e if _refused_at(e, key) else None
    return None


def _refused_at(err, key: str) -> bool:
    path = getattr(err, "path", "") or ""
    return bool(path) and (key == path or key.startswith(path + "."))


def _tag_of(section: str) -> str | None:
    """The tag's key of the tagged section at ``section``, or None."""
    alts = _alternatives(node(section) or {}) if section else []
    return next((k for k, v in alts[0]["properties"].items() if "const" in v), None) if alts else None


def _other_value(key: str) -> tuple:
    """``key`` (or the key to set for it) and a value other than its default, as ``--set``
    text: for a tagged section or its tag, an alternative other than the default that
    needs no other key; a flag flipped; a number one more; a time of 1us (or 2us)."""
    n = node(key)
    if n is None:
        raise KeyError(f"{key}: not a key of the scenario format")
    section, _, last = key.rpartition(".")
    tag_path = f"{key}.{_tag_of(key)}" if _tag_of(key) else (key if _tag_of(section) == last else None)
    if tag_path is not None:
        t = tagged(tag_path)
        return tag_path, next(a.name for a in t.alternatives.values() if not a.default and not a.required)
    d = n.get("default")
    kind = _deref(n).get("type")
    if kind == "boolean":
        return key, "false" if d else "true"
    if kind == "integer":
        return key, str((d or 0) + 1)
    if (n.get("$ref") or "").rsplit("/", 1)[-1] in ("Duration", "TimeSpan"):
        return key, "2us" if d == "1us" else "1us"
    raise KeyError(f"{key}: no value other than its default to ask the core with")


@functools.cache
def _taken_with(tag_path: str, name: str, key: str) -> bool:
    """Whether the core takes ``key`` (at a value other than its default) with
    ``tag_path = name``: keys of other sections that only some alternatives read are
    refused, naming the key, before anything else of the scenario is read."""
    err = _refusal("", ((tag_path, name), _other_value(key)))
    return not _refused_at(err, key)


# The smallest scenario the core runs, for asking it about one key's values.
_PROBE = '[cpu]\nfrequency = "3GHz"\n[link]\nrate = "10Gbit/s"\n[traffic]\nrate = "1Mpps"\n[host]\nt_proc = "100ns"\n'


@functools.cache
def largest(key: str, unit: str = "", sets: tuple = (), start: int = 1) -> int | None:
    """The largest whole number ``n`` for which the core takes ``key = "{n}{unit}"`` (with
    ``sets``, pairs of key and text, to put the key in play), or None when it takes every
    value up to 2**40: the key's range as the core checks it
    (``largest("nic.itr.interval", "us", (("nic.itr.mode", "static"),)) == 1022``)."""

    def takes(n: int) -> bool:
        err = _refusal(_PROBE, (*sets, (key, f"{n}{unit}")))
        if err is not None and not _refused_at(err, key):
            raise RuntimeError(f"asking the core about {key} = {n}{unit}: the probe scenario is refused elsewhere: {err}")
        return err is None

    if not takes(start):
        raise ValueError(f"{key} = {start}{unit}: the core refuses it, so it has no range starting there")
    lo, hi = start, max(2 * start, start + 1)
    while takes(hi):
        if hi > 1 << 40:
            return None
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if takes(mid) else (lo, mid)
    return lo
