"""A pip install of pktsim brings the testbed's generator and sink: the package declares a
`pktsim-tb` entry point that runs the same Rust code as the standalone binary."""

import subprocess
import sys
from importlib.metadata import entry_points

import pktsim


def test_the_package_declares_pktsim_tb():
    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert scripts.get("pktsim-tb") == "pktsim._tb:main"
    assert scripts.get("pktsim") == "pktsim.cli:main"


def test_the_entry_point_is_the_generator_and_sink():
    def run(*a):
        return subprocess.run([sys.executable, "-m", "pktsim._tb", *a], capture_output=True, text=True, timeout=30)

    v = run("--version")
    assert v.returncode == 0 and v.stdout.strip() == f"pktsim-tb {pktsim.__version__}"
    bad = run("gen", "--bogus")
    assert bad.returncode == 2 and "unknown flag --bogus" in bad.stderr and "Traceback" not in bad.stderr
    assert "--rate" in run("gen", "--help").stdout
