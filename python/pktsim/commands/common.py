"""What several commands share: an option read as a quantity, a file or directory an option names
checked and written, and the reproduce-style table of rows with its summary."""

from __future__ import annotations

import math
import re
from pathlib import Path

from ..errors import UsageError
from ..textio import atomic_write


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
    if Path(path).is_dir():
        raise UsageError(f"{option} {path}: is a directory; expected a file to write")
    try:
        atomic_write(path, data)
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write the file ({e.strerror or e})") from None


def _writable_dir(option: str, path: str) -> Path:
    """A directory the command can write files into (created if missing), or a UsageError
    naming the option and the path."""
    d = Path(path)
    try:
        d.mkdir(parents=True, exist_ok=True)
        import tempfile

        with tempfile.TemporaryFile(dir=d):
            pass
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write files there ({e.strerror or e}); expected a writable directory") from None
    return d


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

    print(text_table(res["rows"]))
    print()
    print(summary_text(res.get("summary") or summary(res["rows"]), label))
