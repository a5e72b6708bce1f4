"""The ``pktsim model`` command: JSON contract, text output, --set, Eq. 3, errors."""

import json
import re

import pytest
from conftest import EXAMPLES, run_cli

EX64 = EXAMPLES / "linux-router-64B.toml"


def model_json(*args):
    return json.loads(run_cli("model", *args, "--json").stdout)


def test_model_json_contract():
    p = model_json(EX64)
    for key in (
        "r_max_pps",
        "c_total_cycles",
        "cycles_by_group",
        "line_rate_pps",
        "predicted_pps",
        "cpu_load",
        "bottleneck",
        "capacity_pps",
        "cpu_load_max",
        "cpu_load_basis",
        "per_core",
        "frame_cost_ns",
        "notes",
    ):
        assert key in p, key
    assert list(p["cycles_by_group"]) == ["RX", "alloc", "prerouting", "routing", "postrouting", "free", "TX", "other"]
    assert p["bottleneck"] in ("cpu", "link")
    assert 0.0 <= p["cpu_load"] <= 1.0
    assert p["r_max_pps"] == pytest.approx(3.3e9 / 1978)
    assert p["line_rate_pps"] == pytest.approx(10e9 / (84 * 8))


# Node scenarios (a chain file's nodes are held in tests/test_chain.py).
BUNDLED = [
    p
    for p in sorted(EXAMPLES.glob("*.toml")) + sorted((EXAMPLES.parent / "python" / "pktsim" / "scenarios").glob("*.toml"))
    if "[[nodes]]" not in p.read_text()
]


# Where the simulator is still further from the model than the test's 1% (5% where a
# reader shares its core with ksoftirqd), and by how much at most today: 1.5x the
# loss-free capacity, and that capacity itself (where a reader on the stack's core meets
# its livelock onset).
OPEN_OVERLOAD = {
    # ksoftirqd's regime (`model::beside_a_fair_task`): over 200 ms the simulator reads
    # 1.2% more than the model (one core) and 2.0% more (four).
    "af-xdp-rxdrop.toml": 0.025,
    # The reader past the stack's capacity: the simulator reads 3.05% less.
    "udp-receiver.toml": 0.035,
}
LONG_WINDOW = {"af-xdp-rxdrop.toml": {"measure.duration": "200ms"}}
OPEN_ONSET = {
    # The simulator's reader starts losing at 0.85x the loss-free capacity, which prices the
    # stack's events as at saturation (an IPI and a poll per 64 frames): below it each frame
    # still has its own IPI and poll (0.82-1 a frame from 0.3 to 0.7x), so the core is full
    # at about 0.85x, and beyond it the inline softirq takes the reader's time (its share
    # 0.23 of the core at 0.85x, 0.15 at 1x): at the capacity it reads 58% of it, the model
    # all of it. (The closed-form CPU there is itself high, +8% at 0.5x: it wakes the reader
    # once a frame, where exponential service times make the reader still busy at the next
    # frame for a third of them at 0.5x and three quarters at 0.7x.)
    "veth-udp-receiver.toml": 0.45,
    "udp-receiver.toml": 0.025,
    # At the stack's capacity (13.9 Mpps) ksoftirqd drains its backlog within its slice
    # and sleeps (`model::beside_a_fair_task`): the simulator reads 11.0 Mpps, the model
    # 11.9 (7.7% less, 4 cores alike; 30% more while the model's turns took the slice).
    "af-xdp-rxdrop.toml": 0.085,
    # M/M/1/K at exactly its capacity loses 1/(K+1) of the frames.
    "meyer2014-rt.toml": 0.025,
}


