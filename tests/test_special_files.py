"""Special files where pktsim reads and writes: a FIFO, a device, a directory, a symlink,
``/proc`` and ``/dev/zero`` given as any input or output. Every case ends at once in a clean
error naming the file (exit 1 or 2), or in a result where the file is a fine one (a symlink
to a regular file); nothing blocks, nothing fills memory, and no special file is replaced.
The cases run on the fuzz test's workers (in-process ``main(argv)``, a timeout per case)."""

from __future__ import annotations

import os
import shutil
import stat

import pytest
from test_fuzz import describe, run_cases
from test_fuzz_cases import ROOT, SHORT

EXAMPLES = ROOT / "examples"
TIMEOUT_S = 15


@pytest.fixture(scope="module")
def specials(tmp_path_factory):
    d = tmp_path_factory.mktemp("special")
    os.mkfifo(d / "fifo")
    (d / "dir").mkdir()
    (d / "link-fifo").symlink_to(d / "fifo")
    (d / "link-zero").symlink_to("/dev/zero")
    shutil.copy(EXAMPLES / "linux-router-64B.toml", d / "router.toml")
    (d / "link-router.toml").symlink_to(d / "router.toml")
    # Scenarios whose cost profile, pcap or chain node file is each special file.
    for kind in ("fifo", "dir", "link-fifo", "link-zero", "/dev/zero", "/proc/self/status"):
        tag = kind.strip("/").replace("/", "-")
        text = (EXAMPLES / "router-trace.toml").read_text().replace('pcap = "trace-small.pcap"', f'pcap = "{kind}"')
        (d / f"pcap-{tag}.toml").write_text(text)
        text = (EXAMPLES / "linux-router-64B.toml").read_text()
        (d / f"profile-{tag}.toml").write_text(text.replace('profile = "raumer2015-64B"', f'profile = "{kind}"'))
        text = (EXAMPLES / "router-firewall-chain.toml").read_text().replace('file = "linux-router-64B.toml"', f'file = "{kind}"')
        (d / f"chain-{tag}.toml").write_text(text)
    return d


INPUTS = ("fifo", "dir", "link-fifo", "link-zero", "/dev/zero", "/proc/self/status")


def _path(d, kind: str) -> str:
    return kind if kind.startswith("/") else str(d / kind)


def test_special_inputs_are_refused_at_once(specials):
    d = specials
    cases = []
    for kind in INPUTS:
        p, tag = _path(d, kind), kind.strip("/").replace("/", "-")
        for argv in (
            ["run", p, *SHORT],
            ["model", p],
            ["sweep", p, "--param", "traffic.rate", "--values", "1Mpps,2Mpps", *SHORT],
            ["trace-info", p],
            ["calibrate", p, "--frequency", "3GHz"],
            ["calibrate", str(ROOT / "tests" / "data" / "perf-script.txt"), "--rules", p, "--frequency", "3GHz"],
            ["testbed", "plot", p, "-o", str(d / "out.png")],
            ["run", str(d / f"pcap-{tag}.toml"), *SHORT],
            ["run", str(d / f"profile-{tag}.toml"), *SHORT],
            ["model", str(d / f"profile-{tag}.toml")],
            ["run", str(d / f"chain-{tag}.toml"), *SHORT],
        ):
            cases.append({"argv": argv, "what": kind})
    failures = run_cases(cases, timeout=TIMEOUT_S)
    assert not failures, describe(failures)
    # And each one said what the file was: never a silent success on a FIFO or a device.
    proc_cases = [c for c in cases if c["what"] != "/proc/self/status" and c["argv"][0] in ("run", "model", "trace-info")]
    from test_fuzz import Worker

    w = Worker()
    try:
        for c in proc_cases[:12]:
            res = w.run(c["argv"], TIMEOUT_S)
            assert res["rc"] == 2, (c, res)
            assert any(k in res["err"] for k in ("FIFO", "a device", "a directory", "regular file")), (c, res["err"])
    finally:
        w.close()
    assert stat.S_ISFIFO(os.stat(d / "fifo").st_mode)


def test_a_symlink_to_a_regular_file_is_followed(specials):
    from conftest import run_cli

    proc = run_cli("model", specials / "link-router.toml")
    assert proc.returncode == 0 and "Mpps" in proc.stdout, proc.stderr


@pytest.mark.parametrize("target", ["/dev/null", "fifo", "dir", "link-zero"])
def test_special_outputs_are_refused_before_any_work(specials, target):
    """-o, --plot and --report naming a device, a FIFO or a directory (or a symlink to a
    device): exit 2 naming it, before any run, and the file is still what it was."""
    d = specials
    p = _path(d, target)
    before = os.stat(p).st_mode
    cases = [
        {"argv": ["schema", "-o", p], "what": target},
        {"argv": ["run", str(EXAMPLES / "linux-router-64B.toml"), *SHORT, "--set", "measure.interval=100us", "--plot", p], "what": target},
        {"argv": ["sweep", str(EXAMPLES / "linux-router-64B.toml"), "--param", "traffic.rate", "--values", "1Mpps", "-o", p, *SHORT], "what": target},
        {"argv": ["import-host", "--from", str(ROOT / "tests" / "data" / "hosts" / "ixgbe"), "-o", p], "what": target},
    ]
    if target != "dir":
        cases.append({"argv": ["reproduce", "000", "--report", p], "what": target})
    failures = run_cases(cases, timeout=TIMEOUT_S)
    assert not failures, describe(failures)
    from test_fuzz import Worker

    w = Worker()
    try:
        for c in cases:
            res = w.run(c["argv"], TIMEOUT_S)
            assert res["rc"] == 2 and p in res["err"], (c, res)
    finally:
        w.close()
    assert os.stat(p).st_mode == before
    if target == "link-zero":
        assert os.path.islink(p)


def test_a_symlinked_output_is_written_through_the_link(specials, tmp_path):
    from conftest import run_cli

    real = tmp_path / "schema.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    proc = run_cli("schema", "-o", link)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and real.read_text().startswith("{")


def test_an_interrupted_report_leaves_no_empty_directory(tmp_path):
    """The report directory is made when there is something to write in it: a run that stops
    first (here: a bad paper name, after the outputs were checked) leaves nothing."""
    from conftest import run_cli

    out = tmp_path / "a" / "report"
    proc = run_cli("reproduce", "nosuchpaper", "--report", out, check=False)
    assert proc.returncode == 2
    assert not (tmp_path / "a").exists()
