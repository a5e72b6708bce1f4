"""The Python tree is formatted and linted as pyproject.toml's ``[tool.ruff]`` says:
``ruff format --check`` and ``ruff check`` pass over the package, the tests, the benchmarks
and the examples' scripts (run ``ruff format`` and ``ruff check --fix`` to get there)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["python", *sorted(str(p.relative_to(ROOT)) for d in ("tests", "benchmarks", "examples") for p in (ROOT / d).glob("*.py"))]


def ruff() -> str:
    """The venv's ruff (beside the interpreter running the tests), else one on PATH."""
    here = Path(sys.executable).parent / "ruff"
    found = str(here) if here.is_file() else shutil.which("ruff")
    if not found:
        pytest.fail(f"ruff is missing: {sys.executable} -m pip install 'ruff>=0.8' (make install does)")
    return found


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([ruff(), *args, *PATHS], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_tree_is_formatted():
    proc = _ruff("format", "--check", "--diff")
    assert proc.returncode == 0, f"run `ruff format` (pyproject.toml's settings):\n{proc.stdout}{proc.stderr}"


def test_the_tree_is_linted():
    proc = _ruff("check", "--output-format", "concise")
    assert proc.returncode == 0, f"run `ruff check --fix`, then fix what is left:\n{proc.stdout}{proc.stderr}"
