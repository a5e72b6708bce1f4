"""Sweeps at scale: grids, replications, executors, resume, failures, files, report."""

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import EXAMPLES, run_cli

import pktsim
from pktsim import experiments

NAPI = EXAMPLES / "beifuss2015-napi.toml"
GRID = {"traffic.rate": ["0.5Mpps", "1.9Mpps"], "traffic.pattern": ["cbr", "poisson"]}
SETS = {"measure.duration": "10ms"}


def comparable(df):
    return df.drop(columns=["wall_s"]).reset_index(drop=True)


def test_grid_with_replications_and_confidence_intervals():
    df = pktsim.sweep(NAPI, GRID, replications=3, sets=SETS, jobs=2)
    assert len(df) == 2 * 2 * 3
    assert list(df.columns[:5]) == ["traffic.rate", "traffic.rate_value", "traffic.pattern", "replication", "seed"]
    assert sorted(df["seed"].unique()) == [1, 2, 3]
    assert (df["status"] == "ok").all()
    s = experiments.summarize(df, metrics=["latency_ns_p50"])
    poisson = s[(s["traffic.rate"] == "0.5Mpps") & (s["traffic.pattern"] == "poisson")].iloc[0]
    assert poisson["n"] == 3 and poisson["latency_ns_p50_ci95"] > 0


def test_dask_local_cluster_gives_the_local_result():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        remote = pktsim.sweep(NAPI, GRID, replications=2, sets=SETS, dask=cluster.scheduler_address)
    local = pktsim.sweep(NAPI, GRID, replications=2, sets=SETS, jobs=2)
    pd.testing.assert_frame_equal(comparable(remote), comparable(local))


def test_an_interrupted_sweep_resumes_and_skips_finished_points(tmp_path):
    out = tmp_path / "sweep.parquet"
    seen = []

    def stop_after_two(i, n, label):
        seen.append(label)
        if i == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        experiments.run_grid(NAPI, GRID, 1, sets=SETS, jobs=1, output=out, progress=stop_after_two)
    partial = tmp_path / "sweep.parquet.partial.jsonl"
    # The sweep's hash, then the two finished rows.
    assert partial.is_file() and len(partial.read_text().splitlines()) == 1 + 2 and not out.exists()
    labels = []
    resumed = experiments.run_grid(NAPI, GRID, 1, sets=SETS, jobs=1, output=out, progress=lambda i, n, label: labels.append((i, label)))
    assert labels[0] == (2, "resuming: 2 points already done")
    assert len([x for x in labels if not x[1].startswith("resuming")]) == 2, "only the two missing points ran"
    assert out.is_file() and not partial.exists()
    fresh = experiments.run_grid(NAPI, GRID, 1, sets=SETS, jobs=1)
    cols = ["traffic.rate", "traffic.pattern", "throughput_pps", "latency_ns_p99"]
    pd.testing.assert_frame_equal(pd.read_parquet(out)[cols], fresh[cols])
    # The resumed call returns the whole sweep too, the finished points read back.
    pd.testing.assert_frame_equal(resumed[cols], fresh[cols])


def test_a_failing_point_is_isolated(monkeypatch):
    real = pktsim.sim.run_text

    def flaky(text, fmt, origin, base_dir, sets=(), **kw):
        point = dict(sets)
        if point["traffic.pattern"] == "poisson" and point["traffic.rate"] == "1.9Mpps":
            raise RuntimeError("worker crashed")
        return real(text, fmt, origin, base_dir, sets, **kw)

    monkeypatch.setattr(pktsim.sim, "run_text", flaky)
    df = pktsim.sweep(NAPI, GRID, sets=SETS, jobs=1, errors="keep")
    bad = df[df["status"] == "error"]
    assert len(bad) == 1 and bad.iloc[0]["traffic.rate"] == "1.9Mpps" and "worker crashed" in bad.iloc[0]["error"]
    assert (df[df["status"] == "ok"]["throughput_pps"] > 0).all() and len(df) == 4


