"""Files that ship with pktsim: the examples (scenarios, a pcap trace, a perf capture of a
forwarding CPU, a host's saved ``ethtool``/``sysctl`` outputs, scripts) and the tutorial
notebook, in the package (``pktsim/examples``) so that a ``pip install`` has them too.

``pktsim examples`` lists them; ``pktsim examples --copy DIR`` copies them where they can
be edited and run (``pktsim run DIR/linux-router-64B.toml``)."""

from __future__ import annotations

import shutil
from pathlib import Path

DIR = Path(__file__).resolve().parent / "examples"

# What the files that are not scenarios or scripts are (a scenario or script says it in
# its first comment line).
ABOUT = {
    "trace-small.pcap": "a small pcap trace to replay (router-trace.toml)",
    "forwarding-veth.perf.gz": "perf script of a forwarding CPU, cpu-clock samples (pktsim calibrate --frames)",
    "forwarding-veth.json": "the testbed run beside that capture: rate, frames, the CPU it measured",
    "tutorial.ipynb": "the tutorial: describe a box, sweep, plot, compare, calibrate, fit",
    "hosts": "saved ethtool, sysctl and lscpu outputs of an ixgbe host (pktsim import-host --from)",
}


def path(name: str) -> Path:
    """A bundled example's path (``path("linux-router-64B.toml")``, ``path("hosts/ixgbe")``)."""
    p = DIR / name
    if not p.exists():
        have = ", ".join(n for n, _ in listing())
        raise FileNotFoundError(f"no bundled example {name!r} (have: {have})")
    return p


def tutorial() -> Path:
    return path("tutorial.ipynb")


def _about(p: Path) -> str:
    if p.name in ABOUT:
        return ABOUT[p.name]
    if p.suffix in (".toml", ".py"):
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if line.startswith("#!"):
                continue
            if line.startswith("#"):
                return line.lstrip("# ").strip()
            if line.startswith(('"""', "'''")):
                return line.strip("\"' ")
    return ""


def listing() -> list[tuple[str, str]]:
    """(name, what it is) for every bundled example, by name."""
    return [(p.name, _about(p)) for p in sorted(DIR.iterdir()) if not p.name.startswith((".", "__"))]


def copy(dest: str | Path) -> list[Path]:
    """Copy every example into ``dest`` (made if missing); a file already there is left
    as it is (FileExistsError names it before anything is copied)."""
    d = Path(dest)
    items = [DIR / n for n, _ in listing()]
    clash = [d / p.name for p in items if (d / p.name).exists()]
    if clash:
        raise FileExistsError(f"{clash[0]}: already there; expected a directory without pktsim's example files (or a new one)")
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for p in items:
        if p.is_dir():
            shutil.copytree(p, d / p.name)
        else:
            shutil.copyfile(p, d / p.name)
        out.append(d / p.name)
    return out
