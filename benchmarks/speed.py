"""pktsim's Python-side speed goals, measured in one run; each figure with its goal.

    .venv/bin/python benchmarks/speed.py                # N = 2,000 points, about a minute
    .venv/bin/python benchmarks/speed.py --points 10000 # the full figure
    .venv/bin/python benchmarks/speed.py --no-dask      # without a local Dask cluster

- start-up: wall time of `pktsim run` of a tiny scenario (median of 15), with the
  package's bytecode compiled as an install leaves it, and (for information) with none;
- sweep overhead: (sweep wall time - the simulations' own wall_s summed) / points, for N
  points of 1 ms of `examples/meyer2014-rt.toml`, through `pktsim.sweep` and `pktsim sweep
  -o OUT.parquet`, on a local process pool (--jobs) and on a local Dask cluster;
- post-processing (summarize, filter and sort, the long tables, the Parquet files) at two
  sizes, and `pktsim sweep`'s text table at 200 and 800 points: the time per point should
  stay flat (linear);
- peak RSS of a 64-core `pktsim run` (the engine's memory), in a child process.

A measurement, not a test: it prints figures and "met" or "NOT met" against each goal, and
exits 0 either way. The sweep goal is stated for 10,000 points; with fewer, the commands'
fixed start (importing pandas, starting the pool, connecting to Dask) weighs more per
point. Each sweep figure is the best of --repeat runs, and the machine's parallelism is
measured before and after (two CPU-bound processes against one): on a shared machine the
second core is not always there, and then no pool can beat one process. The script runs
against whatever `pktsim` the interpreter imports, so it measures an older checkout side by
side.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SWEPT = ROOT / "examples" / "meyer2014-rt.toml"  # 4 cores, 2 classes, 8 rx rings
TINY = ["run", "examples/linux-router-64B.toml", "--set", "measure.duration=100us", "--set", "measure.warmup=0s", "--json"]
BIG = [
    "run",
    "python/pktsim/scenarios/beifuss2015-napi.toml",
    "--set",
    "cpu.cores=64",
    "--set",
    "traffic.flows=1024",
    "--set",
    "link.rate=1Tbit/s",
    "--set",
    "traffic.rate=96Mpps",
    "--set",
    "measure.duration=10ms",
    "--json",
]
SETS = {"measure.duration": "1ms", "measure.warmup": "0s"}

GOAL_STARTUP_MS = 60.0
GOAL_OVERHEAD_MS = 1.0
GOAL_RSS_MB = 25.0
LINEAR_SLACK = 1.5  # per-point post-processing at the larger size at most this times the smaller's

verdicts: list[tuple[str, bool]] = []


def _spin(n: int) -> float:
    t0 = time.perf_counter()
    x = 0
    for i in range(n):
        x += i
    return time.perf_counter() - t0


def parallelism() -> float:
    """How much faster two CPU-bound processes finish than one doing both in turn (2.0: both
    cores are free; 1.0: only one is)."""
    from concurrent.futures import ProcessPoolExecutor

    n = 3_000_000
    with ProcessPoolExecutor(2) as ex:
        list(ex.map(_spin, [1000, 1000]))
        one = min(_spin(n) for _ in range(2))
        t0 = time.perf_counter()
        list(ex.map(_spin, [n, n]))
        two = time.perf_counter() - t0
    return 2 * one / two


def say(name: str, value: str, goal: str = "", met: bool | None = None) -> None:
    tail = "" if met is None else f"   goal {goal}: {'met' if met else 'NOT met'}"
    if met is not None:
        verdicts.append((name, met))
    print(f"  {name:<58} {value:>14}{tail}", flush=True)


def pktsim_cmd() -> list[str]:
    """The `pktsim` command next to this interpreter (the console script), else `-m pktsim`."""
    script = Path(sys.executable).parent / "pktsim"
    return [str(script)] if script.exists() else [sys.executable, "-m", "pktsim"]


def package_dir() -> Path:
    import pktsim

    return Path(pktsim.__file__).resolve().parent


def rates(n: int) -> list[str]:
    """n distinct offered rates from 100 kpps to 900 kpps (1 ms each, no warm-up)."""
    return [f"{100_000 + 800_000 * i / max(1, n - 1):.3f}pps" for i in range(n)]


# ------------------------------------------------------------------------------ start-up


def startup(runs: int) -> None:
    print(f"start-up: `pktsim {' '.join(TINY)}`, median of {runs}")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    pkg = package_dir()
    # Bytecode as `pip install` leaves it (compiled once; the source tree's __pycache__).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(pkg)], check=True, env=env)
    compiled, best = _median_wall(pktsim_cmd() + TINY, env, runs)
    say("pktsim run, tiny scenario (bytecode compiled)", f"{compiled * 1e3:.1f} ms", f"<= {GOAL_STARTUP_MS:.0f} ms", compiled * 1e3 <= GOAL_STARTUP_MS)
    print(f"      (fastest of {runs}: {best * 1e3:.1f} ms)")
    # No bytecode for pktsim at all (the first run after an edit, or PYTHONDONTWRITEBYTECODE
    # without an install's bytecode): a copy of the package without __pycache__.
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(pkg, Path(tmp) / "pktsim", ignore=shutil.ignore_patterns("__pycache__"))
        cold_env = {**env, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": tmp}
        cold, best = _median_wall([sys.executable, "-c", "import sys; from pktsim.cli import main; sys.exit(main())"] + TINY, cold_env, runs)
    say("pktsim run, tiny scenario (no bytecode for pktsim)", f"{cold * 1e3:.1f} ms", f"<= {GOAL_STARTUP_MS:.0f} ms", cold * 1e3 <= GOAL_STARTUP_MS)
    print(f"      (fastest of {runs}: {best * 1e3:.1f} ms)")


def _median_wall(cmd: list[str], env: dict, runs: int) -> tuple[float, float]:
    """The median and the fastest wall time of ``runs`` runs of ``cmd``."""
    subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), min(walls)


# ------------------------------------------------------------------------------ sweeps


def _overhead(label: str, n: int, runs: list, goal: bool = True) -> None:
    """The best of the runs ((wall, summed wall_s) pairs) as time per point outside the
    simulations."""
    wall, sim_s = min(runs, key=lambda r: r[0] - r[1])
    per = (wall - sim_s) / n
    if goal:
        say(label, f"{per * 1e3:.3f} ms/pt", f"<= {GOAL_OVERHEAD_MS:g} ms", per * 1e3 <= GOAL_OVERHEAD_MS)
    else:
        say(label, f"{per * 1e3:.3f} ms/pt")
    others = ", ".join(f"{(w - s) / n * 1e3:.3f}" for w, s in runs)
    print(f"      ({n} points: {wall:.2f} s wall, simulations' own wall_s summed {sim_s:.2f} s; each run: {others} ms/pt)")


def api_sweep(n: int, jobs: int, dask: str | None = None):
    import pktsim

    t0 = time.perf_counter()
    df = pktsim.sweep(SWEPT, "traffic.rate", rates(n), sets=SETS, jobs=jobs, dask=dask)
    wall = time.perf_counter() - t0
    assert (df["status"] == "ok").all(), df[df["status"] != "ok"]["error"].head()
    return df, wall, float(df["wall_s"].sum())


def fresh_api_sweep(n: int, jobs: int, dask: str | None = None) -> tuple[float, float]:
    """`pktsim.sweep` timed in a fresh interpreter (after a 50-point warm-up there), as a
    user's session would run it: a process that already holds earlier sweeps' results runs
    (and forks) slower, which would blur the comparison."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--_api-sweep", str(n), str(jobs)] + ([dask] if dask else [])
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    wall, sim_s = proc.stdout.split()[-2:]
    return float(wall), float(sim_s)


