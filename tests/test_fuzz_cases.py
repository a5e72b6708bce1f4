"""Fuzz inputs: the values, keys and mutators of the fuzz test (``test_fuzz.py``) and the
cases it runs, built from them by :func:`build_cases` (seeded: ``FUZZ_SEED``); here, that
the cases reach what they should (every mutation, every command, no value left to the
Rust-side overflow checks)."""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

from pktsim import schema_info

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "examples").glob("*.toml")) + sorted((ROOT / "python" / "pktsim" / "scenarios").glob("*.toml"))
SHORT = ["--set", "measure.duration=1ms", "--set", "measure.warmup=0s"]
SEED = int(os.environ.get("FUZZ_SEED", "13"))


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
    '[["64B", 1e308], ["1500B", 1e308]]',
    '[["64B", 1e-308], ["1500B", 1e308]]',
    "3",
    "10.5",
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
    '"on-off"',
    '"mmpp"',
    '"prio"',
    '"rr"',
    # Every I/O mode and moderation policy, as the scenario format names them.
    *(f'"{name}"' for name in schema_info.values("host.io")),
    *(f'"{name}"' for name in schema_info.values("nic.itr.mode")),
    *(f'"{name}"' for name in schema_info.values("traffic.kind")),
    '"trace-small.pcap"',
    '"mlx5-cqe"',
    '"powersave"',
    '"1.2GHz"',
    '"defer"',
    '"fifo"',
    "-20",
    '"l2fwd"',
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
    "traffic.stalls.rate",
    "traffic.stalls.length",
    "traffic.kind",
    "traffic.pcap",
    "traffic.loop",
    "traffic.rate_scale",
    "nodes.0.traffic.kind",
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
    "cpu.idle.governor",
    "cpu.idle.table",
    "cpu.idle.states",
    "cpu.idle.states.0.latency",
    "cpu.idle.states[1].refill",
    "cpu.idle.states[1].refill_time",
    "cpu.idle.latency_limit",
    "cpu.freq.governor",
    "cpu.freq.min",
    "cpu.sched.base_slice",
    "cpu.sched.irq_time_accounting",
    "cpu.sched.hrtick",
    "host.softirq",
    "app.nice",
    "host.thread.policy",
    "host.thread.t_sleep",
    "cpu.idle.guest_halt_poll",
    "cpu.idle.guest_halt_poll_grow",
    "cpu.idle.guest_halt_poll_shrink",
    "host.t_proc_per_byte",
    "host.t_irq_busy",
    "host.t_timer",
    "nic.irq_delay",
    "host.batch.t_wakeup",
    "host.batch.t_empty",
    "host.gro_normal_batch",
    "measure.latency_to",
    "traffic.sources.0.cv",
    "traffic.sources[0].burst",
    "traffic.sources[9].cv",
    "traffic.sources.0.on",
    "traffic.schedule",
    "traffic.schedule.0.rate",
    "traffic.sources.0.peak",
    "socket.busy_poll",
    "host.xdp.t_driver",
    "host.netdev_budget",
    "nic.napi.threaded",
    "host.af_xdp.batch",
    "host.af_xdp.wait",
    "host.af_xdp.role",
    "host.af_xdp.rx_full",
    "host.af_xdp.umem_frames",
    "host.af_xdp.busy_poll",
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
OBSERVATION = b'{"offered_pps": 250000, "received_pps": 250000, "loss_ratio": 0.0, "interfaces": {"eth1": {"mean_frame_bytes": 60}}}'
FIT_DATA = b"traffic.rate,cpu_per_frame,latency_ns.p50\n100kpps,1.5us,10us\n200kpps,1.1us,9.5us\n400kpps,0.8us,8.5us\n"
FIT_FREE = ["host.t_irq", "host.t_irq,host.t_poll", "host.t_poll=0ns:2us", "host.budget", "bogus", "host.t_irq=5us:1us", "traffic.rate", "", "cpu.frequency"]
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


