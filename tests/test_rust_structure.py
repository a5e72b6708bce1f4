"""The Rust core's shape: no two modules import each other, even through a chain.

Modules are compared as siblings: an import from ``engine::io::napi`` of
``engine::nic::Irq`` is an edge ``io -> nic`` under ``engine``; from ``engine::costs`` of
``crate::model`` an edge ``engine -> model`` under the crate. A module using its own parent
or child (an ``impl`` in a submodule, a re-export) is no edge. Paths are read from the
source (``crate::``, ``super::``, ``self::`` and brace groups), comments and
``#[cfg(test)]`` modules left out, inline or in a file of their own (tests may reach
anywhere).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "crates" / "pktsim-core" / "src"


def module_of(path: Path) -> tuple[str, ...]:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")


def modules() -> dict[tuple[str, ...], Path]:
    """The crate's modules, without those declared `#[cfg(test)] mod name;` (test code in a
    file of its own) and their submodules."""
    files = {module_of(f): f for f in sorted(SRC.rglob("*.rs"))}
    tests = {mod + (m.group(1),) for mod, f in files.items() for m in TEST_MOD.finditer(f.read_text())}
    return {mod: f for mod, f in files.items() if not any(mod[: len(t)] == t for t in tests)}


def code_of(path: Path) -> str:
    text = path.read_text()
    # Test modules sit at the end of a file.
    m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text)
    if m:
        text = text[: m.start()]
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


PATH = re.compile(r"\b(crate|super|self)((?:::\w+)*)(::\{([^}]*)\})?")


def imports(mod: tuple[str, ...], code: str, known: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """Modules of the crate that `mod`'s code names."""
    out = set()

    def resolve(head: str, rest: list[str]) -> tuple[str, ...]:
        base = {"crate": (), "self": mod, "super": mod[:-1]}[head]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
        target = base
        for part in rest:
            if target + (part,) in known:
                target = target + (part,)
            else:
                break
        return target

    for m in PATH.finditer(code):
        head, rest = m.group(1), [p for p in m.group(2).split("::") if p]
        base = resolve(head, rest)
        out.add(base)
        for item in (m.group(4) or "").split(","):
            first = item.strip().split("::")[0].strip()
            if first and base + (first,) in known:
                out.add(base + (first,))
    return out


def sibling_graphs() -> dict[tuple[str, ...], dict[str, set[str]]]:
    """Parent module -> edges between its children."""
    mods = modules()
    known = set(mods)
    graphs: dict[tuple[str, ...], dict[str, set[str]]] = {}
    for mod, path in mods.items():
        for target in imports(mod, code_of(path), known):
            n = 0
            while n < min(len(mod), len(target)) and mod[n] == target[n]:
                n += 1
            if n == len(mod) or n == len(target):
                continue  # an ancestor or descendant
            graphs.setdefault(mod[:n], {}).setdefault(mod[n], set()).add(target[n])
    return graphs


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_reader_sees_the_crate():
    graphs = sibling_graphs()
    assert "io" in graphs[("engine",)] and "nic" in graphs[("engine",)]["io"], "engine::io uses engine::nic"
    assert "scenario" in graphs[()]["engine"]


@pytest.mark.parametrize("parent", sorted(sibling_graphs(), key=lambda p: "::".join(p)), ids=lambda p: "::".join(p) or "crate")
def test_no_import_circle(parent):
    cycle = find_cycle(sibling_graphs()[parent])
    assert cycle is None, f"modules of {'::'.join(parent) or 'the crate'} import each other: {' -> '.join(cycle)}"


def test_a_circle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_io_modes_reach_the_nic_only_through_its_methods():
    """Ring and vector state is private to the NIC: no I/O mode names a ring's fields."""
    for f in (SRC / "engine" / "io").rglob("*.rs"):
        code = code_of(f)
        for field in ("hw_avail", "unrefilled +=", ".frames", ".wake =", "counter_zero =", "last_write"):
            assert field not in code, f"{f.name} touches the NIC's {field}"
