"""Text output: aligned tables, human units, and files written all-or-nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from .errors import UsageError

# pathlib is imported where it is used: `pktsim run` starts without it (and without the
# urllib.parse and ipaddress it imports, ~4 ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def json_text(obj) -> str:
    """``obj`` as the indented JSON the commands print (no NaN or infinity: an error)."""
    return json.dumps(obj, indent=2, allow_nan=False)


def current_umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class OutputFileError(UsageError, ValueError):
    """An output path pktsim will not write; the message names it and why (the command
    line exits 2 with it)."""


def output_target(path: str | Path, what: str = "output") -> Path:
    """The regular file that writing ``path`` replaces, checked before any work is done: a
    path that does not exist yet or a regular file is written there; a symlink is followed
    to what it names (which must be one of those; the link stays); a directory, a FIFO or
    a device is refused (pktsim writes a new file and renames it over the old, which would
    replace them), and so is a directory that cannot be made or written. Raises
    :class:`OutputFileError` naming the path."""
    import stat
    from pathlib import Path

    p = Path(path)
    target = Path(os.path.realpath(p)) if p.is_symlink() else p
    st = _stat_output(target, p, what)
    if st is not None and not stat.S_ISREG(st.st_mode):
        via = f" (the symlink names {target})" if target != p else ""
        raise OutputFileError(f"{p}: cannot write the {what}: it is {_kind(st.st_mode)}{via}, expected a regular file or a new path")
    _check_can_create(p, target.parent, what)
    return target


def _stat_output(path, shown, what: str) -> os.stat_result | None:
    """What is at an output ``path`` (None: nothing yet), or :class:`OutputFileError`."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise OutputFileError(f"{shown}: cannot write the {what} ({e.strerror or e})") from None