def _count_core_work(monkeypatch) -> Counter:
    """Count what the core is asked to do: parse a scenario's text ("parse"), resolve
    (validate) it with a set of overrides ("resolve"), simulate ("run")."""
    counts: Counter = Counter()
    real = pktsim._core.Parsed

    class Resolved:
        def __init__(self, inner):
            self._inner = inner

        def run(self, *args, **kwargs):
            counts["run"] += 1
            return self._inner.run(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self._inner, name)

    class Parsed:
        def __init__(self, *args):
            counts["parse"] += 1
            self._inner = real(*args)

        def resolve(self, sets):
            counts["resolve"] += 1
            return Resolved(self._inner.resolve(sets))

        def __getattr__(self, name):
            return getattr(self._inner, name)

    monkeypatch.setattr(pktsim._core, "Parsed", Parsed)
    monkeypatch.setattr(pktsim.parse, "_PARSED", {})  # nothing parsed yet
    return counts


def test_a_sweep_parses_its_scenario_once_and_resolves_each_run_once(monkeypatch, capsys):
    sc = pktsim.Scenario.load(NAPI, SETS)
    counts = _count_core_work(monkeypatch)
    df = pktsim.sweep(sc, GRID, replications=3, jobs=1)
    points = 2 * 2
    assert (df["status"] == "ok").all() and len(df) == points * 3
    # The text once in this process; the first point once (checked before any run, as the
    # command line does); each run resolves its point once, where it runs.
    assert counts == {"parse": 1, "resolve": 1 + points * 3, "run": points * 3}

    counts.clear()
    pktsim.parse._PARSED.clear()
    from pktsim import cli

    argv = [
        "sweep",
        NAPI,
        "--set",
        "measure.duration=10ms",
        "--param",
        "traffic.rate",
        "--values",
        "0.5Mpps:1.5Mpps:0.5Mpps",
        "--replications",
        "2",
        "--jobs",
        "1",
    ]
    assert cli.main(list(map(str, argv))) == 0
    capsys.readouterr()
    # The scenario file parsed once and resolved once when loaded, once more for the first
    # point (checked before any run), then each of the 6 runs.
    assert counts == {"parse": 1, "resolve": 1 + 1 + 3 * 2, "run": 3 * 2}


def test_a_bad_point_is_an_error_row_and_the_rest_runs(monkeypatch):
    counts = _count_core_work(monkeypatch)
    df = pktsim.sweep(NAPI, {"traffic.rate": ["1Mpps", "bogus", "0.5Mpps"]}, replications=2, sets=SETS, jobs=1, errors="keep")
    assert len(df) == 3 * 2
    bad = df[df["traffic.rate"] == "bogus"]
    assert (bad["status"] == "error").all() and bad["error"].str.contains('traffic.rate = "bogus"').all()
    assert (df[df["traffic.rate"] != "bogus"]["status"] == "ok").all()
    # The bad point is never run: only the two good points' replications reach the engine.
    assert counts["run"] == 2 * 2


def test_a_swept_seed_is_checked_before_any_run(monkeypatch):
    counts = _count_core_work(monkeypatch)
    df = pktsim.sweep(NAPI, {"seed": ["7", "-1"]}, replications=2, sets=SETS, jobs=1, errors="keep")
    assert df["status"].tolist() == ["ok", "ok", "error", "error"]
    assert df[df["status"] == "ok"]["seed"].tolist() == ["7", "7"]
    assert [r["seed"] for r in pktsim.results(df)[:2]] == [7, 8]
    assert df.iloc[2]["error"].startswith("ScenarioError: ") and "seed" in df.iloc[2]["error"]
    assert counts["run"] == 2


def test_python_raises_the_error_the_command_line_prints():
    """A misspelt key: the CLI's exit-2 message, nothing run. A bad value further on: the
    line the CLI prints for it, with every row in the error's table."""
    with pytest.raises(pktsim.ScenarioError) as e:
        pktsim.sweep(NAPI, {"trafic.rate": ["1Mpps", "2Mpps"]}, sets=SETS, jobs=1)
    cli = run_cli("sweep", NAPI, "--param", "trafic.rate", "--values", "1Mpps,2Mpps", *[a for k, v in SETS.items() for a in ("--set", f"{k}={v}")], check=False)
    assert cli.returncode == 2 and cli.stderr.strip() == f"pktsim: error: {e.value}"
    with pytest.raises(pktsim.SweepError) as e:
        pktsim.sweep(NAPI, {"traffic.rate": ["1Mpps", "fast"]}, sets=SETS, jobs=1)
    cli = run_cli("sweep", NAPI, "--param", "traffic.rate", "--values", "1Mpps,fast", *[a for k, v in SETS.items() for a in ("--set", f"{k}={v}")], check=False)
    assert cli.returncode == 1 and f"pktsim: {e.value}" in cli.stderr
    assert e.value.failed == 1 and e.value.table["status"].tolist() == ["ok", "error"]
    with pytest.raises(ValueError, match="errors = 'ignore'"):
        pktsim.sweep(NAPI, {"traffic.rate": ["1Mpps"]}, sets=SETS, errors="ignore")