@pytest.mark.parametrize("cores", [None, 4], ids=["as-given", "4-cores"])
@pytest.mark.parametrize("example", BUNDLED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_bundled_scenario_saturates_where_the_model_says(example, cores):
    """At 1.5x the model's loss-free capacity (tx clean and the application included, at
    most the line rate) the simulator forwards what the model predicts at that same offered
    load, within 1%: one cost semantics (per-byte service, contention, RSS placement, I/O-mode
    costs) in both (5% where a reader shares its core with ksoftirqd; OPEN_OVERLOAD lists
    where it is further today). At the capacity itself, where a reader on the stack's core
    meets its livelock onset, within 2% (OPEN_ONSET)."""
    import pktsim

    sets = {} if cores is None else {"cpu.cores": cores}
    # The AF_XDP reader beside ksoftirqd runs out of lag about every 8 ms: a window of many.
    sets.update(LONG_WINDOW.get(example.name, {}))
    p = pktsim.predict(example, sets)
    cap = p["capacity_pps"]
    for scale, open_list, within in ((1.5, OPEN_OVERLOAD, 0.01), (1.0, OPEN_ONSET, 0.02)):
        at = dict(sets, **{"traffic.rate": f"{min(scale * cap, p['line_rate_pps']):.0f}pps"})
        q = pktsim.predict(example, at)
        r = pktsim.run(example, at)
        if scale > 1.0:
            assert q["saturated"] or q["bottleneck"] == "link"
        # A reader sharing its core with the stack's saturated softirq work gets what the
        # fair class and __do_softirq's limits leave it (lag, blocking when it empties its
        # socket): within 5% of the closed forms (crates/pktsim-core/tests/shared_core.rs).
        fair = any("__do_softirq" in n or "by their weights" in n for n in q["notes"])
        # In receive livelock both read a fraction of a per cent of the capacity: they
        # agree within 0.5% of it (python/pktsim/scenarios/veth-udp-receiver.toml: 356 and
        # 499 pps).
        livelock = fair and max(r["throughput_pps"], q["predicted_pps"]) < 0.005 * cap
        if livelock:
            assert abs(r["throughput_pps"] - q["predicted_pps"]) < 0.005 * cap
            continue
        rel = open_list.get(example.name, 0.05 if fair and scale > 1.0 else within)
        assert r["throughput_pps"] == pytest.approx(q["predicted_pps"], rel=rel), (scale, q["notes"], q["per_core"])
    text = run_cli("model", example).stdout
    assert "C_total" in text and "predicted" in text


def test_partial_load_cpu_follows_the_wake_ups_and_polls_at_their_rates():
    """veth at 20 kpps (50 us apart, a wake-up's round of about 30 us): the model has each
    frame pay its wake-up and poll alone, the bound; the simulator's random service times
    let a few frames share one, so it is a little below. The basis says the model
    estimates here (evenly spaced arrivals, random service times)."""
    import pktsim

    ex = EXAMPLES / "veth-threaded-napi.toml"
    p = pktsim.predict(ex, {"traffic.rate": "20kpps"})
    r = pktsim.run(ex, {"traffic.rate": "20kpps"})
    assert r["cpu_utilization"] <= p["cpu_load_max"]
    assert p["cpu_load"] == pytest.approx(r["cpu_utilization"], rel=0.05)
    assert p["cpu_load_max"] == pytest.approx(20e3 * (7.18e-6 + 4.24e-6 + 9.1e-6))
    assert p["wakeups_per_s"] == pytest.approx(20e3, rel=1e-6)
    assert p["cpu_load_basis"].startswith("estimate")


def test_set_changes_rate_and_cores():
    p = model_json(EX64, "--set", "traffic.rate=1Mpps")
    assert p["predicted_pps"] == pytest.approx(1e6)
    # Every frame's processing, and the interrupts and polls at their predicted rates.
    assert 1e6 * 1978 / 3.3e9 < p["cpu_load"] <= p["cpu_load_max"]
    # One flow stays on one core (RSS); 4,096 flows spread over all four.
    p4 = model_json(EX64, "--set", "cpu.cores=4")
    assert p4["predicted_pps"] == pytest.approx(3.3e9 / 1978)
    p4 = model_json(EX64, "--set", "cpu.cores=4", "--set", "traffic.flows=4096")
    p1 = model_json(EX64, "--set", "traffic.flows=4096")
    assert p4["predicted_pps"] == pytest.approx(4 * p1["predicted_pps"])


def test_set_traffic_rate_is_the_total_of_several_sources(tmp_path):
    f = tmp_path / "two.toml"
    f.write_text(
        EX64.read_text() + '\n[[traffic.sources]]\nname = "small"\nshare = "75%"\n\n[[traffic.sources]]\nname = "big"\nshare = "25%"\nsize = "1500B"\n'
    )
    p = model_json(f, "--set", "traffic.rate=400kpps")
    assert p["offered_pps"] == pytest.approx(4e5)
    assert p["mean_frame_bytes"] == pytest.approx(0.75 * 64 + 0.25 * 1500)


def test_from_measurement_eq3():
    m = model_json("--from-measurement", "--rate", "1.67Mpps", "--cpu-load", "100%", "--freq", "3.3GHz")
    assert m["c_total_cycles"] == pytest.approx(3.3e9 / 1.67e6)
    # 000 Table I, 1024 B: 1.2 Mpps at 75% load -> ~2056 cycles.
    m = model_json("--from-measurement", "--rate", "1.2Mpps", "--cpu-load", "75%", "--freq", "3.3GHz")
    assert m["c_total_cycles"] == pytest.approx(2062.5)
    # The frequency can come from a scenario.
    m = model_json(EX64, "--from-measurement", "--rate", "1.67Mpps", "--cpu-load", "100%")
    assert m["frequency_hz"] == 3.3e9


@pytest.mark.parametrize(
    "args, must_name",
    [
        (["--set", "traffic.rate=20Mpps"], ["traffic.rate", "20Mpps", "line rate"]),
        (["--set", "cpu.frequency=3.3"], ["cpu.frequency", "3.3", "GHz"]),
        (["--set", "traffic.colour=red"], ["traffic.colour", "no such key"]),
        (["--set", "traffic.size=0B"], ["traffic.size", "0B"]),
        (["--set", "cpu.cores=0"], ["cpu.cores", "0"]),
        (["--set", "link.rate=10GHz"], ["link.rate", "bit/s"]),
        (["--set", "traffic.rate=nan"], ["traffic.rate", "NaN"]),
        (["--set", "norate"], ["norate", "key=value"]),
    ],
)
def test_bad_input_is_a_clear_error_never_a_traceback(args, must_name):
    proc = run_cli("model", EX64, *args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "panicked" not in proc.stderr
    assert str(EX64.name) in proc.stderr or "--set" in proc.stderr
    for part in must_name:
        assert part in proc.stderr, (part, proc.stderr)


@pytest.mark.parametrize(
    "args, must_name",
    [
        (["--from-measurement", "--rate", "1.67", "--cpu-load", "100%", "--freq", "3.3GHz"], ["--rate", "1.67", "pps"]),
        (["--from-measurement", "--rate", "1.67Mpps", "--cpu-load", "150%", "--freq", "3.3GHz"], ["cpu-load", "150"]),
        (["--from-measurement", "--rate", "1.67Mpps", "--cpu-load", "100%"], ["--freq"]),
        (["--from-measurement", "--rate", "1.67Mpps", "--freq", "3.3GHz"], ["--cpu-load"]),
    ],
)
def test_bad_measurement_arguments(args, must_name):
    proc = run_cli("model", *args, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    for part in must_name:
        assert part in proc.stderr, (part, proc.stderr)


def test_missing_file_and_syntax_error(tmp_path):
    proc = run_cli("model", tmp_path / "none.toml", check=False)
    assert proc.returncode == 2 and "none.toml" in proc.stderr and "Traceback" not in proc.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[cpu\nfrequency = '1GHz'\n")
    proc = run_cli("model", bad, check=False)
    assert proc.returncode == 2 and "bad.toml:1:" in proc.stderr


def test_profile_file_relative_to_scenario(tmp_path):
    (tmp_path / "mine.toml").write_text('[cycles]\nRX = "500cycles"\nother = "500cycles"\n')
    sc = tmp_path / "s.toml"
    sc.write_text('[cpu]\nfrequency = "2GHz"\n[link]\nrate = "10Gbit/s"\n[traffic]\n[cost]\nprofile = "mine.toml"\n')
    p = model_json(sc)
    assert p["c_total_cycles"] == 1000 and p["r_max_pps"] == pytest.approx(2e6)
    (tmp_path / "broken.toml").write_text('[cycles]\nRX = "500"\n')
    sc.write_text(sc.read_text().replace("mine.toml", "broken.toml"))
    proc = run_cli("model", sc, check=False)
    assert proc.returncode == 2 and "broken.toml" in proc.stderr and "cycles.RX" in proc.stderr


def test_profiles_listing_and_schema(tmp_path):
    names = run_cli("profiles").stdout.split()
    assert "raumer2015-64B" in names and "raumer2015-flows-1048576" in names
    assert 'RX = "408cycles"' in run_cli("profiles", "raumer2015-64B").stdout
    out = tmp_path / "schema.json"
    run_cli("schema", "-o", out)
    schema = json.loads(out.read_text())
    assert "cpu" in schema["properties"] and "traffic" in schema["properties"]


def test_compare_shows_the_configuration_difference_first():
    a, b = EXAMPLES / "linux-router-64B.toml", EXAMPLES / "router-skb-recycling.toml"
    out = run_cli("compare", a, b, "--set", "measure.duration=2ms").stdout
    head = out[: out.index("quantity")]
    for key in ("cost.buffers.recycling", "nic.tx_vector"):
        assert key in head, key
    res = json.loads(run_cli("compare", a, b, "--set", "measure.duration=2ms", "--json").stdout)
    assert {d["key"] for d in res["config_diff"]} >= {"cost.buffers.recycling", "nic.tx_vector"}
    assert all(d["key"] not in ("name", "description") for d in res["config_diff"])


def test_papers_can_be_named_by_author():
    from pktsim.reproduce import paper_id

    assert [paper_id(n) for n in ("raumer2015", "Meyer", "beifuss2015-napi", "bolla", "rizzo2012", "004")] == ["000", "001", "002", "003", "004", "004"]
    assert [paper_id(n) for n in ("Hoiland-Jorgensen", "xdp2018", "høiland2018")] == ["xdp2018"] * 3
    assert paper_id("smith") is None
    proc = run_cli("reproduce", "smith", check=False)
    assert proc.returncode == 2 and "raumer" in proc.stderr


def test_run_plots_its_time_series_and_refuses_a_plot_it_cannot_draw(tmp_path):
    """`pktsim run --plot` draws the time series (rates, events, moderation, idle wake-ups);
    a path that is no PNG or SVG, or a run without measure.interval, is a clean error."""
    out = tmp_path / "series.png"
    ex = str(EXAMPLES / "xdp-drop-mlx5.toml")
    run_cli("run", ex, "--set", "measure.interval=2ms", "--set", "measure.duration=10ms", "--set", "cpu.idle.table=intel-skx", "--plot", out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = run_cli("run", ex, "--plot", tmp_path / "series.txt", check=False)
    assert bad.returncode == 2 and ".png or .svg" in bad.stderr and "Traceback" not in bad.stderr
    none = run_cli("run", ex, "--set", "measure.duration=2ms", "--plot", tmp_path / "x.png", check=False)
    assert none.returncode == 2 and "measure.interval" in none.stderr and not (tmp_path / "x.png").exists()


def test_run_splits_the_cpu_by_context_and_compare_sets_two_kernels_side_by_side(tmp_path):
    """A UDP reader on its NAPI's core above the stack's capacity: with host.softirq =
    "defer" ksoftirqd has the stack's work and the reader about a third of the core (its
    wake-ups preempt ksoftirqd, which finishes its pass on the reader's clock); inline, the
    softirq takes it. `run` prints the split, `compare` the two settings."""
    sets = ["--set", "traffic.rate=3.5Mpps", "--set", "measure.duration=20ms"]
    text = run_cli("run", EXAMPLES / "udp-receiver.toml", *sets, "--set", "host.softirq=defer").stdout
    contexts = next(line for line in text.splitlines() if line.startswith("contexts"))
    shares = dict((k, float(v.rstrip("%"))) for k, v in re.findall(r"(\w+) ([\d.]+%)", contexts))
    assert shares["ksoftirqd"] > 55 and 25 < shares["app"] < 45, contexts
    defer = tmp_path / "defer.toml"
    defer.write_text((EXAMPLES / "udp-receiver.toml").read_text().replace('softirq = "inline"', 'softirq = "defer"'))
    out = run_cli("compare", EXAMPLES / "udp-receiver.toml", defer, *sets).stdout
    row = next(line for line in out.splitlines() if line.startswith("CPU in ksoftirqd")).split()
    assert float(row[3]) == 0.0 and float(row[5]) > 40, row


def test_run_says_the_clock_a_governor_settles_at():
    text = run_cli("run", EXAMPLES / "xdp-drop-mlx5.toml", "--set", "measure.duration=2ms").stdout
    clock = next(line for line in text.splitlines() if line.startswith("clock"))
    assert "GHz, where [cpu.freq]'s governor settles at this load" in clock
    assert float(clock.split()[1]) < 3.6
    assert not any(line.startswith("clock") for line in run_cli("run", EXAMPLES / "linux-router-64B.toml", "--set", "measure.duration=2ms").stdout.splitlines())


def test_every_option_of_every_command_has_help_text():
    import argparse

    from pktsim.cli import build_parser

    missing = []

    def walk(p, prefix):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    walk(sp, [*prefix, name])
            elif not a.help and not isinstance(a, argparse._HelpAction):
                missing.append(f"{' '.join(prefix)} {'/'.join(a.option_strings) or a.dest}")

    walk(build_parser(), ["pktsim"])
    assert not missing, missing


def test_a_run_builds_only_its_commands_options_and_parses_as_the_whole_parser():
    """main() builds the options of the command a run names alone (the others by name and
    help: argparse's ~180 options cost 13 ms an invocation); each command line parses to the
    same options either way, and the listing and a wrong name still show every command."""
    import argparse

    from pktsim.cli import build_parser

    def options(ns):
        return {k: (getattr(v, "__qualname__", None) if callable(v) else v) for k, v in vars(ns).items()}

    lines = [
        ["model", "a.toml", "--set", "x=1", "--json"],
        ["run", "a.toml", "--plot", "f.png"],
        ["sweep", "a.toml", "--param", "traffic.rate", "--values", "1,2", "--jobs", "1", "--dpi", "50"],
        ["plot", "t.csv", "-o", "d"],
        ["calibrate", "p.txt", "--rate", "1Mpps", "--cpu-load", "1"],
        ["compare", "a.toml", "b.toml"],
        ["reproduce", "all", "--json"],
        ["fit", "a.toml", "--data", "m.csv", "--free", "host.t_irq"],
        ["tune", "a.toml", "--minimize", "cpu", "--patience", "7"],
        ["testbed", "validate", "--path", "defer", "--quick"],
        ["testbed", "teardown", "--force"],
        ["import-host", "--from", "d"],
        ["schema", "--profile"],
        ["trace-info", "t.pcap"],
        ["profiles"],
        ["examples"],
        ["observe", "--iface", "lo", "--duration", "1s"],
    ]
    whole = build_parser()
    for argv in lines:
        assert options(build_parser(only=argv[0]).parse_args(argv)) == options(whole.parse_args(argv)), argv
    sub = next(a for a in build_parser(only="run")._actions if isinstance(a, argparse._SubParsersAction))
    full = next(a for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == list(full.choices)
    assert len(sub.choices["model"]._actions) == 1  # its -h alone
    p = run_cli("nope", check=False)
    assert p.returncode == 2 and "'observe'" in p.stderr and "'model'" in p.stderr


def test_compare_leaves_out_the_cpu_parts_neither_side_has():
    import pktsim

    res = pktsim.compare(EXAMPLES / "linux-router-64B.toml", EXAMPLES / "router-skb-recycling.toml", sets={"measure.duration": "5ms"})
    cpu = [r for r in res["rows"] if r["quantity"].startswith("CPU ")]
    assert cpu and all(r["a"] or r["b"] for r in cpu)
    # The router spends nothing idle, in an application or spinning: no such rows.
    assert not {"CPU idle", "CPU app", "CPU spin"} & {r["quantity"] for r in cpu}


def test_long_commands_say_how_far_they_are_when_stderr_is_a_log():
    """reproduce and tune printed nothing until done when stderr was not a terminal."""
    proc = run_cli("reproduce", "000", "--json")
    assert "pktsim reproduce: 000 done (1 of 1" in proc.stderr
    proc = run_cli("tune", EXAMPLES / "napi-deferral.toml", "--load", "300kpps", "--minimize", "cpu", "--budget", "12", "--replications", "1", "--jobs", "1")
    assert "pktsim tune: " in proc.stderr and " of 12 candidates (" in proc.stderr


def test_every_output_makes_its_missing_directory_and_refuses_one_it_cannot(tmp_path):
    """sweep -o made a missing directory where run --plot refused one: now all make it."""
    fig = tmp_path / "new" / "series.png"
    run_cli("run", EXAMPLES / "linux-router-64B.toml", "--set", "measure.duration=1ms", "--set", "measure.interval=0.1ms", "--plot", fig)
    assert fig.is_file()
    out = tmp_path / "other" / "s.csv"
    run_cli("sweep", EXAMPLES / "linux-router-64B.toml", "--param", "traffic.rate", "--values", "1Mpps", "--set", "measure.duration=1ms", "-o", out)
    assert out.is_file()
    bad = run_cli("run", EXAMPLES / "linux-router-64B.toml", "--set", "measure.interval=0.1ms", "--plot", "/proc/none/x.png", check=False)
    assert bad.returncode == 2 and "/proc" in bad.stderr
