"""The scenario reference (``docs/scenario-reference.md``), generated from the scenario's
JSON Schema so that it cannot drift from the format: ``python -m pktsim.docgen`` rewrites
it, and a test fails when the committed file differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import _core

OUT = Path(__file__).resolve().parents[2] / "docs" / "scenario-reference.md"


# Quantities with units, as they are written.
UNIT_KINDS = {
    "Duration": 'time ("479ns")',
    "TimeSpan": 'time ("100ms")',
    "Bytes": 'size ("64B")',
    "Cycles": 'cycles ("200cycles")',
    "CyclesPerByte": 'cycles per byte ("0.5cycles/B")',
    "Frequency": 'frequency ("3.3GHz")',
    "BitRate": 'bit rate ("10Gbit/s")',
    "TimePerByte": 'time per byte ("2ns/B")',
    "Percent": 'share ("30%")',
    "OfferedRate": 'rate ("1.5Mpps", "5Gbit/s" or "80%")',
    "PacketSize": 'size ("64B", "imix" or a mix)',
}


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    for key in ("allOf", "anyOf", "oneOf"):
        if key in node and len(node[key]) >= 1:
            refs = [n for n in node[key] if "$ref" in n]
            if refs and len([n for n in node[key] if n.get("type") != "null"]) == 1:
                return _resolve(schema, refs[0])
    return node


def _kind(schema: dict, node: dict) -> str:
    r = _resolve(schema, node)
    if "enum" in r:
        return " / ".join(f"`{v}`" for v in r["enum"])
    if "oneOf" in r and all("const" in o or "enum" in o for o in r["oneOf"]):
        vals = [o.get("const", (o.get("enum") or [None])[0]) for o in r["oneOf"]]
        return " / ".join(f"`{v}`" for v in vals)
    t = r.get("type")
    if isinstance(t, list):
        t = " or ".join(x for x in t if x != "null")
    if t == "array":
        return "list"
    ref = node.get("$ref") or next((n["$ref"] for k in ("anyOf", "oneOf", "allOf") for n in node.get(k, []) if "$ref" in n), "")
    title = ref.rsplit("/", 1)[-1]
    if title in UNIT_KINDS:
        return UNIT_KINDS[title]
    return title if title and t in ("string", None) else (t or title or "value")


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def _alternative(schema: dict, alt: dict) -> dict:
    """One alternative of a tagged section as one table: its own keys (the tag among them)
    and those of the struct it refers to."""
    target = _resolve(schema, alt) if "$ref" in alt else alt
    return {
        **target,
        "properties": {**alt.get("properties", {}), **target.get("properties", {})},
        "required": alt.get("required", []) + target.get("required", []),
        "description": alt.get("description") or target.get("description"),
    }


def _alternatives(schema: dict, node: dict) -> list[dict]:
    """A tagged section's alternatives (each a table of its own), or []."""
    r = _resolve(schema, node)
    alts = [_alternative(schema, a) for a in r.get("oneOf", [])]
    return alts if alts and all(any("const" in v for v in a.get("properties", {}).values()) for a in alts) else []


def _tag_of(alt: dict) -> tuple[str, str]:
    """The tag's key and value of one alternative of a tagged section."""
    return next((k, v["const"]) for k, v in alt["properties"].items() if "const" in v)


def _row(schema: dict, key: str, sub: dict, required: bool, defaults: dict | None = None) -> str:
    d = sub.get("default", (defaults or {}).get(key, ""))
    d = "" if d in ("", None) or isinstance(d, (dict, list)) else f"`{json.dumps(d) if not isinstance(d, str) else d}`"
    desc = _one_line(sub.get("description") or _resolve(schema, sub).get("description"))
    kind = _kind(schema, sub)
    # A declared range (scenario/ranges.rs) and the key's Linux name, as the core declares them.
    if "x-quantity" in sub:
        kind += f", {sub.get('minimum')} to {sub.get('maximum')}"
    linux = sub.get("x-linux")
    if linux and linux not in desc:
        desc += f" Linux: `{linux}`."
    return f"| `{key}` | {kind} | {d} | {desc}{' (required)' if required else ''} |"


