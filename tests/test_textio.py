"""Files pktsim writes: all or nothing, with the mode any new file gets under the umask."""

import os
import stat

import pytest

from pktsim.textio import atomic_write


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_written_files_get_the_umasks_mode(tmp_path, umask):
    old = os.umask(umask)
    try:
        out = tmp_path / "out.json"
        atomic_write(out, "{}")
        atomic_write(tmp_path / "out.bin", b"\0")
    finally:
        os.umask(old)
    for name in ("out.json", "out.bin"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask, name
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_command_writes_with_the_umasks_mode(tmp_path):
    from conftest import run_cli

    out = tmp_path / "schema.json"
    old = os.umask(0o022)
    try:
        run_cli("schema", "-o", out)
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_tables_fit_the_terminal_by_wrapping_their_widest_text_column():
    from pktsim.textio import table

    rows = [["R_max", 1.67, "000 Table I, 64 B (fit closure: Eq. 1 of the Table II profile 000 computed from this rate)"]]
    wide = table(rows, ["quantity", "reported", "source"], width=None)
    assert len(wide.splitlines()) == 3
    narrow = table(rows, ["quantity", "reported", "source"], width=60)
    assert all(len(line) <= 60 for line in narrow.splitlines()), narrow
    assert " ".join(narrow.split()).count("fit closure") == 1 and len(narrow.splitlines()) > 3


def test_piped_output_keeps_full_width(monkeypatch):
    from pktsim import textio

    monkeypatch.delenv("COLUMNS", raising=False)
    assert textio.terminal_width() is None  # pytest captures stdout: not a terminal


def test_a_table_too_wide_to_wrap_leaves_out_its_optional_columns_and_says_so(monkeypatch):
    """At COLUMNS=80 `reproduce 002` printed 162 columns: a relation's text in a number
    column, and eight columns whose words alone were wider than the terminal."""
    from pktsim.textio import fit_lines, table

    rows = [["maximum forwarding rate", "1.87", "89k/s at 0.0446Mpps, peak 98k/s at 0.05Mpps", "Mpps", "-5.18%", "fitted", "holds", "002 VI-A (measured)"]]
    head = ["quantity", "reported", "predicted", "unit", "error", "kind", "check", "source"]
    out = table(rows, head, "lrrlrlll", width=60, optional=(7, 6))
    lines = out.splitlines()
    assert all(len(x) <= 60 for x in lines), out
    assert "source" not in lines[0] and "check" not in lines[0] and "(left out to fit 60 columns: source, check" in out
    # Wide enough: nothing left out.
    assert "source" in table(rows, head, "lrrlrlll", width=200, optional=(7, 6)).splitlines()[0]
    monkeypatch.setenv("COLUMNS", "40")
    text = fit_lines("summary (000): 2 predicted rows: |error| median 8.61%, worst 14.50% (R_max ratio, 752,138 routes)\n  short")
    assert all(len(x) <= 40 for x in text.splitlines()) and text.splitlines()[-1] == "  short"


def test_every_line_of_a_chains_model_fits_the_terminal():
    import os
    import subprocess
    import sys

    from conftest import EXAMPLES

    env = {**os.environ, "COLUMNS": "80"}
    p = subprocess.run([sys.executable, "-m", "pktsim", "model", EXAMPLES / "router-firewall-chain.toml"], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and max(len(x) for x in p.stdout.splitlines()) <= 80, p.stdout
