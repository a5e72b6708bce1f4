"""What several commands share: an option read as a quantity, a file or directory an option names
checked and written, and the reproduce-style table of rows with its summary."""

from __future__ import annotations

import math
import re
from pathlib import Path

from ..errors import UsageError
from ..textio import OutputFileError, atomic_write, output_dir, output_target


def _quantity(kind: str, option: str, text: str) -> float:
    from ..model import parse_quantity

    try:
        return parse_quantity(kind, text)
    except ValueError as e:
        raise UsageError(f"{option} {e}") from None


def _load_or_active(args) -> tuple:
    """--cpu-load as a fraction and --active-cycles per second (each None when not given)."""
    load = _quantity("percent", "--cpu-load", args.cpu_load) if args.cpu_load is not None else None
    active = None
    if args.active_cycles is not None:
        try:
            active = float(args.active_cycles)
        except ValueError:
            active = None
        if active is None or not (active > 0 and math.isfinite(active)):
            raise UsageError(f"--active-cycles {args.active_cycles!r}: expected the active cycles per second as a finite number above 0, e.g. 3.1e9") from None
    return load, active


def _write_file(option: str, path: str, data: str | bytes) -> None:
    """atomic_write, with a path that cannot be written as a UsageError naming the option."""
    try:
        atomic_write(path, data)
    except OutputFileError as e:
        raise UsageError(f"{option} {e}") from None
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write the file ({e.strerror or e})") from None


def _writable_dir(option: str, path: str) -> Path:
    """A directory the command can write files into (made when the first file is written),
    or a UsageError naming the option and the path."""
    try:
        return output_dir(path)
    except OutputFileError as e:
        raise UsageError(f"{option} {e}; expected a writable directory") from None


def check_outputs(args, options: dict[str, str]) -> None:
    """Every output a command was given (``options``: argparse dest -> option), checked
    before it does any work (a simulation, a measurement): a file that can be written, or,
    for a dest in the parser's ``output_dirs``, a directory that can be written into."""
    dirs = set(getattr(args, "output_dirs", ()))
    for dest, option in options.items():
        value = getattr(args, dest, None)
        if not isinstance(value, str) or not value:
            continue
        if dest in dirs:
            _writable_dir(option, value)
            continue
        try:
            output_target(value)
        except OutputFileError as e:
            raise UsageError(f"{option} {e}") from None


def _figure_options(args) -> dict:
    if not 20 <= args.dpi <= 1200:
        raise UsageError(f"--dpi {args.dpi}: expected 20 to 1200 dots per inch")
    m = re.match(r"^([0-9.]+)x([0-9.]+)$", args.size or "")
    if not m or not (0.5 <= float(m.group(1)) <= 40 and 0.5 <= float(m.group(2)) <= 40):
        raise UsageError(f"--size {args.size}: expected WIDTHxHEIGHT in inches, each 0.5 to 40 (e.g. 3.5x2.6)")
    return {"fmt": args.format, "dpi": args.dpi, "size": (float(m.group(1)), float(m.group(2)))}


def _print_rows(res: dict, label: str = "summary") -> None:
    """A reproduce-style table: quantity, reported (measured), predicted, error, kind;
    then the summary lines (predicted rows' errors, relations held)."""
    from ..reproduce.rows import summary, summary_text, text_table
    from ..textio import fit_lines

    print(text_table(res["rows"]))
    print()
    print(fit_lines(summary_text(res.get("summary") or summary(res["rows"]), label)))
