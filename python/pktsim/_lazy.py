"""Names a package imports when they are first used (PEP 562): a package's ``__getattr__``
and ``__dir__``, so that ``import pktsim`` and ``import pktsim.reproduce`` stay cheap."""

from __future__ import annotations

import importlib


def attribute(package: str, namespace: dict, lazy: dict, name: str):
    """``name`` of ``package``: from the submodule ``lazy`` names for it, else the submodule
    of that name; kept in ``namespace`` (the package's globals) once imported."""
    if name in lazy:
        value = getattr(importlib.import_module(f".{lazy[name]}", package), name)
    elif not name.startswith("_"):
        try:  # a submodule: pktsim.plots, pktsim.reproduce.paper000, ...
            value = importlib.import_module(f".{name}", package)
        except ModuleNotFoundError as e:
            if e.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    namespace[name] = value
    return value


def names(namespace: dict, lazy) -> list:
    """A package's ``__dir__``: what it holds and what it imports when asked."""
    return sorted(set(namespace) | set(lazy))