def test_sweep_cli_writes_parquet_and_csv_with_scenario_seed_and_version(tmp_path):
    pq_out, csv_out = tmp_path / "s.parquet", tmp_path / "s.csv"
    for out in (pq_out, csv_out):
        run_cli(
            "sweep",
            NAPI,
            "--param",
            "traffic.rate",
            "--values",
            "0.5Mpps,1Mpps",
            "--param",
            "nic.itr.mode",
            "--values",
            "dynamic,off",
            "--replications",
            "2",
            "--set",
            "measure.duration=10ms",
            "-o",
            out,
        )
    t = pq.read_table(pq_out)
    meta = t.schema.metadata
    assert meta[b"pktsim_version"] == pktsim.__version__.encode() and b"[nic.itr]" in meta[b"pktsim_scenario"] and meta[b"pktsim_seed"] == b"1"
    df = t.to_pandas()
    assert len(df) == 8 and {"traffic.rate", "nic.itr.mode", "replication", "seed", "latency_ns_p99", "pktsim_version", "scenario"} <= set(df.columns)
    csv = pd.read_csv(csv_out)
    assert len(csv) == 8 and "latency_ns_p99" in csv.columns


def test_sweep_table_in_the_scenario(tmp_path):
    sc = tmp_path / "swept.toml"
    sc.write_text(NAPI.read_text() + '\n[sweep]\nreplications = 2\n[sweep.params]\n"traffic.rate" = "0.5Mpps:1Mpps:0.5Mpps"\n')
    out = tmp_path / "t.csv"
    run_cli("sweep", sc, "--set", "measure.duration=10ms", "-o", out)
    assert len(pd.read_csv(out)) == 4
    # From Python, a sweep without a grid runs the table too, as the command does.
    df = pktsim.sweep(sc, sets=SETS, jobs=1)
    assert list(df["traffic.rate"]) == ["0.5Mpps", "0.5Mpps", "1Mpps", "1Mpps"] and list(df["replication"]) == [0, 1, 0, 1]
    cols = ["traffic.rate", "replication", "seed", "throughput_pps", "latency_ns_p99"]
    pd.testing.assert_frame_equal(df[cols], pd.read_csv(out)[cols], check_dtype=False)
    assert len(pktsim.sweep(sc, sets=SETS, jobs=1, replications=1)) == 2
    # A grid given is the whole grid, once per point unless told otherwise.
    assert len(pktsim.sweep(sc, "traffic.pattern", "cbr", sets=SETS, jobs=1)) == 1


def test_standard_plots(tmp_path):
    df = pktsim.sweep(NAPI, "traffic.rate", "0.25Mpps:2.25Mpps:0.5Mpps", sets=SETS)
    files = pktsim.plots.standard_load_plots(df, tmp_path)
    for f in files:
        assert f.read_bytes()[:4] == b"\x89PNG" and f.stat().st_size > 5000
    svg = tmp_path / "latency.svg"
    pktsim.plots.latency_vs_load(df, svg)
    assert svg.read_text().lstrip().startswith("<?xml")


def test_report_renders_with_its_images_in_headless_chromium(reproduced_report):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: make test installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed")
    # (Written beside `reproduce all --json`: the report comes from the same runs, and says
    # where it is on stderr, leaving stdout to the JSON.)
    report, stderr = reproduced_report
    assert f"wrote {report / 'index.html'}" in stderr
    index = report / "index.html"
    html = index.read_text()
    from pktsim.reproduce import PAPERS

    for paper in PAPERS:
        assert f"id='p{paper}'" in html
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000", "--dump-dom", index.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    import re

    n = int(re.search(r'data-images="(\d+)"', dom).group(1))
    ok = int(re.search(r'data-images-ok="(\d+)"', dom).group(1))
    assert n >= 10 and ok == n, (n, ok)
    # The summary over all papers and a table of contents come before the first paper.
    top = dom[: dom.index('id="p000"')]
    assert re.search(r"summary \(all papers\): \d+ predicted rows: \|error\| median", top), top[-2000:]
    assert 'href="#p004"' in top
    # Rows over 10% are flagged.
    assert 'class="predicted bad"' in dom