def _tagged(schema: dict, node: dict, path: str, out: list[str]) -> None:
    r = _resolve(schema, node)
    alts = _alternatives(schema, node)
    tag = _tag_of(alts[0])[0]
    default = next((_tag_of(a)[1] for a in alts if a["properties"][tag].get("default") == _tag_of(a)[1]), None)
    out += [f"## `[{path}]`", ""]
    if r.get("description"):
        out += [_one_line(r["description"]), ""]
    values = ", ".join(f"`{_tag_of(a)[1]}`" for a in alts)
    out += [f"`{tag}` picks one of {values}" + (f" (default: `{default}`)" if default else "") + "; each reads only the keys listed under it.", ""]
    # Keys every alternative reads, beside the tag.
    common = r.get("properties") or {}
    if common:
        out += ["Every alternative reads:", "", "| key | value | default | meaning |", "|---|---|---|---|"]
        out += [_row(schema, k, v, k in r.get("required", [])) for k, v in common.items()]
        out.append("")
    # Tables of their own, described once after the alternatives, with those that read them.
    nested: dict[str, list[tuple[dict, str]]] = {}
    for alt in alts:
        value = _tag_of(alt)[1]
        out += [f'### `{path}.{tag} = "{value}"`', ""]
        if alt.get("description"):
            out += [_one_line(alt["description"]), ""]
        keys = {k: v for k, v in alt["properties"].items() if k != tag}
        if not keys:
            out += ["No keys of its own.", ""]
            continue
        out += ["| key | value | default | meaning |", "|---|---|---|---|"]
        for key, sub in keys.items():
            full = f"{path}.{key}"
            if _resolve(schema, sub).get("properties") or _alternatives(schema, sub):
                nested.setdefault(full, []).append((sub, value))
                out.append(f"| `{key}` | table | | see [`[{full}]`](#{full.replace('.', '')}) |")
            else:
                out.append(_row(schema, key, sub, key in alt.get("required", [])))
        out.append("")
    for full, subs in nested.items():
        node = subs[0][0]
        refs = {json.dumps(sub, sort_keys=True) for sub, _ in subs}
        if len(refs) > 1:
            # One table that alternatives read differently: every key, each said where only
            # some of them read it.
            tables = [(_resolve(schema, sub), v) for sub, v in subs]
            props: dict = {}
            for t, _ in tables:
                props.update(t.get("properties", {}))
            for key, sub in props.items():
                only = [v for t, v in tables if key in t.get("properties", {})]
                if len(only) < len(tables):
                    where = ", ".join(f'`{path}.{tag} = "{v}"`' for v in only)
                    props[key] = {**sub, "description": f"{sub.get('description', '')} (only {where})"}
            common = (tables[0][0].get("description") or "").split(" (")[0]
            node = {"type": "object", "properties": props, "description": common}
        at = len(out)
        _table(schema, node, full, out)
        if len(out) > at + 1:
            modes = ", ".join(f'`{path}.{tag} = "{v}"`' for _, v in subs)
            out.insert(at + 2, f"Read with {modes}.")
            out.insert(at + 3, "")


def _table(schema: dict, node: dict, path: str, out: list[str]) -> None:
    if _alternatives(schema, node):
        _tagged(schema, node, path, out)
        return
    r = _resolve(schema, node)
    props = r.get("properties")
    if not props:
        return
    defaults = node.get("default", r.get("default", {})) if isinstance(node.get("default", r.get("default", {})), dict) else {}
    out += [f"## `[{path}]`" if path else "## top level", ""]
    if r.get("description"):
        out += [_one_line(r["description"]), ""]
    out += ["| key | value | default | meaning |", "|---|---|---|---|"]
    nested = []
    for key, sub in props.items():
        full = f"{path}.{key}" if path else key
        subr = _resolve(schema, sub)
        if subr.get("properties") or _alternatives(schema, sub):
            nested.append((full, sub))
            out.append(f"| `{key}` | table | | see [`[{full}]`](#{full.replace('.', '')}) |")
            continue
        d = sub.get("default", defaults.get(key, ""))
        d = "" if d in ("", None) or isinstance(d, (dict, list)) else f"`{json.dumps(d) if not isinstance(d, str) else d}`"
        desc = _one_line(sub.get("description") or subr.get("description"))
        out.append(f"| `{key}` | {_kind(schema, sub)} | {d} | {desc} |")
    out.append("")
    for full, sub in nested:
        _table(schema, sub, full, out)


def scenario_reference() -> str:
    schema = json.loads(_core.schema("scenario"))
    out = [
        "# Scenario reference",
        "",
        "Generated from the scenario format's JSON Schema (`pktsim schema`) by `python -m pktsim.docgen`;",
        'do not edit by hand. Values with units are strings ("479ns", "3.3GHz", "10Gbit/s", "64B").',
        "",
    ]
    _table(schema, schema, "", out)
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(scenario_reference())
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
