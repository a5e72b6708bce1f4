"""Sweeps that cannot lie: seeds swept, resumes only of the same sweep, error rows, and
every bad sweep, run or file input as one line on stderr (exit 2), never exit 70."""

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest
from conftest import EXAMPLES, ROOT, run_cli

import pktsim
from pktsim import cli, experiments

NAPI = EXAMPLES / "beifuss2015-napi.toml"
GRID = {"traffic.rate": ["0.5Mpps", "1.9Mpps"], "traffic.pattern": ["cbr", "poisson"]}
SETS = {"measure.duration": "2ms", "measure.warmup": "0s"}
SHORT = ["--set", "measure.duration=2ms", "--set", "measure.warmup=0s"]


def main(*argv):
    """The command in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def interrupted(out, stop_at=2, grid=GRID, sets=SETS):
    """Leave a checkpoint with `stop_at` finished rows, as Ctrl-C would."""

    def stop(i, n, label):
        if i == stop_at:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        experiments.run_grid(NAPI, grid, 1, sets=sets, jobs=1, output=out, progress=stop)
    return experiments._checkpoint_path(out)


# ---------------------------------------------------------------------------------------- seeds


def test_sweeping_the_seed_runs_each_point_with_its_seed():
    rc, out, err = main("sweep", NAPI, *SHORT, "--set", "traffic.pattern=poisson", "--param", "seed", "--values", "5,6,7", "--jobs", "1", "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert [r["seed"] for r in res] == [5, 6, 7]
    assert [r["swept"]["seed"] for r in res] == ["5", "6", "7"]
    # Poisson arrivals: a different seed is a different run.
    assert len({r["latency_ns"]["mean"] for r in res}) == 3
    # The same as running each seed on its own.
    single = json.loads(run_cli("run", NAPI, *SHORT, "--set", "traffic.pattern=poisson", "--set", "seed=6", "--json").stdout)
    assert single["latency_ns"] == res[1]["latency_ns"]


def test_replications_of_a_swept_seed_add_to_it():
    df = pktsim.sweep(NAPI, "seed", "5,7", replications=2, sets={**SETS, "traffic.pattern": "poisson"}, jobs=1)
    assert list(df["seed"]) == ["5", "5", "7", "7"] and list(df["replication"]) == [0, 1, 0, 1]
    assert [r["seed"] for r in experiments.results(df)] == [5, 6, 7, 8]
    s = experiments.summarize(df, metrics=["latency_ns_mean"])
    assert list(s["n"]) == [2, 2]


# ---------------------------------------------------------------------------------------- resume


def test_a_resume_with_another_set_does_not_reuse_rows(tmp_path):
    out = tmp_path / "s.csv"
    interrupted(out)
    notes = []
    df = experiments.run_grid(NAPI, GRID, 1, sets={**SETS, "nic.itr.mode": "off"}, jobs=1, output=out, notify=notes.append)
    assert df.attrs["tasks_run"] == 4, "every point ran again"
    assert len(notes) == 1 and "different sweep" in notes[0] and "starting over" in notes[0]
    fresh = experiments.run_grid(NAPI, GRID, 1, sets={**SETS, "nic.itr.mode": "off"}, jobs=1)
    assert list(df["throughput_pps"]) == list(fresh["throughput_pps"])


def test_a_resume_of_the_same_sweep_reuses_rows_and_a_changed_grid_does_not(tmp_path):
    out = tmp_path / "s.csv"
    interrupted(out)
    notes = []
    df = experiments.run_grid(NAPI, GRID, 1, sets=SETS, jobs=1, output=out, notify=notes.append)
    assert df.attrs["tasks_run"] == 2 and len(notes) == 1 and "resuming: 2 of 4 runs reused, 2 to run" in notes[0], notes
    interrupted(out)
    grid = {**GRID, "traffic.rate": ["0.5Mpps", "1.8Mpps"]}
    df = experiments.run_grid(NAPI, grid, 1, sets=SETS, jobs=1, output=out, notify=notes.append)
    assert df.attrs["tasks_run"] == 4 and len(notes) == 2 and "not resuming" in notes[1], notes


def test_a_resume_with_a_changed_profile_file_does_not_reuse_rows(tmp_path):
    (tmp_path / "mine.toml").write_text('[cycles]\nRX = "500cycles"\nother = "500cycles"\n')
    sc = tmp_path / "s.toml"
    sc.write_text('[cpu]\nfrequency = "2GHz"\n[link]\nrate = "10Gbit/s"\n[traffic]\nrate = "1Mpps"\n[cost]\nprofile = "mine.toml"\n')
    before = experiments.sweep_fingerprint(pktsim.Scenario.load(sc), {"traffic.rate": ["1Mpps"]})
    (tmp_path / "mine.toml").write_text('[cycles]\nRX = "900cycles"\nother = "500cycles"\n')
    after = experiments.sweep_fingerprint(pktsim.Scenario.load(sc), {"traffic.rate": ["1Mpps"]})
    assert before != after


def test_restart_discards_saved_rows(tmp_path):
    out = tmp_path / "s.csv"
    interrupted(out)
    notes = []
    df = experiments.run_grid(NAPI, GRID, 1, sets=SETS, jobs=1, output=out, restart=True, notify=notes.append)
    assert df.attrs["tasks_run"] == 4 and "--restart" in notes[0]


def test_a_checkpoint_without_a_hash_is_not_trusted(tmp_path):
    out = tmp_path / "s.csv"
    part = interrupted(out)
    lines = part.read_text().splitlines()
    part.write_text("\n".join(lines[1:]) + "\n")  # as written before the hash existed
    df = experiments.run_grid(NAPI, GRID, 1, sets=SETS, jobs=1, output=out, notify=lambda m: None)
    assert df.attrs["tasks_run"] == 4


def test_error_rows_are_run_again_on_resume(tmp_path, monkeypatch):
    out = tmp_path / "s.csv"
    real = pktsim.sim.run_text

    def flaky(text, fmt, origin, base_dir, sets=(), **kwargs):
        if dict(sets)["traffic.rate"] == "1.9Mpps" and dict(sets)["traffic.pattern"] == "cbr":
            raise RuntimeError("worker crashed")
        return real(text, fmt, origin, base_dir, sets, **kwargs)

    monkeypatch.setattr(pktsim.sim, "run_text", flaky)
    interrupted(out, stop_at=4)  # every row saved, one of them an error
    monkeypatch.setattr(pktsim.sim, "run_text", real)
    df = experiments.run_grid(NAPI, GRID, 1, sets=SETS, jobs=1, output=out)
    assert df.attrs["tasks_run"] == 1 and (df["status"] == "ok").all()


def test_the_cli_says_it_starts_over_and_json_after_a_resume_is_whole(tmp_path):
    out = tmp_path / "s.csv"
    argv = [
        "sweep",
        NAPI,
        *SHORT,
        "--param",
        "traffic.rate",
        "--values",
        "0.5Mpps,1.9Mpps",
        "--param",
        "traffic.pattern",
        "--values",
        "cbr,poisson",
        "--jobs",
        "1",
        "-o",
        out,
        "--json",
    ]
    interrupted(out)
    rc, stdout, err = main(*argv)
    assert rc == 0 and len(err.splitlines()) == 1 and "runs reused" in err, err
    res = json.loads(stdout)
    assert len(res) == 4 and all(r["throughput_pps"] > 0 for r in res)
    assert [r["swept"] for r in res] == [{"traffic.rate": a, "traffic.pattern": b} for a in ("0.5Mpps", "1.9Mpps") for b in ("cbr", "poisson")]
    interrupted(out)
    rc, stdout, err = main(*argv, "--set", "nic.itr.mode=off")
    assert rc == 0 and "not resuming" in err and "starting over" in err and len(err.splitlines()) == 1
    assert len(json.loads(stdout)) == 4


def test_sweep_help_documents_resume_and_restart():
    text = run_cli("sweep", "--help").stdout
    assert "--restart" in text and "hash" in text and "starts over" in text


# ---------------------------------------------------------------------------------------- error rows


def test_an_invalid_point_is_an_error_row_and_the_sweep_exits_1():
    rc, out, err = main("sweep", NAPI, *SHORT, "--param", "traffic.rate", "--values", "0.5Mpps,20Mpps,1Mpps", "--jobs", "1", "--json")
    assert rc == 1
    res = json.loads(out)
    assert [r.get("status", "ok") for r in res] == ["ok", "error", "ok"]
    assert "traffic.rate" in res[1]["error"] and "20Mpps" in res[1]["error"]
    assert "point traffic.rate=20Mpps" in err and "Traceback" not in err
    rc, out, err = main("sweep", NAPI, *SHORT, "--param", "traffic.rate", "--values", "0.5Mpps,20Mpps", "--jobs", "1")
    assert rc == 1 and "0.5Mpps" in out and "20Mpps" in err


# ---------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "argv, must_name",
    [
        (["--param", "traffic.rate", "--values", "1Mpps,1Mpps"], ["--values", "traffic.rate", "1Mpps", "twice"]),
        (["--param", "traffic.rate", "--values", "0:inf:1"], ["--values", "0:inf:1", "finite"]),
        (["--param", "traffic.rate", "--values", "0:nan:1"], ["--values", "0:nan:1", "finite"]),
        (["--param", "traffic.rate", "--values", "1Mpps", "--replications", "0"], ["--replications 0", "at least 1"]),
        (["--param", "traffic.rate", "--values", "1Mpps", "--replications", "-3"], ["--replications -3", "at least 1"]),
        (["--param", "traffic.rate", "--values", "1Mpps", "--jobs", "0"], ["--jobs 0", "at least 1"]),
        (["--param", "traffic.rate", "--values", "1Mpps", "-o", "/proc/none/s.csv"], ["-o", "/proc/none/s.csv", "cannot write"]),
        (["--param", "traffic.rate", "--values", "1Mpps", "-o", "s.txt"], ["-o", "s.txt", ".parquet or .csv"]),
        (["--param", "traffic.rate", "--values", "1Mpps", "--plots", "/proc/none"], ["--plots", "/proc/none", "writable directory"]),
        (["--param", "traffic.rate"], ["--values"]),
        (["--param", "seed", "--values", "1", "--dask", "garbage"], ["--dask garbage", "tcp://host:8786"]),
        # Every point would fail: refused before any runs.
        (["--param", "traffic.nosuch", "--values", "1,2"], ["first point", "traffic.nosuch=1", "no such key"]),
        (["--param", "cpu.cores", "--values", "1.5,2"], ["first point", "cpu.cores"]),
    ],
)
def test_bad_sweep_options_exit_2_naming_them(argv, must_name):
    rc, out, err = main("sweep", NAPI, *SHORT, *argv)
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "internal error" not in err
    for part in must_name:
        assert part in err, (part, err)


def test_output_to_a_directory_is_refused_before_any_run(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(pktsim.sim, "run_text", lambda *a, **k: calls.append(a))
    rc, out, err = main("sweep", NAPI, *SHORT, "--param", "traffic.rate", "--values", "1Mpps", "-o", tmp_path)
    assert rc == 2 and str(tmp_path) in err and calls == []


def test_a_full_stdout_is_one_line_exit_2():
    with open("/dev/full", "w") as full:
        for argv in (["run", NAPI, *SHORT, "--json"], ["schema"], ["model", NAPI]):
            proc = subprocess.run([sys.executable, "-m", "pktsim", *map(str, argv)], stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT)
            assert proc.returncode == 2, (argv, proc.stderr)
            assert proc.stderr.count("\n") == 1 and "standard output" in proc.stderr and "Traceback" not in proc.stderr


def test_a_closed_pipe_is_not_an_error():
    proc = subprocess.run(f"{sys.executable} -m pktsim schema | head -c1 >/dev/null", shell=True, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


# ---------------------------------------------------------------------------------------- files


def test_a_non_utf8_scenario_names_the_byte(tmp_path):
    f = tmp_path / "latin1.toml"
    f.write_bytes(NAPI.read_bytes().replace(b"name = ", b"# caf\xe9\nname = ", 1))
    offset = f.read_bytes().index(b"\xe9")
    for cmd in (["run"], ["model"], ["sweep", "--param", "seed", "--values", "1"]):
        rc, out, err = main(cmd[0], f, *cmd[1:])
        assert rc == 2 and f"latin1.toml: the scenario file is not UTF-8 at byte {offset}" in err, err
    rc, out, err = main("compare", NAPI, f)
    assert rc == 2 and f"not UTF-8 at byte {offset}" in err


def test_a_non_utf8_profile_file_names_the_byte_and_the_key(tmp_path):
    (tmp_path / "mine.toml").write_bytes(b'[cycles]\nRX = "500cycles"\n# \xff\nother = "500cycles"\n')
    sc = tmp_path / "s.toml"
    sc.write_text('[cpu]\nfrequency = "2GHz"\n[link]\nrate = "10Gbit/s"\n[traffic]\n[cost]\nprofile = "mine.toml"\n')
    rc, out, err = main("model", sc)
    assert rc == 2 and "cost.profile" in err and "mine.toml" in err and "not UTF-8 at byte 28" in err, err
    sc.write_text(sc.read_text().replace("mine.toml", "raumer2015-64B"))
    rc, out, err = main("model", sc, "--set", f"cost.profile={tmp_path / 'mine.toml'}")
    assert rc == 2 and "--set cost.profile" in err and "not UTF-8 at byte 28" in err, err


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_before_it_is_read(path):
    proc = subprocess.run([sys.executable, "-m", "pktsim", "run", path], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert proc.returncode == 2 and path in proc.stderr and "regular file" in proc.stderr


def test_a_huge_file_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.toml"
    with big.open("wb") as f:
        f.truncate(17 << 20)
    rc, out, err = main("model", big)
    assert rc == 2 and "big.toml" in err and "16 MiB" in err
    rc, out, err = main("plot", big, "-o", tmp_path / "plots")
    assert rc == 2 and "big.toml" in err and ".parquet or .csv" in err
    rc, out, err = main("plot", "/dev/zero.csv", "-o", tmp_path / "plots")
    assert rc == 2 and "/dev/zero.csv" in err


def test_a_directory_as_scenario(tmp_path):
    rc, out, err = main("run", tmp_path)
    assert rc == 2 and "directory" in err


def test_plot_refuses_tables_it_cannot_draw(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("traffic.rate,replication,throughput_pps,status\n1Mpps,0,1000000,ok\n")
    rc, out, err = main("plot", table, "-o", tmp_path / "plots")
    assert rc == 2 and "offered_pps" in err and "not a pktsim sweep table" in err
    good = tmp_path / "s.csv"
    assert main("sweep", NAPI, *SHORT, "--param", "traffic.rate", "--values", "0.5Mpps,1Mpps", "--jobs", "1", "-o", good)[0] == 0
    rc, out, err = main("plot", good, "-o", tmp_path / "plots", "--x", "nope")
    assert rc == 2 and "--x nope" in err and "traffic.rate" in err
    rc, out, err = main("plot", good, "-o", "/proc/none")
    assert rc == 2 and "-o /proc/none" in err
    rc, out, err = main("schema", "-o", tmp_path)
    assert rc == 2 and "-o" in err and "directory" in err
