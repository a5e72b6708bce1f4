"""A pip install of pktsim brings the testbed's generator and sink: the package declares a
`pktsim-tb` entry point that runs the same Rust code as the standalone binary."""

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

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


def test_pktsim_examples_lists_and_copies_what_ships(tmp_path):
    from conftest import run_cli

    listing = run_cli("examples").stdout
    for name in ("linux-router-64B.toml", "tutorial.ipynb", "forwarding-veth.perf.gz", "hosts"):
        assert name in listing, name
    out = tmp_path / "ex"
    run_cli("examples", "--copy", out)
    assert (out / "linux-router-64B.toml").is_file() and (out / "hosts" / "ixgbe" / "lscpu.txt").is_file()
    assert (out / "tutorial.ipynb").read_bytes() == pktsim.bundled.tutorial().read_bytes()
    # A copied scenario that names another file (a trace) runs where it was copied.
    run_cli("run", out / "router-trace.toml", "--set", "measure.duration=1ms")
    again = run_cli("examples", "--copy", out, check=False)
    assert again.returncode == 2 and "already there" in again.stderr


def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_readme_tour(tmp_path):
    """The wheel `make test` builds (target/wheels-PROFILE) in a venv of its own, with only
    the libraries pktsim needs beside it: the examples and the tutorial are in it, and the
    README's tour runs from a copy of them."""
    import glob
    import os
    import sysconfig

    from conftest import ROOT

    wheels = sorted(glob.glob(str(ROOT / "target" / "wheels-*" / "pktsim-*.whl")), key=os.path.getmtime)
    assert wheels, "no wheel: `make test` builds one (make wheel)"
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    py = venv / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheels[-1]], check=True)
    # The libraries pktsim needs, from this environment (a path after the venv's own).
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    bin_ = venv / "bin"

    def run(*a, cwd=tmp_path):
        p = subprocess.run([bin_ / "pktsim", *map(str, a)], capture_output=True, text=True, cwd=cwd, timeout=300)
        assert p.returncode == 0, (a, p.stderr)
        return p

    where = subprocess.run([py, "-c", "import pktsim; print(pktsim.__file__)"], capture_output=True, text=True, check=True).stdout
    assert str(venv) in where, where
    run("examples", "--copy", "examples")
    ex = tmp_path / "examples"
    assert (ex / "tutorial.ipynb").is_file() and (ex / "forwarding-veth.perf.gz").is_file()
    # The README's tour, from the copy.
    run("model", "examples/linux-router-64B.toml")
    run("run", "examples/beifuss2015-napi.toml", "--set", "measure.duration=20ms")
    run("sweep", "examples/beifuss2015-napi.toml", "--param", "traffic.rate", "--values", "0.5Mpps,1Mpps", "--set", "measure.duration=5ms", "--jobs", "1")
    run("calibrate", "examples/forwarding-veth.perf.gz", "--rate", "40kpps", "--frames", "120000", "--freq", "2.445GHz")
    run("reproduce", "004")
    run("import-host", "--from", "examples/hosts/ixgbe")
