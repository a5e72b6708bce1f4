"""Golden outputs: what pktsim prints for the bundled scenarios, kept to catch any change.

A refactoring must leave every figure pktsim prints as it was. This script runs the CLI as a
user would on every bundled example and scenario (``run --json``, ``model --json``), on a
few variants that reach the engine's other paths (several cores, shared tx queues, each I/O
mode, each moderation policy, strategies), on ``reproduce all --json`` and on ``schema``,
drops what depends on the wall clock (``wall_s``), and compares the result with
``tests/data/golden.json``.

    python tests/golden.py            # compare; exit 1 and name every difference
    python tests/golden.py --update   # record the current outputs (a deliberate change)

``tests/test_golden.py`` runs the comparison in ``make test``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "golden.json"
SCENARIOS = ROOT / "python" / "pktsim" / "scenarios"

# Variants of the 64 B router that reach the engine's other paths, short so the check is quick.
SHORT = ["--set", "measure.warmup=2ms", "--set", "measure.duration=10ms"]
VARIANTS = {
    "4 cores, 64 flows": ["cpu.cores=4", "traffic.flows=64", "traffic.rate=4Mpps"],
    "2 cores sharing 1 tx queue": ["cpu.cores=2", "traffic.flows=16", "nic.tx_queues=1", "host.tx_lock=40ns", "traffic.rate=2Mpps"],
    "tx vector shared, static ITR": ["nic.tx_vector=shared", "nic.itr.mode=static", "nic.itr.interval=50us", "traffic.rate=1Mpps"],
    "ITR off, legacy net_rx_action": ["nic.itr.mode=off", "host.net_rx_action=legacy", "traffic.rate=800kpps", "host.t_irq=1us", "host.t_poll=200ns"],
    "server, poisson, exponential": ["host.io=server", "traffic.pattern=poisson", "host.service=exponential", "traffic.rate=1.5Mpps"],
    "busy-poll batch 32": ["host.io=busy-poll", "host.batch.t_call=100ns", "host.batch.t_packet=10ns", "traffic.rate=1.2Mpps"],
    "batched-syscall batch 8": [
        "host.io=batched-syscall",
        "host.batch.size=8",
        "host.batch.t_call=1us",
        "host.batch.t_wakeup=2us",
        "host.t_irq=1us",
        "traffic.rate=300kpps",
    ],
    "threaded-napi": ["host.io=threaded-napi", "host.thread.wake_latency=5us", "host.thread.t_wakeup=1us", "traffic.rate=500kpps"],
    "time series": ["measure.interval=1ms", "traffic.rate=1Mpps"],
}
# Per-class strategies on the two-class scenario.
STRATEGIES = {
    "prio": ["host.strategy.kind=prio"],
    "rr": ["host.strategy.kind=rr"],
    "quota": ["host.strategy.kind=quota", "host.strategy.quota=4"],
    "priowfq": ["host.strategy.kind=priowfq", 'host.strategy.slices=["6us", "1.5us"]'],
    "drr": ["host.strategy.kind=drr", "host.strategy.weights=[3, 1]"],
}


def pktsim(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "pktsim", *args], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"pktsim {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def strip_wall(v):
    """Drop keys whose values depend on the wall clock."""
    if isinstance(v, dict):
        return {k: strip_wall(x) for k, x in v.items() if k != "wall_s"}
    if isinstance(v, list):
        return [strip_wall(x) for x in v]
    return v


def sets(pairs: list[str]) -> list[str]:
    return [a for p in pairs for a in ("--set", p)]


def collect(reproduced: list | None = None) -> dict:
    """Every output golden.json records (`reproduced`: ``reproduce all --json``'s list when
    the caller has it already)."""
    out: dict = {"run": {}, "model": {}}
    files = sorted((ROOT / "examples").glob("*.toml")) + sorted(SCENARIOS.glob("*.toml"))
    for f in files:
        key = str(f.relative_to(ROOT))
        out["run"][key] = strip_wall(json.loads(pktsim("run", str(f), "--json")))
        out["model"][key] = json.loads(pktsim("model", str(f), "--json"))
    base = str(ROOT / "examples" / "linux-router-64B.toml")
    for name, pairs in VARIANTS.items():
        out["run"][f"linux-router-64B: {name}"] = strip_wall(json.loads(pktsim("run", base, *SHORT, *sets(pairs), "--json")))
    rt = str(ROOT / "examples" / "meyer2014-rt.toml")
    for name, pairs in STRATEGIES.items():
        args = ["host.io=server", "cpu.cores=1", "traffic.rate=240kpps", *pairs]
        out["run"][f"meyer2014-rt: {name}"] = strip_wall(json.loads(pktsim("run", rt, *SHORT, *sets(args), "--json")))
    out["reproduce"] = strip_wall(reproduced if reproduced is not None else json.loads(pktsim("reproduce", "all", "--json")))
    out["schema"] = json.loads(pktsim("schema"))
    return out


def differences(a, b, path="") -> list[str]:
    """Paths where two JSON values differ (bit for bit: floats compared exactly)."""
    if type(a) is not type(b):
        return [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'golden' if k in a else 'now'}")
            else:
                out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--update", action="store_true", help="record the current outputs as golden")
    args = ap.parse_args()
    now = collect()
    if args.update:
        GOLDEN.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"wrote {GOLDEN.relative_to(ROOT)}")
        return 0
    diffs = differences(json.loads(GOLDEN.read_text()), now)
    for d in diffs[:200]:
        print(d)
    print(f"{len(diffs)} differences from {GOLDEN.relative_to(ROOT)}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
