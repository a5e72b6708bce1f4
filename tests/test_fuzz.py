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
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "examples").glob("*.toml")) + sorted((ROOT / "python" / "pktsim" / "scenarios").glob("*.toml"))
SHORT = ["--set", "measure.duration=1ms", "--set", "measure.warmup=0s"]
CASES = int(os.environ.get("FUZZ_CASES", "3000"))
SEED = int(os.environ.get("FUZZ_SEED", "13"))
TIMEOUT_S = float(os.environ.get("FUZZ_TIMEOUT", "20"))
WORKERS = 2
PROCESS_SAMPLE = 12

# Values a key may be replaced with (as TOML). Each is bad for most keys, or unusual.
VALUES = [
    "0",
    "-1",
    "-0.5",
    "1.5",
    "7",
    "nan",
    "-nan",
    "inf",
    "-inf",
    "true",
    "false",
    "[]",
    "{}",
    "[1, 2]",
    '["64B", 7]',
    '[["64B", -1]]',
    '[["64B", 0]]',
    '""',
    '"abc"',
    '"0"',
    '"-1"',
    '"64"',
    '"0ns"',
    '"-1ns"',
    '"nan"',
    '"NaNpps"',
    '"infGHz"',
    '"inf%"',
    '"-5Mpps"',
    '"0pps"',
    '"0B"',
    '"-64B"',
    '"0cycles"',
    '"-3cycles"',
    '"150%"',
    '"-10%"',
    '"1e400"',
    '"imix"',
    '"poisson"',
    '"burst"',
    '"prio"',
    '"rr"',
    '"napi"',
    '"server"',
    '"busy-poll"',
    '"xdp"',
    '"af-xdp"',
    '"threaded-napi"',
    '"batched-syscall"',
    '"static"',
    '"dim"',
    '"off"',
    '"dynamic"',
    '"mlx5-cqe"',
    '"1.5Mpps"',
    '"10Gbit/s"',
    '"3.3GHz"',
    '"64B"',
    '"1us"',
    '"2ms"',
    '"1500B"',
    '"0.5"',
    '"1 Mpps"',
    '"1Mpps "',
    '"Mpps"',
    '"5GHz/s"',
    '"1,5Mpps"',
    "1e400",
    "0x10",
    "0o17",
    "1_000",
    "2026-01-01",
    '"\\u00e9"',
]
NON_UTF8 = [b"\xff", b"\xfe", b"\xc3", b"\xe9", b"\x80\x80", b"\xf0\x28\x8c\x28", b"\xed\xa0\x80", b"\xc0\xaf"]
UNKNOWN_KEYS = ['colour = "red"', 'rate2 = "1Mpps"', "Cores = 2", 'frequncy = "3GHz"', '"" = 1', "a.b.c = 1"]

