"""pktsim.schema_info: what Python knows of the scenario format is what the core declares.
Its answers (the modes and policies, which mode reads which key, the other names of keys,
the ranges) are held against the schema and against the core loading scenarios."""

import json

import pytest
from conftest import EXAMPLES

import pktsim
from pktsim import _core, schema_info
from pktsim.errors import ScenarioError

MODES = schema_info.tagged("host.io")
POLICIES = schema_info.tagged("nic.itr.mode")


def _refused(sets, text=""):
    """The key path the core refuses ``sets`` at (on ``text``), or None."""
    try:
        _core.Parsed(text, "toml", "t", ".").resolve(list(sets))
    except ScenarioError as e:
        return e.path
    return None


def test_the_tagged_sections_are_the_schemas_alternatives():
    defs = json.loads(_core.schema("scenario"))["$defs"]
    tags = [a["properties"]["io"]["const"] for a in defs["HostSpec"]["oneOf"]]
    assert MODES.names == tuple(tags) == tuple(m.name for m in schema_info.io_modes())
    assert "napi" in tags and "af-xdp" in tags and len(tags) == len(set(tags))
    assert POLICIES.names == tuple(a["properties"]["mode"]["const"] for a in defs["ItrSpec"]["oneOf"])
    # The defaults, as a scenario that leaves the tags out has them.
    data = pktsim.Scenario.load(EXAMPLES / "linux-router-64B.toml").data
    assert schema_info.io_mode().name == MODES.default == data["host"]["io"]
    assert POLICIES.default == data["nic"]["itr"]["mode"]
    assert schema_info.values("host.io") == MODES.names and schema_info.values("nic.itr.mode") == POLICIES.names
    assert schema_info.values("nic.itr.profile") == tuple(a["const"] for a in defs["DimProfile"]["oneOf"])
    assert schema_info.schema() is schema_info.schema()  # parsed once


def test_a_key_one_mode_does_not_read_is_refused_with_it_and_one_it_reads_is_not():
    """Every key of every mode's table (a number, a flag or a time: a value other than its
    default is at hand), with every mode: the core refuses it exactly where the schema
    says the mode does not read it."""
    keys = sorted({k for m in schema_info.io_modes() for k in m.keys})
    checked = 0
    for key in keys:
        try:
            setting = schema_info._other_value(key)
        except KeyError:
            continue
        for mode in schema_info.io_modes():
            where = _refused([("host.io", mode.name), setting])
            at_key = where is not None and (key == where or key.startswith(where + "."))  # or its table
            assert at_key == (not mode.reads(key)), (mode, key, where)
            checked += 1
    assert checked > 100


def test_keys_of_other_sections_are_read_as_the_core_says():
    assert MODES.readers("nic.itr") == MODES.readers("nic.itr.mode") == ("napi", "xdp", "af-xdp")
    assert MODES.readers("nic.napi.defer_hard_irqs") == ("napi", "threaded-napi", "xdp", "af-xdp")
    assert MODES.readers("host.budget") == ("napi", "xdp", "af-xdp")
    assert MODES.readers("host.af_xdp.batch") == ("af-xdp",)
    assert POLICIES.readers("nic.itr.interval") == ("static",) and POLICIES.readers("nic.itr.profile") == ("dim",)
    for mode in MODES.names:
        refused = _refused([("host.io", mode), ("nic.itr.mode", "off")])
        assert (refused == "nic.itr") == (not MODES.reads(mode, "nic.itr")), mode
    with pytest.raises(KeyError, match="expected one of napi"):
        MODES.reads("nope", "host.budget")
    with pytest.raises(KeyError, match="not the tag"):
        schema_info.tagged("nic.rx_ring")


def test_each_alias_a_doc_string_declares_is_one_the_core_accepts():
    probe = schema_info._PROBE
    found = {k: schema_info.aliases(k) for k in ("nic.itr.interval", "host.budget", "host.budget_time", "nic.qdisc_len")}
    assert found == {
        "nic.itr.interval": ("nic.itr.rx_usecs",),
        "host.budget": ("host.netdev_budget",),
        "host.budget_time": ("host.netdev_budget_usecs",),
        "nic.qdisc_len": ("nic.txqueuelen",),
    }
    for key, others in schema_info._all_aliases().items():
        value = schema_info._other_value(key)[1]
        pre = [("nic.itr.mode", POLICIES.readers(key)[0])] if key.startswith("nic.itr.") else []
        want = pktsim.Scenario.from_toml(probe, sets=[*pre, (key, value)]).data
        for other in others:
            assert pktsim.Scenario.from_toml(probe, sets=[*pre, (other, value)]).data == want, (key, other)


def test_ranges_are_the_cores():
    assert schema_info.largest("nic.itr.interval", "us", (("nic.itr.mode", "static"),)) == 1022
    assert _refused([("nic.itr.mode", "static"), ("nic.itr.interval", "1023us")], schema_info._PROBE) == "nic.itr.interval"
    assert schema_info.largest("cpu.cores") == 1024
    assert schema_info.largest("seed") is None  # no range but the type's
    with pytest.raises(ValueError, match="refuses it"):
        schema_info.largest("cpu.cores", start=0)


def test_a_tune_drops_a_tuned_key_in_every_spelling(tmp_path, cli):
    text = (EXAMPLES / "napi-deferral.toml").read_text()
    text = text.replace('mode = "off"', 'mode = "static"\nrx_usecs = "10us"').replace('t_poll = "500ns"', 't_poll = "500ns"\nnetdev_budget = 300')
    src = tmp_path / "aliases.toml"
    src.write_text(text)
    out = tmp_path / "tuned"
    knobs = ["--knobs", "nic.itr.interval=8us,10us", "--knobs", "host.budget"]
    cli("tune", src, "--set", "measure.duration=5ms", "--minimize", "cpu", *knobs, "--budget", "4", "--replications", "1", "-o", out)
    tuned = (out / "tuned.toml").read_text()
    assert "rx_usecs" not in tuned and "netdev_budget =" not in tuned
    assert "interval =" in tuned and "budget =" in tuned
    cli("run", out / "tuned.toml", "--set", "measure.duration=1ms")
