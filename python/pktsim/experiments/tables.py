"""A sweep's table: the DataFrame of its rows with the full results held beside it
(:func:`results`), the long per-class, per-ring and time-series tables, the files they are
written to and read from, and :func:`summarize`."""

from __future__ import annotations

import collections
import json
import uuid
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import _core
from ..scenario import Scenario
from ..values import flatten

# The full results of recent sweeps, by attrs["sweep_id"]: held while the sweep's own table
# lives, and for the last few sweeps in any case (tables derived from a dropped one).
_STORE: weakref.WeakValueDictionary[str, _Results] = weakref.WeakValueDictionary()


_RECENT: collections.deque = collections.deque(maxlen=8)


class _Results(list):
    """The full results of a sweep's rows (None for an error row), by row position."""

    keys: list


def _table(ordered: list, sc: Scenario, keys: list, tasks_run: int):
    import pandas as pd

    full = _Results(r.pop("_full", None) for r in ordered)
    full.keys = keys
    for r in ordered:
        r.pop("_key", None)
    df = pd.DataFrame(ordered)
    # A key's numeric column only when its values are numbers.
    empty = [c for c in df.columns if c.endswith("_value") and c[: -len("_value")] in keys and df[c].isna().all()]
    df = df.drop(columns=empty)
    if "pktsim_version" not in df:
        df["pktsim_version"] = _core.VERSION
    df["pktsim_version"] = df["pktsim_version"].fillna(_core.VERSION)
    df["scenario"] = sc.origin
    sweep_id = uuid.uuid4().hex
    _STORE[sweep_id] = full
    _RECENT.append(full)
    object.__setattr__(df, "_pktsim_results", full)  # lives as long as the table
    # Small metadata only: pandas deep-copies attrs on every operation.
    df.attrs["sweep_id"] = sweep_id
    df.attrs["tasks_run"] = tasks_run
    df.attrs["params"] = list(keys)
    return df


def results(df) -> list:
    """The full :func:`pktsim.run` result (a dict, with its per-class, per-ring and
    time-series lists) of each row of a sweep table, or of a table derived from it (rows
    matched by index); None for an error row. Raises ``ValueError`` when the table's results
    are gone (a table read back from a file: use the long tables written next to it)."""
    full = _STORE.get(df.attrs.get("sweep_id", ""))
    if full is None:
        raise ValueError(
            "this table's full results are not held any more (read from a file, or from an old sweep); "
            "expected a table returned by pktsim.sweep, or read OUT.per_class/per_ring/time_series files"
        )
    return [full[i] if 0 <= i < len(full) else None for i in df.index]


def _point_columns(df) -> list:
    keys = [k for k in df.attrs.get("params", []) if k in df.columns]
    cols = []
    for k in keys:
        cols.append(k)
        if f"{k}_value" in df.columns:
            cols.append(f"{k}_value")
    return cols + [c for c in ("replication", "seed") if c in df.columns]


def _long(df, rows_of) -> Any:
    import pandas as pd

    cols = _point_columns(df)
    point = df[cols].to_dict("records")
    out = []
    for head, r in zip(point, results(df)):
        if r:
            out.extend({**head, **row} for row in rows_of(r))
    return pd.DataFrame(out, columns=None if out else cols)


def per_class(df):
    """A long table of per-class results: the point columns, ``class``, then each class's
    flattened fields (``offered_pps``, ``throughput_pps``, ``loss_ratio``,
    ``latency_ns_p99``, ...), one row per (row of ``df``, traffic class)."""
    return _long(df, lambda r: ({"class": c, **flatten(v)} for c, v in (r.get("per_class") or {}).items()))


def per_ring(df):
    """A long table of per-ring results: the point columns, then ``ring``, ``core``,
    ``queue`` and each ring's flattened fields, one row per (row of ``df``, rx ring)."""
    return _long(df, lambda r: (flatten(v) for v in (r.get("per_ring") or [])))


def time_series(df):
    """A long table of the time series (scenarios with ``measure.interval``): the point
    columns, ``bucket``, ``t_s`` (the bucket's start: bucket x ``series_interval_s``, s) and the
    bucket's counts (``offered``, ``forwarded``, ``dropped``, ``irqs``, ``polls``, ...),
    one row per (row of ``df``, bucket)."""

    def rows(r):
        step = r.get("series_interval_s") or 0.0
        return ({"bucket": i, "t_s": i * step, **b} for i, b in enumerate(r.get("series") or []))

    return _long(df, rows)


LONG_TABLES = {"per_class": per_class, "per_ring": per_ring, "time_series": time_series}


def _sibling(path: Path, table: str) -> Path:
    return path.with_name(f"{path.stem}.{table}{path.suffix}")