# Keys of the scenario format that --set reaches (and a few that do not exist).
SET_KEYS = [
    "seed",
    "name",
    "cpu.frequency",
    "cpu.cores",
    "cpu.contention",
    "cpu.caches.l3",
    "link.rate",
    "link.overhead",
    "traffic.rate",
    "traffic.pattern",
    "traffic.size",
    "traffic.flows",
    "cost.profile",
    "cost.cycles.RX",
    "cost.per_byte.TX",
    "cost.buffers.recycling",
    "fib.routes",
    "fib.misses_per_lookup",
    "nic.rx_ring",
    "nic.tx_ring",
    "nic.itr.mode",
    "nic.itr.interval",
    "nic.itr.rx_usecs",
    "nic.itr.profile",
    "nic.itr.bulk_rate",
    "nodes.0.nic.itr.mode",
    "nic.queues",
    "nic.tx_vector",
    "host.io",
    "host.t_irq",
    "host.t_proc",
    "host.weight",
    "host.budget",
    "host.strategy.kind",
    "host.strategy.slices",
    "host.batch.size",
    "host.thread.wake_latency",
    "nic.napi.defer_hard_irqs",
    "nic.napi.gro_flush_timeout",
    "measure.latency_from",
    "measure.interval",
    "measure.batches",
    "cpu.interference.tick_period",
    "cpu.interference.t_tick",
    "cpu.interference.rate",
    "cpu.interference.t_preempt",
    "host.t_proc_per_byte",
    "host.batch.t_wakeup",
    "host.batch.t_empty",
    "host.gro_normal_batch",
    "measure.latency_to",
    "traffic.sources.0.cv",
    "traffic.sources[0].burst",
    "traffic.sources[9].cv",
    "socket.busy_poll",
    "host.xdp.t_driver",
    "host.netdev_budget",
    "nic.napi.threaded",
    "host.af_xdp.batch",
    "nodes.0.host.io",
    "nodes[1].host.t_irq",
    "nodes",
    "traffic.colour",
    "cpu",
    "",
    ".",
    "traffic..rate",
    "traffic.rate.x",
    "sweep",
]
SWEEP_KEYS = ["traffic.rate", "seed", "cpu.cores", "traffic.pattern", "host.strategy.kind", "nic.rx_ring", "host.t_proc", "bogus.key", "cpu"]
SWEEP_VALUES = [
    "0.5Mpps,1Mpps",
    "1Mpps,1Mpps",
    "5,6,7",
    "1:3:1",
    "0.5Mpps:1.5Mpps:0.5Mpps",
    "1us:3us:1us",
    "cbr,poisson",
    "sq,prio,nope",
    "0:inf:1",
    "0:nan:1",
    "1:2",
    "::",
    "a:b:c",
    "1Mpps:2GHz:1Mpps",
    "5:1:1",
    "1:2:0",
    "1:2:-1",
    "",
    ",",
    "1,,2",
    "0,-1",
    "1e400,1",
    "nan",
    "inf",
    "-5Mpps",
    "0",
    "64B:128B:64B",
    "10%:30%:10%",
    "1:100000000:1",
    " 1 , 2 ",
    "1Mpps:1Mpps:1Mpps",
]
MEASURE = {
    "--rate": ["1.67Mpps", "0", "0pps", "-1Mpps", "nan", "infpps", "1.67", "abc", "1e400pps", ""],
    "--cpu-load": ["100%", "75%", "0%", "150%", "-5%", "nan", "nan%", "inf%", "1", "x"],
    "--freq": ["3.3GHz", "0GHz", "-1GHz", "nanGHz", "infGHz", "3.3", "3.3Mpps", ""],
    "--active-cycles": ["3.1e9", "0", "-5e9", "nan", "inf", "-inf", "x", "1e400"],
}

# Text the default cases leave to the Rust-side overflow checks (issue 13, item 5).
PENDING = re.compile(r"[0-9.][eE]\+?[0-9]{2,}|[0-9.][eE]-[0-9]|[0-9]{10,}")


def _read_sources() -> dict[str, bytes]:
    return {p.name if p.parent.name == "examples" else f"scenarios-{p.name}": p.read_bytes() for p in SOURCES}


# ---------------------------------------------------------------------------------------- mutators


def _lines(b: bytes) -> list[bytes]:
    return b.split(b"\n")


def m_flip(rng, b):
    b = bytearray(b)
    for _ in range(rng.randint(1, 4)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b), "byte flips"


def m_truncate(rng, b):
    n = rng.randrange(len(b))
    return b[:n], f"truncated at {n}"


def m_non_utf8(rng, b):
    i = rng.randrange(len(b))
    bad = rng.choice(NON_UTF8)
    return b[:i] + bad + b[i:], f"{bad!r} at {i}"


def m_nul(rng, b):
    i = rng.randrange(len(b))
    return b[:i] + b"\x00" + b[i:], f"NUL at {i}"


def m_delete_line(rng, b):
    ls = _lines(b)
    i = rng.randrange(len(ls))
    return b"\n".join(ls[:i] + ls[i + 1 :]), f"line {i + 1} deleted"


def m_duplicate_line(rng, b):
    ls = _lines(b)
    i = rng.randrange(len(ls))
    return b"\n".join(ls[: i + 1] + ls[i:]), f"line {i + 1} duplicated"


def m_swap_lines(rng, b):
    ls = _lines(b)
    i, j = rng.randrange(len(ls)), rng.randrange(len(ls))
    ls[i], ls[j] = ls[j], ls[i]
    return b"\n".join(ls), f"lines {i + 1} and {j + 1} swapped"


