"""Post-processing cost of a large sweep: a 2,000-point sweep of 1 ms points, then its
summary, long tables and Parquet file. Prints each figure; a measurement, not a test.

    PYTHONPATH=python python benchmarks/sweep_postprocess.py [--points 2000] [--jobs 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import pktsim
from pktsim import experiments

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "meyer2014-rt.toml"  # 4 cores, 2 classes, 8 rx rings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    rates = np.linspace(100e3, 900e3, args.points)  # plain numbers: pps
    sets = {"measure.duration": 1e-3, "measure.warmup": 0.0}

    t0 = time.perf_counter()
    df = pktsim.sweep(SCENARIO, "traffic.rate", rates, sets=sets, jobs=args.jobs)
    t_sweep = time.perf_counter() - t0
    sim_s = float(df["wall_s"].sum())

    timings = {}
    t0 = time.perf_counter()
    summary = pktsim.summarize(df)
    timings["summarize"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ok = df[df["status"] == "ok"].sort_values("traffic.rate_value")
    timings["filter + sort"] = time.perf_counter() - t0
    for name, fn in experiments.LONG_TABLES.items():
        t0 = time.perf_counter()
        long = fn(df)
        timings[f"{name} ({len(long)} rows)"] = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        experiments.write_table(df, Path(tmp) / "sweep.parquet")
        timings["write_table (.parquet + long tables)"] = time.perf_counter() - t0

    print(f"points: {len(df)} ({int((df['status'] == 'ok').sum())} ok), summary rows: {len(summary)}, ok rows: {len(ok)}")
    print(f"sweep, wall clock: {t_sweep:.2f} s (simulations' own wall_s summed: {sim_s:.2f} s, jobs={args.jobs})")
    for k, v in timings.items():
        print(f"{k}: {v:.3f} s")
    print(f"post-processing total: {sum(timings.values()):.2f} s")


if __name__ == "__main__":
    main()
