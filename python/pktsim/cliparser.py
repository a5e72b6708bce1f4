"""The command line's parser and the options that name what a command writes."""

from __future__ import annotations

import argparse


class Parser(argparse.ArgumentParser):
    """argparse's parser with its errors in one line (the command's usage, not the whole
    of it) and a hint where a value starting with "-" was taken for an option."""

    def error(self, message: str):
        hint = ""
        if "expected one argument" in message:
            hint = "; a value that starts with '-' is written --option=VALUE (e.g. --values=-1,2)"
        self.exit(2, f"{self.prog}: error: {message}{hint} (see {self.prog} --help)\n")


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
}