_ASSIGN = re.compile(rb"^(\s*[A-Za-z0-9_.\"-]+\s*=\s*)(.*?)(\s*(#.*)?)$")


def m_value(rng, b):
    ls = _lines(b)
    idx = [i for i, line in enumerate(ls) if _ASSIGN.match(line)]
    if not idx:
        return m_flip(rng, b)
    i = rng.choice(idx)
    v = rng.choice(VALUES)
    m = _ASSIGN.match(ls[i])
    ls[i] = m.group(1) + v.encode() + m.group(3)
    return b"\n".join(ls), f"line {i + 1} = {v}"


def m_retype(rng, b):
    """A quoted value loses its quotes, or a bare one gains them."""
    ls = _lines(b)
    idx = [i for i, line in enumerate(ls) if _ASSIGN.match(line)]
    if not idx:
        return m_flip(rng, b)
    i = rng.choice(idx)
    m = _ASSIGN.match(ls[i])
    v = m.group(2)
    v = v[1:-1] if v.startswith(b'"') and v.endswith(b'"') and len(v) >= 2 else b'"' + v + b'"'
    ls[i] = m.group(1) + v + m.group(3)
    return b"\n".join(ls), f"line {i + 1} retyped to {v!r}"


def m_unknown_key(rng, b):
    ls = _lines(b)
    heads = [i for i, line in enumerate(ls) if line.startswith(b"[")] or [0]
    i = rng.choice(heads)
    k = rng.choice(UNKNOWN_KEYS)
    return b"\n".join(ls[: i + 1] + [k.encode()] + ls[i + 1 :]), f"{k} after line {i + 1}"


def m_typo_key(rng, b):
    ls = _lines(b)
    idx = [i for i, line in enumerate(ls) if _ASSIGN.match(line) and not line.lstrip().startswith(b"#")]
    if not idx:
        return m_flip(rng, b)
    i = rng.choice(idx)
    key_end = ls[i].index(b"=")
    key = ls[i][:key_end].rstrip()
    j = rng.randrange(len(key.strip()) or 1)
    ls[i] = key[:j] + key[j + 1 :] + ls[i][len(key) :]
    return b"\n".join(ls), f"line {i + 1}: key typo"


_NUMBER = re.compile(rb"(?<![0-9A-Za-z_.])([0-9]+(?:\.[0-9]+)?)(?=[A-Za-z%/]*\"?\s*(?:#|$|,|\]))")