def _api_sweep_child(n: int, jobs: int, dask: str | None) -> None:
    api_sweep(min(n, 50), jobs, dask)
    _, wall, sim_s = api_sweep(n, jobs, dask)
    print(wall, sim_s)


def cli_sweep(n: int, jobs: int, tmp: Path, dask: str | None = None) -> tuple[float, float]:
    import pandas as pd

    out = tmp / f"cli-{n}-{'dask' if dask else 'local'}.parquet"
    step = 800 / max(1, n - 1)  # the same load range as rates(n), written as a range
    argv = pktsim_cmd() + [
        "sweep",
        str(SWEPT),
        "--param",
        "traffic.rate",
        "--values",
        f"100kpps:900kpps:{step:.12g}kpps",
        "--set",
        "measure.duration=1ms",
        "--set",
        "measure.warmup=0s",
        "-o",
        str(out),
    ]
    argv += ["--dask", dask] if dask else ["--jobs", str(jobs)]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    return wall, float(pd.read_parquet(out, columns=["wall_s"])["wall_s"].sum())


def sweeps(n: int, jobs: int, use_dask: bool, repeat: int, tmp: Path):
    print(
        f"sweep overhead: {n} points of 1 ms ({SWEPT.relative_to(ROOT)}), outside the simulations, best of {repeat}"
        + ("" if n >= 10_000 else " (the goal is for 10,000 points)")
    )
    runs = [fresh_api_sweep(n, jobs) for _ in range(repeat)]
    _overhead(f"pktsim.sweep, local pool (jobs={jobs})", n, runs)
    runs = [cli_sweep(n, jobs, tmp) for _ in range(repeat)]
    _overhead(f"pktsim sweep -o OUT.parquet --jobs {jobs} (whole command)", n, runs)
    runs = [fresh_api_sweep(n, 1) for _ in range(repeat)]
    _overhead("for reference: pktsim.sweep in one process (jobs=1)", n, runs, goal=False)
    if use_dask:
        try:
            from distributed import LocalCluster
        except ImportError:
            print("  (Dask's distributed is not installed: no Dask figures)")
            return
        with contextlib.redirect_stderr(io.StringIO()):
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
        try:
            runs = [fresh_api_sweep(n, jobs, cluster.scheduler_address) for _ in range(repeat)]
            _overhead(f"pktsim.sweep, Dask (local cluster, {jobs} workers)", n, runs)
            runs = [cli_sweep(n, jobs, tmp, cluster.scheduler_address) for _ in range(repeat)]
            _overhead("pktsim sweep -o OUT.parquet --dask ADDR (whole command)", n, runs)
        finally:
            with contextlib.redirect_stderr(io.StringIO()):
                cluster.close()


