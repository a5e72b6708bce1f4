import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# Tests send Ctrl-C (SIGINT) to pktsim processes they start. A test run started in the
# background without job control (`make test &` in a script, nohup) inherits SIGINT
# ignored, and so would every pktsim it starts: Python installs no handler for a signal
# ignored at its start. A handler here makes the children start with the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# pytest-xdist gives its workers COLUMNS (the width of the terminal that started them): the
# tables pktsim prints would wrap at it. Tests that need a width set COLUMNS themselves.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)


def run_cli(*args, check=True):
    """Run the installed ``pktsim`` command as a user would."""
    proc = subprocess.run([sys.executable, "-m", "pktsim", *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"pktsim {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


@pytest.fixture
def cli():
    return run_cli


def built_once(tmp_path_factory, name: str) -> None:
    """Fail if another worker of this run has built the shared fixture ``name`` already:
    SHARED_FIXTURES' groups keep its tests on one worker (pytest-xdist's ``loadgroup``),
    and a pytest that breaks the groups (9.2 with xdist 3.8) would build it on each."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        mark = tmp_path_factory.getbasetemp().parent / f"built-{name}"
        try:
            mark.touch(exist_ok=False)
        except FileExistsError:
            pytest.fail(f"{name} was built by two workers: the xdist_group of its tests was not kept (see SHARED_FIXTURES)")


@pytest.fixture(scope="session")
def _reproduce_all(tmp_path_factory):
    """``pktsim reproduce all --json --report DIR`` as a user runs it, once for every test
    that reads its JSON or its report."""
    import json

    built_once(tmp_path_factory, "reproduce-all")

    report = tmp_path_factory.mktemp("reproduce") / "report"
    proc = run_cli("reproduce", "all", "--json", "--report", report)
    out = json.loads(proc.stdout)
    assert isinstance(out, list), "reproduce all --json stays a list of papers"
    return out, report, proc.stderr


@pytest.fixture(scope="session")
def reproduced_all(_reproduce_all):
    """``reproduce all --json``'s list (each paper's object is the one ``reproduce PAPER
    --json`` prints)."""
    return _reproduce_all[0]


@pytest.fixture(scope="session")
def reproduced_report(_reproduce_all):
    """The directory ``reproduce all --report`` wrote with that JSON, and its stderr."""
    return _reproduce_all[1], _reproduce_all[2]


# `make test` runs the suite in two passes: every test not marked `serial` spread over the
# machine's CPUs (pytest-xdist, `-n auto --dist loadgroup`), then the `serial` ones alone.
# Serial: what measures the real kernel (the testbed's live runs, a tune check) and what
# holds a wall-clock bound (a signal's stop within a fraction of a second), which another
# test on the other CPU would make a test of the machine's load.
SERIAL_MODULES = {"test_testbed_live.py", "test_tune_check.py", "test_interrupt.py"}
# Tests that read one costly fixture run on one worker, which builds it once (every paper
# reproduced: about 25 s each way).
SHARED_FIXTURES = {"_reproduce_all": "reproduce-all", "cases": "fuzz-cases", "reproduced": "papers-in-process"}


# (First: xdist's own hook turns the groups into the test ids its scheduler reads; a group
# marked after it is ignored, and each worker built every shared fixture.)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
        for fixture, group in SHARED_FIXTURES.items():
            if fixture in item.fixturenames:
                item.add_marker(pytest.mark.xdist_group(group))
                break
