"""Scenarios shipped with pktsim (the seed papers' setups)."""

from pathlib import Path

DIR = Path(__file__).resolve().parent


def path(name: str) -> Path:
    """Path of a bundled scenario, e.g. ``path("beifuss2015-napi")``."""
    p = DIR / f"{name}.toml"
    if not p.is_file():
        raise FileNotFoundError(f"no bundled scenario {name!r} (have: {', '.join(sorted(x.stem for x in DIR.glob('*.toml')))})")
    return p
