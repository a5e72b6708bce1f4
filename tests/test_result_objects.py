"""Results cross from the core as Python objects, built straight from its serde types: they
must be exactly what the JSON of the ``--json`` contract reads back as (same keys in the
same order, same types, floats equal bit for bit, NaN as None), for runs, predictions and
normalised scenarios, and a sweep's full results must equal ``pktsim run --json`` of the
same point and seed."""

from __future__ import annotations

import json
import math

import pytest
from conftest import EXAMPLES, ROOT, run_cli

import pktsim
from pktsim import parse
from pktsim.values import flatten

BUNDLED = sorted(EXAMPLES.glob("*.toml")) + sorted((ROOT / "python" / "pktsim" / "scenarios").glob("*.toml"))
SHORT = {"measure.duration": "2ms", "measure.warmup": "0s"}


def same(a, b, path="$"):
    """a and b equal as JSON values, and of the same Python types, floats bit for bit."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__} ({a!r} vs {b!r})"
    if isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} vs {list(b)}"
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert a.hex() == b.hex(), f"{path}: {a!r} vs {b!r}"
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


def without_wall(r):
    """The result without its wall times (a chain's nodes and end to end have theirs)."""
    if isinstance(r, dict):
        return {k: without_wall(v) for k, v in r.items() if k != "wall_s"}
    if isinstance(r, list):
        return [without_wall(v) for v in r]
    return r


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_objects_equal_the_json_text_for_every_bundled_scenario(path):
    sets = {**SHORT, "measure.interval": "500us"}
    point = pktsim.Scenario.load(path, sets)._resolve()
    same(point.data(), json.loads(point.data(as_json=True)))
    same(point.predict(), json.loads(point.predict(as_json=True)))
    objects, text = point.run(), point.run(as_json=True)
    same(without_wall(objects), without_wall(json.loads(text)))
    assert isinstance(objects["wall_s"], float)


def test_nan_is_none_as_in_json():
    # One packet in 2 ms: no batch-means interval, which JSON writes as null.
    point = pktsim.Scenario.load(EXAMPLES / "meyer2014-rt.toml", {**SHORT, "traffic.rate": "1pps"})._resolve()
    objects, text = point.run(), json.loads(point.run(as_json=True))
    assert objects["latency_mean_ci95_ns"] is None and text["latency_mean_ci95_ns"] is None
    same(without_wall(objects), without_wall(text))
    assert "NaN" not in json.dumps(objects)


def test_same_scenario_and_seed_give_identical_results():
    sc = pktsim.Scenario.load(EXAMPLES / "meyer2014-rt.toml", SHORT)
    a, b = pktsim.run(sc), pktsim.run(sc.with_sets({}))
    parse._PARSED.clear()  # parsed anew: the same results still
    c = pktsim.run(EXAMPLES / "meyer2014-rt.toml", SHORT)
    same(without_wall(a), without_wall(b))
    same(without_wall(a), without_wall(c))


def test_run_file_is_run_of_the_file():
    sets = {**SHORT, "traffic.rate": "1Mpps"}
    a = pktsim.sim.run_file(EXAMPLES / "beifuss2015-napi.toml", sets)
    b = pktsim.run(EXAMPLES / "beifuss2015-napi.toml", sets)
    same(without_wall(a), without_wall(b))
    assert isinstance(a, pktsim.RunResult) and a._offered_pps == b._offered_pps == 1e6
    with pytest.raises(pktsim.ScenarioError) as e:
        pktsim.sim.run_file(EXAMPLES / "beifuss2015-napi.toml", {"traffic.rate": "bogus"})
    assert e.value.path == "traffic.rate"


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_sweeps_results_equal_pktsim_run_json_of_each_point(jobs):
    napi = EXAMPLES / "beifuss2015-napi.toml"
    sets = {"measure.duration": "5ms", "measure.interval": "1ms"}
    df = pktsim.sweep(napi, "traffic.rate", ["0.8Mpps", "50%"], sets=sets, replications=2, jobs=jobs)
    assert (df["status"] == "ok").all()
    for (_, row), full in zip(df.iterrows(), pktsim.results(df)):
        argv = ["run", napi, "--json", "--set", f"traffic.rate={row['traffic.rate']}", "--set", f"seed={row['seed']}"]
        argv += [f"--set={k}={v}" for k, v in sets.items()]
        expected = json.loads(run_cli(*argv).stdout)
        same(without_wall(full), without_wall(expected))
        # The table's columns are the flattened result.
        flat = flatten(expected)
        for k, v in flat.items():
            if k in ("seed", "wall_s"):
                continue
            got = row[k]
            missing = v is None and (got is None or got != got)  # None becomes NaN in a float column
            assert got == v or missing, (k, got, v)
    # A rate written as a share of the line rate gets the model's packet rate as its number.
    share = df[df["traffic.rate"] == "50%"]["traffic.rate_value"]
    assert share.notna().all() and share.iloc[0] == pytest.approx(pktsim.predict(napi, {"traffic.rate": "50%"})["offered_pps"])


def test_the_checkpoint_saves_the_cores_json_text_of_each_result(tmp_path):
    from pktsim import experiments

    napi = EXAMPLES / "beifuss2015-napi.toml"
    out = tmp_path / "s.parquet"

    def stop(i, n, label):
        if i == 2:
            raise KeyboardInterrupt

    with pytest.raises(experiments.SweepInterrupted) as e:
        pktsim.sweep(napi, "traffic.rate", "0.5Mpps,1Mpps,1.5Mpps", sets=SHORT, jobs=1, output=str(out), progress=stop)
    lines = (tmp_path / "s.parquet.partial.jsonl").read_text().splitlines()
    saved = [json.loads(line) for line in lines[1:]]
    assert len(saved) == 2
    for row, full in zip(saved, pktsim.results(e.value.table)):
        same(row["_full"], full)  # the text reads back as the objects, bit for bit
        assert row["throughput_pps"] == full["throughput_pps"] and row["_key"] == [row["traffic.rate"], 0]
    resumed = pktsim.sweep(napi, "traffic.rate", "0.5Mpps,1Mpps,1.5Mpps", sets=SHORT, jobs=1, output=str(out))
    assert resumed.attrs["tasks_run"] == 1
    for a, b in zip(pktsim.results(resumed)[:2], pktsim.results(e.value.table)):
        same(a, b)


def test_a_checkpoint_line_is_the_rows_json():
    from pktsim.experiments import _checkpoint_line

    full = {"a": 1.5, "b": [1, None], "c": {"d": "x"}}
    row = {"k": "1Mpps", "x": float("nan"), "_full": full, "_key": ["1Mpps", 0]}
    line = json.loads(_checkpoint_line(row, json.dumps(full)))
    assert line["_full"] == full and line["_key"] == ["1Mpps", 0] and math.isnan(line["x"])
    assert json.loads(_checkpoint_line({"_full": full}, json.dumps(full))) == {"_full": full}
    assert json.loads(_checkpoint_line(row)) == json.loads(json.dumps(row))


def _flatten_reference(d, prefix=""):
    """values.flatten as it was written in Python."""
    from collections.abc import Mapping

    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten_reference(v, key + "_"))
        elif isinstance(v, (list, tuple)):
            continue
        else:
            out[key] = v
    return out


def test_flatten_is_the_python_definition():
    import collections
    import types

    import numpy as np

    class Seq(list):
        pass

    point = pktsim.Scenario.load(EXAMPLES / "meyer2014-rt.toml", SHORT)._resolve()
    result = pktsim.RunResult(point.run())
    odd = {
        "a": 1,
        "b": 2.5,
        "c": None,
        "d": True,
        "e": "x",
        3: "int key",
        (1, 2): "tuple key",
        "m": types.MappingProxyType({"x": 1, "y": {"z": [1]}}),
        "o": collections.OrderedDict(p=1, q=(2,)),
        "l": [1, 2],
        "t": (3,),
        "s": Seq([1]),
        "n": np.float64(1.5),
        "i": np.int64(7),
        "arr": np.arange(3),
        "nested": {"deep": {"er": {"est": float("nan")}}},
        "empty": {},
    }
    for d in (result, point.data(), point.predict(), odd, {}):
        got, want = flatten(d), _flatten_reference(d)
        assert list(got) == list(want)
        for k in want:
            assert got[k] is want[k] or got[k] == want[k] or (got[k] != got[k] and want[k] != want[k]), k
    assert flatten({"a": {"b": 1}}, "p_") == {"p_a_b": 1}
