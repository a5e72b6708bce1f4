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
