"""The papers are listed once (``pktsim.reproduce.PAPERS``), and everything that names
them reads that list: ``reproduce all``, the command line's help and errors, the progress
bar's run counts, the report's scenarios and figures."""

from __future__ import annotations

import pytest
from conftest import run_cli

from pktsim import cli
from pktsim.reproduce import AUTHORS, PAPERS, Paper, paper_id
from pktsim.scenarios import path


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    """Each paper's reproduction (in-process) and the simulations it ran."""
    from conftest import built_once

    built_once(tmp_path_factory, "papers-in-process")
    from pktsim.reproduce import reproduce
    from pktsim.sim import observe_runs

    out = {}
    for key in PAPERS:
        runs = []
        with observe_runs(runs.append):
            res = reproduce(key)
        out[key] = (res, len(runs))
    return out


def test_each_paper_is_its_modules_reproduction(reproduced):
    for key, paper in PAPERS.items():
        res, _ = reproduced[key]
        assert isinstance(paper, Paper) and paper.key == key
        assert res["paper"] == key and res["title"] == paper.title
        assert callable(paper.figures)
        # Indexed, a paper is the (title, reproduce) pair PAPERS held before.
        title, fn = paper
        assert (title, fn) == (paper[0], paper[1]) == (paper.title, paper.reproduce)


def test_each_papers_run_count_is_what_its_reproduction_runs(reproduced):
    # The progress bar's ETA counts on these.
    assert {key: runs for key, (_, runs) in reproduced.items()} == {key: p.runs for key, p in PAPERS.items()}


def test_aliases_and_scenarios():
    assert AUTHORS == {alias: p.key for p in PAPERS.values() for alias in p.aliases}
    for key, paper in PAPERS.items():
        assert paper_id(key) == key
        for alias in paper.aliases:
            assert paper_id(alias) == key and paper_id(alias.title() + "2020") == key
        if paper.scenario:
            assert path(paper.scenario).is_file()


def test_the_command_line_names_every_paper():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["reproduce"]
    text = sub.format_help()
    for key in PAPERS:
        assert key in text
    proc = run_cli("reproduce", "nobody", check=False)
    assert proc.returncode == 2
    for alias, key in AUTHORS.items():
        assert f"{key} ({alias})" in proc.stderr


def test_the_list_is_read_without_the_papers_modules():
    # `pktsim run` builds the whole parser: the list must not bring the reproductions in.
    import json
    import subprocess
    import sys

    code = "import sys, json\nfrom pktsim.cli import build_parser\nbuild_parser()\nprint(json.dumps(sorted(sys.modules)))"
    mods = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert "pktsim.reproduce" in mods
    assert not [m for m in mods if m.startswith("pktsim.reproduce.")], "the paper modules and rows come when a paper is reproduced"
