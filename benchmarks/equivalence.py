"""Equivalence runs: does a change to the engine leave every figure as it was, bit for bit?

Every example and bundled scenario runs under a set of variants (I/O modes, exponential
service, several cores, low load, Poisson arrivals, small rings), 30 ms each; each run's
whole result (wall times left out) is saved as JSON. Save the results of the installed
extension before a change and after it, then compare:

    .venv/bin/python benchmarks/equivalence.py run /tmp/before.json
    # ... change the engine, rebuild: VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release
    .venv/bin/python benchmarks/equivalence.py run /tmp/after.json
    .venv/bin/python benchmarks/equivalence.py compare /tmp/before.json /tmp/after.json

`compare` prints the runs that differ (with the keys that differ) and exits 1 if any do;
`--except events` leaves a key out (a change that only saves events, say).
A variant a scenario does not accept (an XDP program under another I/O mode, ...) is saved
as its error text, so that an error that appears or goes away counts as a difference too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from golden import strip_wall  # noqa: E402  (the golden outputs drop the same wall times)

SHORT = {"measure.duration": "30ms", "measure.warmup": "1ms"}

VARIANTS: list[dict[str, str]] = [
    {},
    {"host.service": "exponential"},
    {"host.io": "server"},
    {"host.io": "server", "host.service": "exponential"},
    {"host.io": "busy-poll"},
    {"host.io": "busy-poll", "host.service": "exponential", "cpu.cores": "2"},
    {"cpu.cores": "2", "traffic.flows": "64"},
    {"cpu.cores": "4", "traffic.flows": "64", "host.service": "exponential"},
    {"traffic.rate": "0.1Mpps"},
    {"traffic.rate": "0.1Mpps", "host.service": "exponential"},
    {"traffic.pattern": "poisson"},
    {"traffic.pattern": "poisson", "host.io": "server", "nic.rx_ring": "64"},
    {"nic.rx_ring": "32", "traffic.pattern": "poisson", "host.service": "exponential"},
]


def scenario_files() -> list[Path]:
    return sorted((ROOT / "examples").glob("*.toml")) + sorted((ROOT / "python/pktsim/scenarios").glob("*.toml"))


def run_all(out: Path) -> None:
    from pktsim.errors import ScenarioError
    from pktsim.sim import run_file

    if not out.parent.is_dir():
        raise SystemExit(f"{out}: expected a file in an existing directory")
    results = {}
    for path in scenario_files():
        for variant in VARIANTS:
            key = f"{path.relative_to(ROOT)} {json.dumps(variant, sort_keys=True)}"
            try:
                results[key] = strip_wall(dict(run_file(path, {**SHORT, **variant})))
            except ScenarioError as e:
                results[key] = "error: " + str(e).splitlines()[0]
    # Whole or not at all: written beside the target, then renamed over it.
    part = out.with_name(out.name + ".part")
    try:
        part.write_text(json.dumps(results, sort_keys=True))
        part.replace(out)
    except OSError as e:
        part.unlink(missing_ok=True)
        raise SystemExit(f"{out}: could not write the results ({e})") from None
    ran = sum(1 for v in results.values() if isinstance(v, dict))
    print(f"{len(results)} cases, {ran} ran (the rest are variants the scenario does not accept): {out}")


def differing_keys(a, b, prefix=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from differing_keys(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else k)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differing_keys(x, y, f"{prefix}[{i}]")
    elif a != b:
        yield prefix or "(the whole result)"


def load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"{path}: expected a results file written by `equivalence.py run` ({e})") from None
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: expected a results file written by `equivalence.py run` (a JSON object)")
    return data


def compare(a_path: Path, b_path: Path, leave_out: frozenset[str] = frozenset()) -> int:
    a, b = load(a_path), load(b_path)
    differ = 0
    for key in sorted(set(a) | set(b)):
        keys = [k for k in differing_keys(a.get(key), b.get(key)) if k.split(".")[-1] not in leave_out]
        if keys:
            differ += 1
            print(f"differs: {key}: {', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''}")
    ran = sum(1 for v in a.values() if isinstance(v, dict))
    print(f"{len(a)} cases ({ran} ran), {differ} differ")
    return 1 if differ else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run every case with the installed extension and save the results")
    r.add_argument("out", type=Path)
    c = sub.add_parser("compare", help="compare two saved result files")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument(
        "--except", dest="leave_out", action="append", default=[], metavar="KEY", help="leave this key out of the comparison (repeatable), e.g. events"
    )
    args = ap.parse_args(argv)
    try:
        if args.cmd == "run":
            run_all(args.out)
            return 0
        return compare(args.a, args.b, frozenset(args.leave_out))
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return 2
        raise
    except KeyboardInterrupt:
        print("interrupted: no results written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