def test_report_fig_9_bars_are_the_tables_predictions(tmp_path, monkeypatch):
    """The Fig. 9 bars show each flow count's C_total as the Table IV rows predict it."""
    import pktsim.calibrate as cal
    from pktsim.reproduce import paper000, reproduce

    drawn = {}
    monkeypatch.setattr(cal, "bar_chart", lambda bars, path, title, reported=None: drawn.setdefault(path.name, (bars, reported)))
    monkeypatch.setattr("pktsim.plots.reported_vs_predicted", lambda *a, **k: None)
    res = reproduce("000")
    paper000.figures(tmp_path, res)
    bars, reported = drawn["000-fig9.png"]
    totals = [sum(groups.values()) for _, groups in bars]
    rows = [r for r in res["rows"] if r["quantity"].startswith("C_total,") and "flows" in r["quantity"]]
    assert totals == pytest.approx([r["predicted"] for r in rows])
    assert reported == [r["reported"] for r in rows], "the paper's totals drawn over the bars"


def test_plot_command_draws_a_sweep_file_with_per_class_latency(tmp_path):
    rt = EXAMPLES / "meyer2014-rt.toml"
    table = tmp_path / "rt.csv"
    run_cli("sweep", rt, "--param", "traffic.rate", "--values", "300kpps,600kpps", "--set", "measure.duration=20ms", "-o", table)
    out = tmp_path / "plots"
    run_cli("plot", table, "-o", out)
    names = sorted(p.name for p in out.iterdir())
    # Server mode has no interrupts or polls: no panel of zeros.
    assert names == ["cpu.png", "latency.png", "loss.png", "per_class_latency.png", "throughput.png"]
    proc = run_cli("plot", NAPI, "-o", out, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_a_two_key_sweep_draws_a_legend_entry_per_value_of_the_second_key(tmp_path):
    out = tmp_path / "svg"
    run_cli(
        "sweep",
        EXAMPLES / "linux-router-64B.toml",
        "--param",
        "traffic.rate",
        "--values",
        "0.5Mpps,1Mpps,2Mpps",
        "--param",
        "host.io",
        "--values",
        "napi,server",
        "--replications",
        "2",
        "--set",
        "measure.duration=2ms",
        "--set",
        "measure.warmup=1ms",
        "--set",
        "traffic.pattern=poisson",
        "--plots",
        out,
        "--format",
        "svg",
    )
    svg = (out / "throughput.svg").read_text()
    # The key once, as the legend's title; its values as the labels.
    assert svg.count("<!-- host.io -->") == 1 and svg.count("<!-- napi -->") == 1 and svg.count("<!-- server -->") == 1
    assert "offered load [Mpps]" in svg and "model capacity" not in svg  # capacity differs per io mode


def test_a_batch_size_sweep_is_plotted_against_the_batch_size(tmp_path):
    import pandas as pd

    from pktsim.plots import sweep_figures

    table = tmp_path / "b.csv"
    run_cli(
        "sweep",
        EXAMPLES / "ovs-netmapcap.toml",
        "--param",
        "host.batch.size",
        "--values",
        "1,4,16,64",
        "--set",
        "measure.duration=2ms",
        "--set",
        "measure.warmup=1ms",
        "-o",
        table,
    )
    figs = sweep_figures(pd.read_csv(table), tmp_path / "p", fmt="png", dpi=50)
    ax = figs["throughput"][1].axes[0]
    assert list(ax.lines[0].get_xdata()) == [1, 4, 16, 64]
    assert ax.get_xlabel() == "host.batch.size"
    assert "irq_polls" in figs  # batched-syscall sleeps and takes interrupts


def test_figure_options_are_checked(tmp_path):
    table = tmp_path / "t.csv"
    run_cli(
        "sweep",
        EXAMPLES / "linux-router-64B.toml",
        "--param",
        "traffic.rate",
        "--values",
        "1Mpps,2Mpps",
        "--set",
        "measure.duration=1ms",
        "--set",
        "measure.warmup=1ms",
        "-o",
        table,
    )
    for bad in (["--dpi", "0"], ["--size", "3x"], ["--format", "gif"]):
        proc = run_cli("plot", table, "-o", tmp_path / "o", *bad, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (bad, proc.stderr)
    run_cli("plot", table, "-o", tmp_path / "pdf", "--format", "pdf", "--size", "3x2")
    assert (tmp_path / "pdf" / "throughput.pdf").read_bytes().startswith(b"%PDF")


def test_report_figures_carry_the_papers_own_numbers(tmp_path, monkeypatch):
    """Where a paper gives a number with its load, the report's figure draws it."""
    import pktsim.plots as plots
    from pktsim.reproduce import paper002, paper003, reproduce

    calls = {}

    def spy(name):
        return lambda df, path, *a, **k: calls.setdefault(Path(path).name, k)

    for name in ("latency_vs_load", "irq_and_polls_vs_load", "throughput_vs_load"):
        monkeypatch.setattr(plots, name, spy(name))
    caps = paper002.figures(tmp_path, reproduce("002")) + paper003.figures(tmp_path, reproduce("003"))
    assert calls["002-fig5.png"]["paper"] == [(44.6e3, 8000.0)]
    # 002's own IRQ rates; the polls per packet are 003's measurement, drawn in 003's figure.
    assert calls["002-fig6.png"]["paper_irq"] and not calls["002-fig6.png"].get("paper_polls")
    assert calls["002-throughput.png"]["paper"][0][1] == 1.87e6
    assert calls["003-fig7.png"]["paper_polls"] == [(0.01 * 1.39e6, 2.0), (0.9 * 1.39e6, 0.22)]
    assert all(len(c) > 20 for _, c in caps), caps


def test_hue_chooses_the_lines(tmp_path):
    import pandas as pd

    from pktsim.plots import sweep_figures

    table = tmp_path / "t.csv"
    run_cli(
        "sweep",
        EXAMPLES / "linux-router-64B.toml",
        "--param",
        "traffic.rate",
        "--values",
        "1Mpps,2Mpps",
        "--param",
        "host.io",
        "--values",
        "napi,server",
        "--set",
        "measure.duration=1ms",
        "--set",
        "measure.warmup=1ms",
        "-o",
        table,
    )
    df = pd.read_csv(table)
    by_io = sweep_figures(df, tmp_path / "a", dpi=50, hue="host.io")["throughput"][1].axes[0]
    assert sorted(line.get_label() for line in by_io.lines) == ["napi", "server"]
    assert by_io.figure.axes[-1].get_legend().get_title().get_text() == "host.io"
    with pytest.raises(ValueError, match="hue nope"):
        sweep_figures(df, tmp_path / "b", dpi=50, hue="nope")


def test_swept_keys_are_labelled_with_their_units():
    from pktsim.plots import _axis_label

    assert _axis_label("link.rate", None) == ("link.rate [Gbit/s]", 1e-9)
    assert _axis_label("cpu.frequency", None) == ("cpu.frequency [GHz]", 1e-9)
    assert _axis_label("host.t_proc", None) == ("host.t_proc [us]", 1e6)
    assert _axis_label("host.batch.size", None) == ("host.batch.size", 1.0)


def test_a_sweep_says_where_its_throughput_is_above_the_offered_load():
    # 002's node at 1.7 Mpps: the ring holds frames at the 5 ms window's start that leave
    # within it (0.7% more than arrive); at 0.5 Mpps it does not.
    out = run_cli("sweep", EXAMPLES / "beifuss2015-napi.toml", "--param", "traffic.rate", "--values", "1.7Mpps,0.5Mpps", "--set", "measure.duration=5ms").stdout
    assert "throughput above the offered load at 1 point: frames queued at the start" in out
    out = run_cli("sweep", EXAMPLES / "beifuss2015-napi.toml", "--param", "traffic.rate", "--values", "0.5Mpps", "--set", "measure.duration=5ms").stdout
    assert "above the offered load" not in out
