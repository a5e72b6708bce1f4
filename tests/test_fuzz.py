"""Fuzz: mutated bundled scenarios and mutated command-line values give a result or a clean
error, never a crash.

A seeded mutator (no dependency) takes the bundled scenarios (``examples/*.toml``,
``python/pktsim/scenarios/*.toml``) and mutates them (byte flips, truncation, non-UTF-8 bytes,
NUL bytes, deleted, duplicated or swapped lines, values replaced by zero, negative, NaN,
infinite or wrongly typed ones, unknown keys), then runs ``run``, ``model``, ``sweep`` and
``compare`` on them with a short measurement (``--set measure.duration=1ms --set
measure.warmup=0s``); it also mutates the values of ``--set``, ``sweep --values`` /
``--replications``, ``model --from-measurement`` and the arguments of ``schema``,
``profiles`` and ``plot``. Every case must end in:

* exit 0 with something on stdout, or
* exit 1 or 2 with a message on stderr,

and never exit 70, a Python traceback, a Rust panic or a hang past the per-case timeout.

The cases run in-process (the command's ``main(argv)`` with stdout and stderr captured) in
two long-lived worker processes, so that a case that hangs or kills its interpreter is
caught by the parent and named, without starting an interpreter per case; a sample also
runs as separate ``python -m pktsim`` processes, as a user runs them.

Values whose products would overflow the engine's time arithmetic (huge exponents, long
digit strings, tiny rates, huge core counts) have a test of their own,
``test_rust_overflow_cases``: each must be rejected at load naming the key, or run.

    FUZZ_CASES=20000 pytest tests/test_fuzz.py     # more cases (default 3000)
    FUZZ_SEED=7 pytest tests/test_fuzz.py          # other cases
"""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
import time

import pytest
from test_fuzz_cases import _ASSIGN, ROOT, SEED, SHORT, _lines, _read_sources, build_cases

CASES = int(os.environ.get("FUZZ_CASES", "3000"))
TIMEOUT_S = float(os.environ.get("FUZZ_TIMEOUT", "20"))
WORKERS = 2
PROCESS_SAMPLE = 12


# ---------------------------------------------------------------------------------------- running


WORKER = r"""
import io, json, sys
from contextlib import redirect_stderr, redirect_stdout
from pktsim import cli
for line in sys.stdin:
    argv = json.loads(line)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = cli.main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        except BaseException as e:
            import traceback
            err.write("Traceback (escaped main): " + traceback.format_exc())
            rc = 99
    sys.__stdout__.write(json.dumps({"rc": rc, "out": out.getvalue()[:2000], "err": err.getvalue()[-4000:]}) + "\n")
    sys.__stdout__.flush()
"""


