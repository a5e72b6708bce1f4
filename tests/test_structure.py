"""The package's shape: every module imports, and no two modules import each other, even
through a chain or inside a function.

The graph is read from the source with ``ast`` (module-level and function-level ``import``
and ``from ... import`` statements alike), so a circle is caught even when it only closes
at call time. ``from . import name`` counts as an edge to the submodule ``name`` when
there is one, else to the package itself.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pktsim

PACKAGE = "pktsim"
ROOT = Path(pktsim.__file__).resolve().parent


def modules() -> dict[str, Path]:
    """Dotted name -> source file of every Python module in the package."""
    out = {}
    for f in sorted(ROOT.rglob("*.py")):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([PACKAGE, *parts])] = f
    return out


def extensions() -> set[str]:
    """Compiled modules (the Rust core): leaves of the graph, importing nothing of ours."""
    out = {f"{PACKAGE}._core"}  # wherever the build put it
    for f in ROOT.rglob("*"):
        if f.suffix in (".so", ".pyd"):
            parts = list(f.relative_to(ROOT).parts)
            parts[-1] = parts[-1].split(".", 1)[0]
            out.add(".".join([PACKAGE, *parts]))
    return out


def _resolve(mod: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of ``from <level dots><target>`` written in ``mod``."""
    if level == 0:
        return target or ""
    base = mod.split(".") if is_package else mod.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in its source)."""
    sources = modules()
    mods = set(sources) | extensions()
    graph: dict[str, set[str]] = {m: set() for m in mods}

    def known(name: str) -> str | None:
        # `import pktsim.a.b` or `from pktsim.a import b`: the longest prefix that is a module.
        parts = name.split(".")
        while parts:
            candidate = ".".join(parts)
            if candidate in mods:
                return candidate
            parts.pop()
        return None

    for mod, path in sources.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(mod, is_package, node.level, node.module)
                for a in node.names:
                    sub = f"{src}.{a.name}"
                    targets.append(sub if sub in mods else src)
            for t in targets:
                k = known(t)
                if k and k != mod:
                    graph[mod].add(k)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of modules (first == last), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {m: WHITE for m in graph}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        colour[m] = GREY
        stack.append(m)
        for n in sorted(graph[m]):
            if colour[n] == GREY:
                return stack[stack.index(n) :] + [n]
            if colour[n] == WHITE:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        colour[m] = BLACK
        return None

    for m in sorted(graph):
        if colour[m] == WHITE:
            found = visit(m)
            if found:
                return found
    return None


MAX_LINES = 600


def test_no_module_is_over_600_lines():
    # A module that grows past this is split along its seams (a package of modules that
    # still gives every name it gave).
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_every_module_imports():
    for name in modules():
        if name == f"{PACKAGE}.__main__":
            continue  # runs the command on import
        importlib.import_module(name)


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_sees_a_cycle():
    # The check above is only as good as this: an edge back must be reported.
    graph = import_graph()
    assert "pktsim.sim" in graph["pktsim.experiments.tasks"], "a sweep's tasks run through sim"
    graph["pktsim.sim"] = graph["pktsim.sim"] | {"pktsim.experiments.tasks"}
    assert find_cycle(graph) is not None


def test_function_level_imports_count():
    # `from ..calibrate import bar_chart` inside paper000's figures() is an edge.
    assert "pktsim.calibrate" in import_graph()["pktsim.reproduce.paper000"]


def test_the_core_layers_do_not_reach_up():
    # The library's lower layers never import the command line or the reproductions.
    graph = import_graph()
    upper = {f"{PACKAGE}.cli", f"{PACKAGE}.commands", f"{PACKAGE}.report", f"{PACKAGE}.__main__"}
    upper |= {m for m in graph if m.startswith(f"{PACKAGE}.commands.")}  # a module per family of commands
    for mod, deps in graph.items():
        if mod not in upper:
            assert not deps & upper, f"{mod} imports {deps & upper}"
    rows = f"{PACKAGE}.reproduce.rows"
    assert graph[rows] <= {f"{PACKAGE}.textio"}, f"{rows} imports {graph[rows]}"


HEAVY = ("pandas", "numpy", "matplotlib", "pyarrow", "dask", "distributed", "tqdm", f"{PACKAGE}.experiments", f"{PACKAGE}.plots")


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running ``code``."""
    import subprocess
    import sys

    probe = code + "\nimport sys as _s, json as _j\n_s.stderr.write('\\nMODULES ' + _j.dumps(sorted(_s.modules)))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT.parent.parent)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stderr.rsplit("MODULES ", 1)[1]))


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_pktsim_run_starts_without_pandas_matplotlib_or_the_sweep_machinery():
    mods = _modules_after(
        "from pktsim.cli import main\nassert main(['run', 'examples/linux-router-64B.toml', '--set', 'measure.duration=100us', '--json']) == 0"
    )
    assert f"{PACKAGE}.sim" in mods
    assert _heavy(mods) == []
    # Nor the Scenario class with dataclasses and inspect (~9 ms), nor typing, nor the other
    # commands' code (compiling it without bytecode took ~20 ms), nor pathlib (with
    # urllib.parse and ipaddress, ~4 ms): the command has 60 ms to start, run a tiny
    # scenario and print it.
    assert not {f"{PACKAGE}.scenario", f"{PACKAGE}.commands", "dataclasses", "typing", "pathlib"} & mods


def test_import_pktsim_is_light_and_its_names_come_when_used():
    assert _heavy(_modules_after("import pktsim")) == []
    mods = _modules_after(
        "import pktsim\n"
        "assert callable(pktsim.sweep) and callable(pktsim.summarize) and pktsim.plots.throughput_vs_load\n"
        "assert pktsim.sim.run is pktsim.run and pktsim.Scenario.__name__ == 'Scenario'\n"
        "assert set(pktsim.__all__) <= set(dir(pktsim))\n"
        "ns = {}\n"
        "exec('from pktsim import *', ns)\n"
        "assert all(name in ns for name in pktsim.__all__)\n"
        "try:\n"
        "    pktsim.no_such_name\n"
        "except AttributeError as e:\n"
        "    assert 'no_such_name' in str(e)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n"
    )
    assert f"{PACKAGE}.experiments" in mods and f"{PACKAGE}.plots" in mods