def write_table(df, path: str | Path, scenario: Scenario | None = None, *, variants: Mapping[str, tuple] | None = None, long_tables: bool = True) -> None:
    """Parquet or CSV, chosen by the suffix; written all at once. The long tables of the
    sweep's full results (:func:`per_class`, :func:`per_ring`, :func:`time_series`) go next
    to it as ``OUT.per_class.parquet`` etc. (when the results are held and the table is not
    empty). Parquet metadata (``pktsim_*`` keys) records the scenario as written, the
    resolved scenario (every default filled in, JSON), the ``--set`` overrides, the
    variants, the seed, the client's pktsim version and the versions of the processes that
    ran the rows (``pktsim_worker_versions``, JSON list); ``pktsim_table`` says which table
    a file holds (``sweep``, ``per_class``, ``per_ring`` or ``time_series``)."""
    import io

    from ..textio import atomic_write

    path = Path(path)
    flat = df.copy()
    flat.attrs = {}
    extra = {}
    if long_tables and df.attrs.get("sweep_id") in _STORE:
        for name, fn in LONG_TABLES.items():
            t = fn(df)
            if len(t):
                extra[name] = t
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        meta = {b"pktsim_version": _core.VERSION.encode()}
        if "pktsim_version" in df:
            meta[b"pktsim_worker_versions"] = json.dumps(sorted(map(str, df["pktsim_version"].dropna().unique()))).encode()
        if scenario is not None:
            meta[b"pktsim_scenario"] = scenario.text.encode()
            meta[b"pktsim_scenario_origin"] = scenario.origin.encode()
            meta[b"pktsim_scenario_resolved"] = json.dumps(scenario.data).encode()
            meta[b"pktsim_sets"] = json.dumps([f"{k}={v}" for k, v in scenario.sets]).encode()
            meta[b"pktsim_seed"] = str(scenario.seed).encode()
        if variants:
            meta[b"pktsim_variants"] = json.dumps({k: [f"{a}={b}" for a, b in v] for k, v in variants.items()}).encode()
        for kind, target, frame in [("sweep", path, flat), *((n, _sibling(path, n), t) for n, t in extra.items())]:
            table = pa.Table.from_pandas(frame, preserve_index=False)
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta, b"pktsim_table": kind.encode()})
            buf = io.BytesIO()
            pq.write_table(table, buf)
            atomic_write(target, buf.getvalue())
    elif path.suffix == ".csv":
        atomic_write(path, flat.to_csv(index=False))
        for n, t in extra.items():
            atomic_write(_sibling(path, n), t.to_csv(index=False))
    else:
        raise ValueError(f"{path}: expected a .parquet or .csv output file")
    # A long table an earlier sweep wrote to this path, which this one has not: removed, so
    # that every table beside OUT is OUT's.
    for n in LONG_TABLES:
        stale = _sibling(path, n)
        if n not in extra and stale.is_file():
            stale.unlink()


def read_table(path: str | Path):
    import pandas as pd

    path = Path(path)
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def summarize(df, keys: Sequence[str] | None = None, metrics: Sequence[str] | None = None):
    """Mean and 95% confidence half-width (Student's t over replications) of each metric
    per point: the point's columns (``keys``, default the swept keys and ``variant``, also
    for a table read back from a file; with their ``KEY_value`` columns), ``n`` (replications that succeeded), then
    ``<metric>_mean`` and ``<metric>_ci95`` in the metric's own unit (``latency_ns_p99`` in
    ns, ``throughput_pps`` in pps, ...; see :func:`sweep`). ``ci95`` is NaN when n = 1.
    Metrics default to every numeric column but the seed, replication, wall time and events.
    One vectorised group-by: linear in the rows."""
    import numpy as np
    import pandas as pd

    if keys is None:
        keys = df.attrs.get("params")
    if keys is None:  # a table read back from a file: its scenario keys ("a.b") and variant
        keys = (["variant"] if "variant" in df.columns else []) + [c for c in df.columns if "." in c and not c.endswith("_value")]
    keys = list(keys)
    # A key's numeric twin is not a key of its own (callers that take every "a.b" column).
    keys = [k for k in keys if not (k.endswith("_value") and k[: -len("_value")] in keys)]
    ok = df[df["status"] == "ok"] if "status" in df else df
    value_cols = [f"{k}_value" for k in keys if f"{k}_value" in ok.columns]
    if metrics is None:
        skip = set(keys) | set(value_cols) | {"replication", "seed", "wall_s", "events"}
        metrics = [c for c in ok.columns if c not in skip and pd.api.types.is_numeric_dtype(ok[c])]
    metrics = list(metrics)
    data = ok[keys + value_cols].copy()
    for m in metrics:
        data[m] = pd.to_numeric(ok[m], errors="coerce").astype(float)
    if not keys:
        data["_all"] = 0
    g = data.groupby(keys or ["_all"], sort=False, dropna=False)
    n = g.size()
    mean = g[metrics].mean()
    std = g[metrics].std(ddof=1)
    t = np.array([_core.student_t95(int(k) - 1) if k > 1 else np.nan for k in n.to_numpy()])
    half = std.mul(t / np.sqrt(n.to_numpy()), axis=0)
    cols = {}
    if value_cols:
        first = g[value_cols].first()
        cols.update({c: first[c] for c in value_cols})
    cols["n"] = n
    for m in metrics:
        cols[f"{m}_mean"] = mean[m]
        cols[f"{m}_ci95"] = half[m]
    out = pd.DataFrame(cols).reset_index()
    if not keys:
        out = out.drop(columns=["_all"])
    else:
        order = []
        for k in keys:
            order.append(k)
            if f"{k}_value" in out.columns:
                order.append(f"{k}_value")
        out = out[order + [c for c in out.columns if c not in order]]
    out.attrs["params"] = keys
    return out