class Worker:
    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )

    def run(self, argv: list[str], timeout: float) -> dict:
        self.proc.stdin.write(json.dumps(argv) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.kill()
            return {"rc": None, "out": "", "err": f"no answer within {timeout:.0f} s (a hang)"}
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            return {"rc": None, "out": "", "err": f"the interpreter died (exit {code})"}
        return json.loads(line)

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()


def problem(res: dict) -> str | None:
    """What is wrong with a case's outcome, or None."""
    rc, out, err = res["rc"], res["out"], res["err"]
    if rc is None:
        return err
    if "Traceback" in err:
        return "a Python traceback"
    if "panicked" in err or "PanicException" in err:
        return "a Rust panic"
    if rc == 0:
        return None if out.strip() or "-o" in res.get("argv", ()) else "exit 0 with nothing on stdout"
    if rc in (1, 2):
        return None if err.strip() else f"exit {rc} with nothing on stderr"
    return f"exit {rc}"


def run_cases(cases: list[dict], timeout: float = TIMEOUT_S, tally=None) -> list[tuple[dict, dict, str]]:
    """Run the cases on WORKERS worker processes; returns (case, result, problem) for each
    failure. ``tally`` (a Counter) counts (command, exit code) pairs."""
    import threading

    failures = []
    lock = threading.Lock()
    queue = list(enumerate(cases))

    def drive():
        w = Worker()
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    _, case = queue.pop()
                res = w.run(case["argv"], timeout)
                p = problem({**res, "argv": case["argv"]})
                if tally is not None:
                    with lock:
                        tally[(case["argv"][0], res["rc"])] += 1
                if p:
                    with lock:
                        failures.append((case, res, p))
                if res["rc"] is None:
                    w = Worker()
        finally:
            w.close()

    threads = [threading.Thread(target=drive) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


def describe(failures) -> str:
    lines = [f"{len(failures)} fuzz case(s) failed:"]
    for case, res, p in failures[:15]:
        lines.append(f"  - {p}: pktsim {' '.join(case['argv'])}  [{case['what']}]\n      exit {res['rc']}: {res['err'].strip()[-600:]}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    from conftest import built_once

    built_once(tmp_path_factory, "fuzz-cases")
    return build_cases(CASES, SEED, tmp_path_factory.mktemp("fuzz"))


def test_fuzz_cases_give_a_result_or_a_clean_error(cases):
    from collections import Counter

    tally: Counter = Counter()
    t0 = time.monotonic()
    failures = run_cases(cases, tally=tally)
    elapsed = time.monotonic() - t0
    print(f"\n{len(cases)} fuzz cases in {elapsed:.1f} s; (command, exit): " + ", ".join(f"{c} {rc}: {n}" for (c, rc), n in sorted(tally.items(), key=str)))
    assert not failures, describe(failures)
    # Results and errors both: a mutator that broke every case would test nothing.
    for cmd in ("run", "model", "sweep", "tune"):
        assert tally[(cmd, 0)] > 0 and tally[(cmd, 2)] > 0, (cmd, tally)


def test_a_sample_runs_the_same_as_separate_processes(cases):
    rng = random.Random(SEED + 1)
    sample = rng.sample(cases, PROCESS_SAMPLE)
    for case in sample:
        try:
            proc = subprocess.run([sys.executable, "-m", "pktsim", *case["argv"]], capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S * 3)
        except subprocess.TimeoutExpired:
            pytest.fail(f"pktsim {' '.join(case['argv'])} [{case['what']}]: no answer within {TIMEOUT_S * 3:.0f} s")
        res = {"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr, "argv": case["argv"]}
        p = problem(res)
        assert p is None, describe([(case, res, p)])
        w = Worker()
        try:
            again = w.run(case["argv"], TIMEOUT_S)
        finally:
            w.close()
        assert again["rc"] == proc.returncode, (case, again, res)


def test_the_checker_catches_what_it_must():
    assert problem({"rc": 70, "out": "", "err": "pktsim: internal error: X"})
    assert problem({"rc": 2, "out": "", "err": "Traceback (most recent call last):"})
    assert problem({"rc": 2, "out": "", "err": "thread '<unnamed>' panicked at src/x.rs"})
    assert problem({"rc": 2, "out": "", "err": ""})
    assert problem({"rc": 0, "out": "", "err": ""})
    assert problem({"rc": None, "out": "", "err": "no answer"})
    assert problem({"rc": 0, "out": "x", "err": ""}) is None
    assert problem({"rc": 2, "out": "", "err": "pktsim: error: x"}) is None
    w = Worker()
    try:
        t0 = time.monotonic()
        # A case that hangs is caught and named, and the worker replaced.
        res = w.run(["run", str(ROOT / "examples" / "linux-router-64B.toml"), "--set", "measure.duration=1000s", "--allow-large"], 2)
        assert res["rc"] is None and "hang" in res["err"] and time.monotonic() - t0 < 10
    finally:
        w.close()


# ---------------------------------------------------------------------------------------- pending

# Values whose products would leave the engine's integer picoseconds: the scenario's range
# checks (crates/pktsim-core/src/scenario/limits.rs) must refuse them naming the key.
RUST_OVERFLOW_CASES = [
    ["run", "examples/linux-router-64B.toml", "--set", "cost.cycles.other=1e17cycles"],
    ["model", "examples/linux-router-64B.toml", "--set", "cost.cycles.other=1e17cycles"],
    ["run", "examples/linux-router-64B.toml", "--set", "traffic.rate=1e-8pps"],
    ["run", "examples/linux-router-64B.toml", "--set", "link.overhead=1e300B"],
    ["run", "examples/meyer2014-rt.toml", "--set", "host.t_proc_per_byte=1e12ns/B"],
    ["run", "examples/meyer2014-rt.toml", "--set", "measure.t_plus.t_dma=9000000s"],
    ["run", "examples/linux-router-64B.toml", "--set", "measure.warmup=9000000s", "--set", "measure.duration=9000000s"],
    ["run", "examples/linux-router-64B.toml", "--set", "link.rate=1e30Gbit/s"],
    ["run", "examples/linux-router-64B.toml", "--set", "cpu.cores=4096", "--set", 'nic.queues=["a", "b", "c", "d"]'],
    ["run", "examples/linux-router-64B.toml", "--set", "cpu.cores=9223372036854775807"],
    ["run", "examples/linux-router-64B.toml", "--set", "nic.rx_ring=18446744073709551615"],
    ["run", "examples/linux-router-64B.toml", "--set", "cpu.interference.rate=1e-300Hz", "--set", 'cpu.interference.t_preempt=["9000000s"]'],
    ["run", "examples/linux-router-64B.toml", "--set", "cpu.interference.tick_period=1us", "--set", 'cpu.interference.t_tick=["999ns"]'],
]
PENDING_VALUES = [
    "1e17cycles",
    "1e300B",
    "1e-8pps",
    "1e12ns/B",
    "9000000s",
    "1e30Gbit/s",
    "4096",
    "9223372036854775807",
    "18446744073709551616",
    "1e308",
    "-1e308",
    "1e-300",
]


def test_rust_overflow_cases(tmp_path):
    """The explicit cases above, then mutated scenarios with huge, tiny and long values in any
    key: each must be rejected naming the key (exit 2) or run within the timeout."""
    failures = run_cases([{"argv": [*a, *SHORT], "what": "overflow"} for a in RUST_OVERFLOW_CASES], timeout=10)
    rng = random.Random(SEED)
    sources = _read_sources()
    cases = []
    for i in range(300):
        name = rng.choice(sorted(sources))
        ls = _lines(sources[name])
        idx = [j for j, line in enumerate(ls) if _ASSIGN.match(line)]
        j = rng.choice(idx)
        m = _ASSIGN.match(ls[j])
        v = rng.choice(PENDING_VALUES)
        ls[j] = m.group(1) + (f'"{v}"' if rng.random() < 0.7 else v).encode() + m.group(3)
        f = tmp_path / f"o{i}-{name}"
        f.write_bytes(b"\n".join(ls))
        cases.append({"argv": [rng.choice(["run", "model"]), str(f), *SHORT], "what": f"line {j + 1} = {v}"})
    failures += run_cases(cases, timeout=10)
    assert not failures, describe(failures)