OTHER_COMMANDS = ("schema", "profiles", "plot", "trace-info", "fit", "observe", "examples")


def build_cases(n: int, seed: int, workdir: Path) -> list[dict]:
    """`n` cases: {"argv": [...], "what": description}. Files go into `workdir`."""
    sources = _read_sources()
    names = sorted(sources)
    cases = []
    others = 0
    for i in range(n):
        # Each case its own generator: how many draws a mutation takes depends on the bundled
        # files' text, so one shared generator let an edited comment in an example move every
        # case after it (and with them which commands the cases reach).
        rng = random.Random(f"{seed}-case-{i}")
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
            side = random.Random(f"{seed}-{i}")  # (not drawn from rng: the other cases stay as they were)
            if side.random() < 0.2:
                argv += ["--patience", side.choice(["0", "1", "-1", "x", "1e9"])]
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
            if rng.random() < 0.1:
                f = workdir / f"o{i}.json"
                f.write_bytes(mutate(rng, OBSERVATION)[0])
                argv += ["--from-observed", rng.choice([str(f), str(f), base, "/dev/zero", str(workdir / "none.json")])]
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
            # In turn, so that every one of them is reached whatever the draws.
            c = OTHER_COMMANDS[others % len(OTHER_COMMANDS)]
            others += 1
            if c == "examples":
                argv = ["examples"] + rng.choice([[], ["--copy", str(workdir / f"ex{i}")], ["--copy", "/proc/none"], ["--copy", str(base)]])
            elif c == "observe":
                argv = [
                    "observe",
                    "--iface",
                    rng.choice(["lo", "lo", "nope0", "", "../lo"]),
                    "--duration",
                    rng.choice(["50ms", "60ms", "0s", "x", "-1s", "2h"]),
                ]
                argv += rng.choice(
                    [[], [], ["--interval", rng.choice(["20ms", "50ms", "1s", "x"])], ["--model", rng.choice([base, "/dev/zero", str(workdir)])]]
                )
                if rng.random() < 0.5:
                    argv += ["--json"]
            elif c == "fit":
                f = workdir / f"m{i}.csv"
                f.write_bytes(mutate(rng, FIT_DATA)[0])
                argv = ["fit", base, *SHORT, "--jobs", "1", "--max-runs", "12", "--data", rng.choice([str(f), str(f), str(f), base, "/dev/zero", str(workdir)])]
                argv += ["--free", rng.choice(FIT_FREE)]
                argv += rng.choice([[], [], ["--fit-on", rng.choice(["1", "1,2", "0", "x", "9"])], ["--fit-fraction", rng.choice(["0.5", "0", "2", "nan"])]])
                argv += rng.choice(
                    [[], [], ["--y", rng.choice(["cpu_per_frame", "bogus", ""])], ["-o", rng.choice([str(workdir / f"f{i}.toml"), "/proc/none/f.toml"])]]
                )
                if rng.random() < 0.5:
                    argv += ["--json"]
            elif c == "trace-info":
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


def test_the_mutators_reach_what_they_should(tmp_path):
    """The fuzz test is only as good as its cases: they must reach non-UTF-8 files, every
    command, results and errors."""
    cs = build_cases(1000, SEED, tmp_path)
    whats = " ".join(c["what"] for c in cs)
    for needle in ("byte flips", "x10", "truncated", "\\x", "NUL", "deleted", "duplicated", "swapped", "retyped", "typo", "nan", "inf"):
        assert needle in whats, needle
    cmds = {c["argv"][0] for c in cs}
    assert {"run", "model", "sweep", "compare", "schema", "profiles", "plot", "tune", "trace-info", "fit", "observe", "examples"} <= cmds, cmds
    # No default case carries a value that is the Rust side's to reject.
    for c in cs:
        for a in c["argv"]:
            p = Path(a)
            if p.is_file() and p.parent == tmp_path and p.suffix == ".toml":
                assert not PENDING.search(p.read_bytes().decode("latin-1")), (a, c["what"])