def m_scale(rng, b):
    """A number scaled (x0.5, x2, x0.1, x10, x0, x-1), its unit kept: mostly valid values."""
    ls = _lines(b)
    idx = [i for i, line in enumerate(ls) if _ASSIGN.match(line) and _NUMBER.search(line.split(b"#")[0])]
    if not idx:
        return m_flip(rng, b)
    i = rng.choice(idx)
    code, sep, comment = ls[i].partition(b"#")
    nums = list(_NUMBER.finditer(code))
    m = rng.choice(nums)
    f = rng.choice((0.5, 2, 0.1, 10, 0, -1, 3))
    v = float(m.group(1)) * f
    text = (f"{v:.6f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))).encode()
    ls[i] = code[: m.start(1)] + text + code[m.end(1) :] + sep + comment
    return b"\n".join(ls), f"line {i + 1}: x{f}"


MUTATORS = [m_flip, m_truncate, m_non_utf8, m_nul, m_delete_line, m_duplicate_line, m_swap_lines, m_value, m_value, m_retype, m_unknown_key, m_typo_key]
# Mild mutations keep most files valid, so that the engine runs on unusual values too.
MILD = [m_scale, m_scale, m_delete_line, m_swap_lines]


def mutate(rng, data: bytes) -> tuple[bytes, str]:
    """One to three mutations; redrawn while the text is the Rust side's to reject (PENDING)."""
    for _ in range(50):
        b, what = data, []
        pool = MILD if rng.random() < 0.6 else MUTATORS
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            if not b:
                break
            b, w = rng.choice(pool)(rng, b)
            what.append(w)
        if not PENDING.search(b.decode("latin-1")):
            return b, "; ".join(what)
    return data, "unchanged"


# ---------------------------------------------------------------------------------------- cases


def _sweep_values(rng) -> str:
    from pktsim.values import expand_values

    for _ in range(20):
        v = rng.choice(SWEEP_VALUES)
        try:
            if len(expand_values(v)) > 4:
                continue
        except ValueError:
            pass
        return v
    return "1,2"


def _set_value(rng) -> str:
    v = rng.choice(VALUES)
    return v[1:-1] if v.startswith('"') and rng.random() < 0.6 else v


# The bundled trace, for trace-info to read as it is and mutated.
TRACE_FILE = ROOT / "examples" / "trace-small.pcap"
TRACE = TRACE_FILE.read_bytes()
TUNE_METRICS = ["cpu", "cpu", "cpu", "cpu", "p99", "latency_ns.p50", "throughput", "loss_ratio", "nonsense", "", "cpu_per_core", "latency_ns"]
TUNE_CONSTRAINTS = [
    "p99 <= 50us",
    "loss <= 1e-4",
    "p99 <= x",
    "p99",
    ">= 5",
    "cpu_cores < 0.5",
    "latency_ns.p99 <= -1us",
    "throughput_pps >= 1Mpps",
    "p99 <= nan",
]
TUNE_KNOBS = [
    "nic.itr",
    "nic.napi",
    "nic.itr.interval=2us:20us",
    "nic.rx_ring=64,3",
    "bogus",
    "host.budget",
    "socket.busy_poll",
    "nic.rx_ring,nic.tx_ring",
    "cpu.cores=1,2",
    "nic.itr.interval=",
]


def build_cases(n: int, seed: int, workdir: Path) -> list[dict]:
    """`n` cases: {"argv": [...], "what": description}. Files go into `workdir`."""
    rng = random.Random(seed)
    sources = _read_sources()
    names = sorted(sources)
    cases = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.72:  # a mutated scenario through one command
            name = rng.choice(names)
            data, what = mutate(rng, sources[name])
            f = workdir / f"c{i}-{name}"
            f.write_bytes(data)
            cmd = rng.choices(["run", "model", "model-json", "sweep", "compare"], weights=[40, 30, 10, 12, 8])[0]
            if cmd == "run":
                argv = ["run", str(f), *SHORT] + (["--json"] if rng.random() < 0.5 else [])
            elif cmd.startswith("model"):
                argv = ["model", str(f)] + (["--json"] if cmd == "model-json" else [])
            elif cmd == "sweep":
                argv = ["sweep", str(f), *SHORT, "--jobs", "1", "--param", "traffic.rate", "--values", "30%,60%"] + (["--json"] if rng.random() < 0.5 else [])
            else:
                other = workdir / f"c{i}-b-{name}"
                other.write_bytes(sources[rng.choice(names)])
                argv = ["compare", str(other), str(f), *SHORT]
            cases.append({"argv": argv, "what": f"{name}: {what}"})
            continue
        name = rng.choice(names)
        base = str(SOURCES[names.index(name)])
        if kind < 0.84:  # --set values
            sets = []
            for _ in range(rng.randint(1, 3)):
                sets += ["--set", f"{rng.choice(SET_KEYS)}={_set_value(rng)}"]
            if rng.random() < 0.1:
                sets += ["--set", rng.choice(["norate", "=1", "traffic.rate", "traffic.rate=="])]
            cmd = rng.choice(["run", "model"])
            argv = [cmd, base, *sets] + (SHORT if cmd == "run" else []) + (["--json"] if rng.random() < 0.5 else [])
        elif kind < 0.90:  # sweep options
            argv = ["sweep", base, *SHORT, "--jobs", "1"]
            for _ in range(rng.choice((1, 1, 2))):
                argv += ["--param", rng.choice(SWEEP_KEYS), "--values", _sweep_values(rng)]
            if rng.random() < 0.3:
                argv += ["--replications", rng.choice(["0", "-1", "1", "2", "x", "1.5"])]
            if rng.random() < 0.2:
                argv += [
                    "-o",
                    rng.choice(
                        [str(workdir / f"s{i}.csv"), str(workdir / f"s{i}.parquet"), str(workdir / f"s{i}.txt"), str(workdir), "/proc/none/s.csv", "/dev/full"]
                    ),
                ]
            if rng.random() < 0.3:
                argv += ["--json"]
        elif kind < 0.94:  # tune options
            argv = ["tune", base, *SHORT, "--jobs", "1", "--budget", rng.choice(["3", "3", "3", "3", "3", "0", "-2", "x"])]
            for _ in range(rng.choice((0, 1, 1, 1, 1, 2))):
                argv += [rng.choice(["--minimize", "--maximize"]), rng.choice(TUNE_METRICS)]
            for _ in range(rng.choice((0, 1, 2))):
                argv += ["--subject-to", rng.choice(TUNE_CONSTRAINTS)]
            if rng.random() < 0.7:
                argv += ["--knobs", rng.choice(TUNE_KNOBS)]
            if rng.random() < 0.5:
                argv += rng.choice(
                    [
                        ["--load", rng.choice(["300kpps", "1Mpps", "0pps", "fast", "-1Mpps", "1e400pps"])],
                        ["--load-range", rng.choice(["100kpps:300kpps", "1Mpps:1kpps", "1Mpps", ":"]), "--loads", rng.choice(["2", "1", "x"])],
                    ]
                )
            if rng.random() < 0.3:
                argv += ["--replications", rng.choice(["1", "0", "x"])]
            if rng.random() < 0.15:
                argv += ["-o", rng.choice([str(workdir / f"t{i}"), "/proc/none/t", "/dev/full"])]
            if rng.random() < 0.5:
                argv += ["--json"]
        elif kind < 0.98:  # model --from-measurement
            argv = ["model", "--from-measurement"]
            for opt, vals in MEASURE.items():
                if rng.random() < 0.8:
                    argv += [opt, rng.choice(vals)]
            if rng.random() < 0.2:
                argv.insert(1, base)
            if rng.random() < 0.5:
                argv += ["--json"]
        else:  # schema, profiles, plot
            c = rng.choice(["schema", "profiles", "plot", "trace-info"])
            if c == "trace-info":
                f = workdir / f"t{i}.pcap"
                f.write_bytes(mutate(rng, TRACE)[0])
                argv = ["trace-info", rng.choice([str(f), str(f), str(TRACE_FILE), base, "/dev/zero", str(workdir / "none.pcap")])] + (
                    ["--json"] if rng.random() < 0.5 else []
                )
            elif c == "schema":
                argv = ["schema"] + rng.choice([[], ["--profile"], ["-o", str(workdir / f"x{i}.json")], ["-o", "/proc/none/x.json"], ["-o", str(workdir)]])
            elif c == "profiles":
                argv = ["profiles"] + rng.choice([[], ["raumer2015-64B"], ["nope"], [""], ["../etc/passwd"]])
            else:
                f = workdir / f"p{i}.csv"
                f.write_bytes(mutate(rng, b"traffic.rate,throughput_pps,status\n1Mpps,1000000,ok\n")[0])
                argv = [
                    "plot",
                    rng.choice([str(f), base, "/dev/zero", str(workdir / "none.csv")]),
                    "-o",
                    rng.choice([str(workdir / f"plots{i}"), "/proc/none"]),
                ]
        cases.append({"argv": argv, "what": "options"})
    return cases


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


def test_the_mutators_reach_what_they_should(tmp_path):
    """The fuzz test is only as good as its cases: they must reach non-UTF-8 files, every
    command, results and errors."""
    cs = build_cases(1000, SEED, tmp_path)
    whats = " ".join(c["what"] for c in cs)
    for needle in ("byte flips", "x10", "truncated", "\\x", "NUL", "deleted", "duplicated", "swapped", "retyped", "typo", "nan", "inf"):
        assert needle in whats, needle
    cmds = {c["argv"][0] for c in cs}
    assert {"run", "model", "sweep", "compare", "schema", "profiles", "plot", "tune", "trace-info"} <= cmds, cmds
    # No default case carries a value that is the Rust side's to reject.
    for c in cs:
        for a in c["argv"]:
            p = Path(a)
            if p.is_file() and p.parent == tmp_path and p.suffix == ".toml":
                assert not PENDING.search(p.read_bytes().decode("latin-1")), (a, c["what"])


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
        res = w.run(["run", str(ROOT / "examples" / "linux-router-64B.toml"), "--set", "measure.duration=1000s"], 2)
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
