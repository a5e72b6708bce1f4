"""The command line's parser and the options that name what a command writes."""

from __future__ import annotations

import argparse
import functools

# argparse translates each of its words (a group's title, each option's help for -h) through
# gettext, which looks for a catalogue on disk at every call (two stat() calls each on a C
# locale, more on others): 60% of building the parser. A message's translation does not
# change while the process runs, so argparse's lookups are kept (the same catalogue, looked
# for once a message).
if not hasattr(argparse._, "cache_info"):
    argparse._ = functools.lru_cache(maxsize=None)(argparse._)


class Parser(argparse.ArgumentParser):
    """argparse's parser with its errors in one line (the command's usage, not the whole
    of it) and a hint where a value starting with "-" was taken for an option."""

    def error(self, message: str):
        hint = ""
        if "expected one argument" in message:
            hint = "; a value that starts with '-' is written --option=VALUE (e.g. --values=-1,2)"
        self.exit(2, f"{self.prog}: error: {message}{hint} (see {self.prog} --help)\n")


class _Stub:
    """What a subcommand's parser gives back when the run names another command: it takes
    every call (an option, a group, its own subcommands) and keeps nothing."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self


class OnlySubcommand:
    """The subcommands' action, building in full only the command a run names (``only``;
    None: every one). Each other command still gets its parser, with its name and help (the
    listing, and argparse's check of the name), but no options: argparse spends about 13 ms
    an invocation on the ~180 options of all of them (a help formatter and a gettext lookup
    each), which every run of ``pktsim`` paid."""

    def __init__(self, action, only: str | None):
        self.action, self.only = action, only

    def add_parser(self, name: str, **kwargs):
        parser = self.action.add_parser(name, **kwargs)
        if self.only is None or name == self.only:
            return parser
        for method in ("add_argument", "add_argument_group", "add_mutually_exclusive_group", "add_subparsers", "set_defaults"):
            setattr(parser, method, _Stub())
        return parser


def command_of(argv: list[str]) -> str:
    """The subcommand a command line names (the first word that is not an option: the
    top level has no option that takes a value), or "" if none."""
    return next((a for a in argv if not a.startswith("-")), "")


def _figure_args(p) -> None:
    p.add_argument("--format", choices=("png", "svg", "pdf"), default="png", help="figure file format (default png)")
    p.add_argument("--dpi", type=int, default=300, metavar="N", help="resolution of PNG figures (default 300)")
    p.add_argument("--size", default="3.5x2.6", metavar="WxH", help="panel size in inches (default 3.5x2.6, a paper column)")


def _measurement_args(p: argparse.ArgumentParser, freq_help: str) -> None:
    """The measurement behind 000 Eq. 3: rate, CPU load or active cycles, clock."""
    p.add_argument("--rate", metavar="RATE", help="measured forwarding rate, e.g. 1.67Mpps")
    p.add_argument("--cpu-load", metavar="LOAD", help="measured CPU load of the core, e.g. 100%%")
    p.add_argument("--active-cycles", metavar="N", help="measured active cycles per second (instead of --cpu-load)")
    p.add_argument("--freq", metavar="FREQ", help=freq_help)


# Each option that names something a command writes (argparse dest -> option): a file, or
# a directory for a command that lists the dest in its parser's ``output_dirs``.
OUTPUT_OPTIONS = {
    "output": "-o",
    "plot": "--plot",
    "flamegraph": "--flamegraph",
    "bars": "--bars",
    "scenario_out": "--scenario-out",
    "report": "--report",
    "plots": "--plots",
    "perf_record": "--perf-record",
}


def add_fit(sub, func, figure_args) -> None:
    """``pktsim fit``'s parser (``func`` runs it; ``figure_args`` adds --format/--dpi/--size)."""
    f = sub.add_parser("fit", help="fit scenario keys (costs) to measurements by least squares on the simulator; predicted vs measured rows")
    f.add_argument("file", metavar="SCENARIO", help="scenario TOML file")
    src = f.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--observed",
        action="extend",
        nargs="+",
        metavar="OBS.json",
        help="instead of --data: observations of pktsim observe -o (repeatable), a row each: offered rate, frame size, CPU, interrupts and softirqs per frame",
    )
    src.add_argument(
        "--data",
        metavar="MEASURED.csv",
        help="measurements, one row per configuration: columns that are scenario keys (traffic.rate, with units) and measured results "
        "(cpu_per_frame, latency_ns.p50, irq_per_s, ...: with units, or plain numbers in ns, pps, 1/s, fractions)",
    )
    f.add_argument(
        "--free",
        required=True,
        metavar="KEY[=LO:HI],...",
        help="the keys to fit, comma-separated, each optionally with its range (e.g. host.t_irq,host.t_poll=0ns:2us); they start at the scenario's values",
    )
    f.add_argument("--x", metavar="KEY,...", help="the columns that are configuration (default: every column that is a scenario key)")
    f.add_argument("--y", metavar="RESULT,...", help="the columns to fit (default: every column that is a result pktsim fits)")
    g = f.add_mutually_exclusive_group()
    g.add_argument("--fit-on", metavar="ROWS", help="fit on these rows (numbers from 1, comma-separated); the others are predicted")
    g.add_argument("--fit-fraction", type=float, metavar="F", help="fit on this share of the rows, evenly spread (default 0.5); the others are predicted")
    f.add_argument("--max-runs", type=int, default=2000, metavar="N", help="at most this many simulations (default 2000)")
    f.add_argument("--jobs", type=int, metavar="N", help="local processes (default: all cores)")
    f.add_argument("--dask", metavar="ADDR", help="run on a Dask cluster, e.g. tcp://host:8786")
    f.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key (repeatable)")
    f.add_argument("-o", "--output", metavar="FITTED.toml", help="write the scenario with the fitted values")
    f.add_argument("--plot", metavar="FILE", help="draw measured (hollow: fitted on) against pktsim for each result")
    f.add_argument("--json", action="store_true", help="print one JSON object: values, intervals, rows, summary")
    figure_args(f)
    f.set_defaults(func=func)