# ------------------------------------------------------------------------------ post-processing


def postprocess(df, tmp: Path) -> None:
    from pktsim import experiments, summarize

    sizes = sorted({max(1, len(df) // 5), len(df)})
    print(f"post-processing at {' and '.join(map(str, sizes))} rows (summarize, filter + sort, long tables, Parquet)")
    per_point = []
    warm = df.iloc[:10]  # first calls import pyarrow and pandas' writers: not part of a row's cost
    summarize(warm)
    experiments.write_table(warm, tmp / "warm.parquet")
    for size in sizes:
        part = df.iloc[:size]
        t0 = time.perf_counter()
        summarize(part)
        part[part["status"] == "ok"].sort_values("traffic.rate_value")
        for fn in experiments.LONG_TABLES.values():
            fn(part)
        experiments.write_table(part, tmp / f"post-{size}.parquet")
        took = time.perf_counter() - t0
        per_point.append(took / size)
        say(f"post-processing, {size} rows", f"{took:.2f} s", "")
        print(f"      ({took / size * 1e3:.3f} ms per row)")
    if len(per_point) == 2:
        ratio = per_point[1] / per_point[0]
        say(f"per-row time at {sizes[1]} / at {sizes[0]} rows", f"{ratio:.2f}", f"<= {LINEAR_SLACK} (linear)", ratio <= LINEAR_SLACK)

    # `pktsim sweep`'s text table (the summary and its printing), the runs left out.
    from pktsim import cli

    real = experiments.run_grid
    took = {}
    small, large = (200, 800) if len(df) >= 800 else (max(1, len(df) // 4), len(df))
    try:
        for size in (small, large):
            frame = df.iloc[:size].copy()
            labels = list(frame["traffic.rate"])
            experiments.run_grid = lambda *a, frame=frame, **k: frame
            argv = ["sweep", str(SWEPT), "--param", "traffic.rate", "--values", ",".join(labels), "--jobs", "1"]
            t0 = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()) as out:
                assert cli.main(argv) == 0
            took[size] = time.perf_counter() - t0
            assert len(out.getvalue().splitlines()) >= size
    finally:
        experiments.run_grid = real
    for size, t in took.items():
        say(f"pktsim sweep text table, {size} points", f"{t * 1e3:.1f} ms", "")
    ratio = (took[large] / large) / (took[small] / small)
    say(f"per-point time at {large} / at {small} points", f"{ratio:.2f}", f"<= {LINEAR_SLACK} (linear)", ratio <= LINEAR_SLACK)


# ------------------------------------------------------------------------------ memory


def peak_rss() -> None:
    print(f"memory: `pktsim {' '.join(BIG)}`")
    probe = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", probe, *pktsim_cmd(), *BIG], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        say("peak RSS, 64-core run", "failed", f"<= {GOAL_RSS_MB:g} MB", False)
        print("      " + (out.stderr.strip().splitlines() or ["?"])[-1])
        return
    mb = int(out.stdout.split()[-1]) * 1024 / 1e6  # ru_maxrss is in KiB on Linux
    say("peak RSS, 64-core run (the engine's; measured only)", f"{mb:.1f} MB", f"<= {GOAL_RSS_MB:g} MB", mb <= GOAL_RSS_MB)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=2000, help="points of the sweeps (default 2000; 10000 for the full figure)")
    ap.add_argument("--jobs", type=int, default=2, help="local processes and Dask workers (default 2)")
    ap.add_argument("--runs", type=int, default=15, help="runs of the start-up figure, the median counts (default 15)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each sweep figure, the best one counts (default 2)")
    ap.add_argument("--no-dask", action="store_true", help="leave out the Dask figures")
    ap.add_argument("--_api-sweep", nargs="+", help=argparse.SUPPRESS)  # N JOBS [ADDR]: one timed sweep, in a child
    args = ap.parse_args()
    if args._api_sweep:
        n, jobs, *addr = args._api_sweep
        return _api_sweep_child(int(n), int(jobs), addr[0] if addr else None)
    import pktsim

    print(f"pktsim {pktsim.__version__} at {package_dir()}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"  parallelism now: two CPU-bound processes run {parallelism():.2f}x as fast as one (2.00: both cores free)")
    t0 = time.perf_counter()
    startup(args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        sweeps(args.points, args.jobs, not args.no_dask, args.repeat, Path(tmp))
        df = api_sweep(args.points, args.jobs)[0]  # the table to post-process (not timed)
        postprocess(df, Path(tmp))
    peak_rss()
    print(f"  parallelism at the end: {parallelism():.2f}x; {time.perf_counter() - t0:.0f} s in all")
    missed = [name for name, met in verdicts if not met]
    print(f"goals: {len(verdicts) - len(missed)} of {len(verdicts)} met" + (f"; NOT met: {'; '.join(missed)}" if missed else ""))


if __name__ == "__main__":
    main()