def _check_can_create(shown, directory, what: str) -> None:
    """``directory`` is one files can be made in, or can be made (its nearest existing
    ancestor is a directory a file can be made in: tried with a temporary file, which
    permissions alone do not tell in ``/proc`` or on a read-only mount); nothing is left."""
    import stat
    import tempfile

    d = directory
    while True:
        try:
            st = os.stat(d)
            break
        except FileNotFoundError:
            if d.parent == d:
                break
            d = d.parent
        except OSError as e:
            raise OutputFileError(f"{shown}: cannot write the {what} in {d} ({e.strerror or e})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise OutputFileError(f"{shown}: cannot write the {what}: {d} is {_kind(st.st_mode)}, expected a directory")
    try:
        with tempfile.TemporaryFile(dir=d):
            pass
    except OSError as e:
        raise OutputFileError(f"{shown}: cannot write the {what} in {d} ({e.strerror or e})") from None


def output_dir(path: str | Path, what: str = "output directory") -> Path:
    """A directory files will be written into, checked before any work: an existing
    writable directory, or a path that can be made one (it is made only when a file is
    written into it, so a run that stops first leaves nothing). Raises
    :class:`OutputFileError` naming the path."""
    import stat
    from pathlib import Path

    p = Path(path)
    st = _stat_output(p, p, what)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise OutputFileError(f"{p}: cannot write the {what}: it is {_kind(st.st_mode)}, expected a directory")
    _check_can_create(p, p, what)
    return p


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one,
    never a half-written one (write to a temporary file beside it, then rename). Only a
    regular file or a new path is written (:func:`output_target`)."""
    import tempfile

    path = output_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates 0600; the result gets the mode any new file gets (0666 & ~umask).
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, mode) as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def terminal_width() -> int | None:
    """Columns of the terminal standard output is (``COLUMNS`` overrides), or None when
    output goes to a file or pipe (then tables keep their full width for tools to read)."""
    import shutil
    import sys

    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size((100, 24)).columns


def table(rows: Sequence[Sequence[object]], header: Sequence[str], align: str | None = None, width: int | None = -1, optional: Sequence[int] = ()) -> str:
    """A plain aligned table. ``align`` has one letter per column: l or r (default: text
    left, numbers right). On a terminal (``width`` -1: :func:`terminal_width`, or
    ``COLUMNS``) the columns with text wrap so that the table fits; where wrapping at words
    is not enough, the ``optional`` columns (indices, the first to go first) are left out,
    and a line under the table says so; only then are words broken. ``width`` None never
    wraps."""
    import textwrap

    cells = [[str(c) for c in r] for r in rows]
    if align is None:
        align = "".join("r" if rows and isinstance(rows[0][i], (int, float)) else "l" for i in range(len(header)))
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    limit = terminal_width() if width == -1 else width
    lefts = list(range(len(header)))
    if limit and lefts and sum(widths) + 2 * (len(widths) - 1) > limit:
        # Narrow the column with the most to spare, one character at a time, until the
        # table fits (none below 16 characters, or its longest word if shorter, nor below
        # 6: a column of numbers keeps its width), then wrap each cell to its column.
        floor = {j: max(6, min(16, max([len(w) for r in cells for w in r[j].split()] + [len(header[j])]))) for j in lefts}
        fits = sum(floor.values()) + 2 * (len(widths) - 1) <= limit
        gone = []
        while not fits and len(gone) < len(optional):
            # Wrapping at words cannot make it fit: leave out an optional column.
            gone.append(optional[len(gone)])
            fits = sum(f for j, f in floor.items() if j not in gone) + 2 * (len(widths) - len(gone) - 1) <= limit
        if gone:
            keep = [j for j in range(len(header)) if j not in gone]
            note = f"(left out to fit {limit} columns: {', '.join(header[j] for j in gone)}; a wider terminal shows them)"
            narrowed = table([[r[j] for j in keep] for r in cells], [header[j] for j in keep], "".join(align[j] for j in keep), limit)
            return narrowed + "\n" + textwrap.fill(note, limit)
        target = list(widths)
        for stage in (0, 1):
            if stage:
                # Still too wide: text columns may break their words, down to 6 characters.
                floor = {j: (6 if any(not _numberlike(r[j]) for r in cells) else f) for j, f in floor.items()}
            while sum(target) + 2 * (len(target) - 1) > limit:
                narrowable = [j for j in lefts if target[j] > floor[j]]
                if not narrowable:
                    break
                i = max(narrowable, key=lambda j: target[j] - floor[j])
                target[i] -= 1
        wrapped = []
        for r in cells:
            parts = [textwrap.wrap(c, target[j]) or [""] if target[j] < widths[j] else [c] for j, c in enumerate(r)]
            for k in range(max(len(p) for p in parts)):
                wrapped.append([p[k] if k < len(p) else "" for p in parts])
        cells = wrapped
        widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]

    def fmt(r):
        return "  ".join(c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(r, widths, align)).rstrip()

    lines = [fmt(header), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def fit_lines(text: str) -> str:
    """``text`` with each line longer than the terminal (:func:`terminal_width`, or
    ``COLUMNS``) wrapped at words, its continuation indented as the line; as it is when
    output goes to a file or pipe."""
    import textwrap

    limit = terminal_width()
    if not limit:
        return text
    out = []
    for line in text.split("\n"):
        if len(line) <= limit:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()))
        out.append(textwrap.fill(line.strip(), limit, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False))
    return "\n".join(out)


def _numberlike(text: str) -> bool:
    """A cell that is a number, maybe signed, with a unit or a percent sign (not wrapped)."""
    t = text.strip().replace(",", "")
    return not t or t == "-" or bool(__import__("re").fullmatch(r"[+-]?[0-9.]+(e[+-]?[0-9]+)?\s*%?[A-Za-z/µ]*", t))


def si(value: float, unit: str, digits: int = 3) -> str:
    """``si(1.6683e6, "pps")`` -> ``"1.668 Mpps"``; no value (None: a rate without a
    bound, as the model gives a node that costs nothing per frame) -> ``"-"``."""
    if value is None:
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}f} {prefix}{unit}"
    return f"{value:.{digits}f} {unit}"


def bytes_h(n: float) -> str:
    for factor, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= factor:
            return f"{n / factor:.1f} {name}"
    return f"{n:.0f} B"


# Input files larger than this are refused before they are read: no scenario, profile or
# rules file comes near it, and a device (/dev/zero) or a wrong file must not fill memory.
MAX_INPUT_BYTES = 16 * 1024 * 1024


class InputFileError(ValueError):
    """An input file that cannot be used as text; the message names the file and why."""


def _kind(mode: int) -> str:
    """What a file of this mode is, in words."""
    import stat

    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    for test, name in kinds:
        if test(mode):
            return name
    return "not a regular file"


def read_input_bytes(path: str | Path, what: str = "file", limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of an input file, read whole, or :class:`InputFileError` naming the file:
    missing or unreadable, not a regular file (a device, a FIFO, a directory: refused before
    it is opened, so a FIFO never blocks), or larger than ``limit`` bytes. A symlink is
    followed to what it names."""
    import stat

    p = os.fspath(path)

    def check(st: os.stat_result) -> None:
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"{p}: cannot read the {what}: it is {_kind(st.st_mode)}, expected a regular file")

    try:
        # The type first: opening a FIFO would wait for a writer; then opened without
        # blocking and checked again on the descriptor that is read.
        check(os.stat(p))
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            check(st)
            if st.st_size > limit:
                raise InputFileError(f"{p}: cannot read the {what}: {st.st_size:,} bytes, expected at most {limit:,} ({limit >> 20} MiB)")
            data = f.read(limit + 1)
    except OSError as e:
        raise InputFileError(f"{p}: cannot read the {what} ({e.strerror or e})") from None
    if len(data) > limit:
        raise InputFileError(f"{p}: cannot read the {what}: more than {limit:,} bytes ({limit >> 20} MiB)")
    return data


def read_input_text(path: str | Path, what: str = "file", limit: int = MAX_INPUT_BYTES) -> str:
    """The text of a UTF-8 input file, read whole (:func:`read_input_bytes`), or
    :class:`InputFileError` naming the file (also when it is not UTF-8, with the byte offset
    of the first bad byte)."""
    p = os.fspath(path)
    data = read_input_bytes(p, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputFileError(f"{p}: the {what} is not UTF-8 at byte {e.start} (0x{data[e.start]:02x}); expected UTF-8 text") from None