def add_examples(sub, func) -> None:
    """``pktsim examples``'s parser."""
    e = sub.add_parser("examples", help="list the bundled examples and the tutorial, or copy them into a directory to edit and run")
    e.add_argument("--copy", metavar="DIR", help="copy every example and the tutorial into DIR (made if missing; existing files are not replaced)")
    e.set_defaults(func=func)


def add_observe(sub, func) -> None:
    """``pktsim observe``'s parser."""
    o = sub.add_parser("observe", help="a host's operating point over a window, read-only (interface counters, /proc): rates, drops, interrupts, softirqs, CPU")
    o.add_argument("--iface", action="append", default=[], metavar="NAME", help="an interface to observe (repeatable; default: every one that is up, but lo)")
    o.add_argument("--duration", default="10s", metavar="D", help="the window, e.g. 10s (default 10s; 50ms to 1h)")
    o.add_argument("--interval", metavar="D", help="also one point per interval, e.g. 1s (the series)")
    o.add_argument("--json", action="store_true", help="print one JSON object (the keys of pktsim run --json where they mean the same)")
    o.add_argument("-o", "--output", metavar="OBS.json", help="also write the JSON object to a file")
    o.add_argument(
        "--model",
        metavar="SCENARIO",
        help="also run this scenario (e.g. pktsim import-host's) at the observed offered rate and frame size, and print observed vs predicted",
    )
    o.set_defaults(func=func)


def add_tune(sub, func) -> None:
    """``pktsim tune``'s parser."""
    tu = sub.add_parser("tune", help="recommend the kernel knobs for a latency, loss or CPU target, with the commands that apply them")
    tu.add_argument("file", nargs="?", metavar="FILE", help="scenario TOML file (today's configuration)")
    tu.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key (repeatable)")
    tu.add_argument("--load", metavar="RATE", help="the target load, e.g. 300kpps (the objectives are read there)")
    tu.add_argument("--load-range", metavar="LO:HI", help="loads the constraints must hold at, e.g. 50kpps:1Mpps (--loads of them, log-spaced)")
    tu.add_argument("--loads", type=int, default=5, metavar="N", help="loads over --load-range (default 5)")
    tu.add_argument(
        "--minimize",
        action="append",
        default=[],
        metavar="METRIC",
        help="an objective (repeatable): cpu, cpu_ns_per_packet, latency_ns.p99, ... (any figure of run --json)",
    )
    tu.add_argument("--maximize", action="append", default=[], metavar="METRIC", help="an objective to maximise, e.g. throughput_pps")
    tu.add_argument(
        "--subject-to", action="append", default=[], metavar="CONSTRAINT", help='a constraint (repeatable), e.g. "latency_ns.p99 <= 50us", "loss_ratio <= 1e-4"'
    )
    tu.add_argument(
        "--knobs",
        action="append",
        metavar="KNOB,...",
        help="knobs to turn (default: every one that applies): nic.itr, nic.napi, socket.busy_poll, host.budget, nic.rx_ring, nic.tx_ring, "
        "host.af_xdp.batch, cpu.cores; or one key, narrowed: nic.itr.interval=10us:200us",
    )
    tu.add_argument("--list-knobs", action="store_true", help="list the knobs, their keys and legal values (for FILE, if given) and exit")
    tu.add_argument("--node", type=int, metavar="I", help="for a chain file: the node whose knobs to tune (default: the bottleneck the model names)")
    tu.add_argument(
        "--budget", type=int, default=500, metavar="N", help="most candidate configurations to simulate (default 500; a space no larger is searched whole)"
    )
    tu.add_argument(
        "--patience",
        type=int,
        metavar="N",
        help="stop searching once N candidates in a row improve nothing beyond noise (default 48; 0: use the whole budget)",
    )
    tu.add_argument("--replications", type=int, metavar="N", help="runs per candidate and load (default: 1 if two seeds give the same figures, else 3)")
    tu.add_argument("--seed", type=int, default=1, metavar="N", help="seed of the search (the scenario's seed drives the runs)")
    tu.add_argument("--jobs", type=int, metavar="N", help="local processes (default: all cores)")
    tu.add_argument("--dask", metavar="ADDR", help="run candidates on a Dask cluster, e.g. tcp://host:8786")
    tu.add_argument("-o", "--output", metavar="DIR", help="write DIR/tuned.toml, DIR/apply.sh, DIR/pareto.png and DIR/tune.json")
    tu.add_argument("--json", action="store_true", help="print one JSON object")
    tu.add_argument(
        "--from-observed",
        metavar="OBS.json",
        help="start from what pktsim observe -o saw: its offered rate as the load (unless --load or --load-range) and its frame size",
    )
    tu.set_defaults(func=func, output_dirs=("output",))
