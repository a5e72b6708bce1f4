"""pktsim: predict and explain the performance of software packet-processing systems.

>>> import pktsim
>>> p = pktsim.predict("examples/linux-router-64B.toml")
>>> round(p["r_max_pps"] / 1e6, 2)
1.67

The names below are imported when first used (``pktsim.sweep`` brings in the sweep
machinery, ``pktsim.plots`` matplotlib's side of pktsim), so that ``import pktsim`` and the
``pktsim`` command start quickly; each submodule is also reached as an attribute
(``pktsim.sim``, ``pktsim.experiments``, ...).
"""

from . import _core
from .errors import ScenarioError

__version__ = _core.VERSION

# Public name -> the submodule that defines it.
_LAZY = {
    "GROUPS": "model",
    "Prediction": "model",
    "from_measurement": "model",
    "parse_quantity": "model",
    "predict": "model",
    "Scenario": "scenario",
    "RunResult": "sim",
    "run": "sim",
    "expand_values": "values",
    "SweepInterrupted": "experiments",
    "per_class": "experiments",
    "per_ring": "experiments",
    "results": "experiments",
    "summarize": "experiments",
    "sweep": "experiments",
    "time_series": "experiments",
    "compare": "comparison",
}

__all__ = [
    "GROUPS",
    "Prediction",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "compare",
    "from_measurement",
    "parse_quantity",
    "predict",
    "run",
    "sweep",
    "summarize",
    "results",
    "per_class",
    "per_ring",
    "time_series",
    "SweepInterrupted",
    "expand_values",
    "__version__",
]


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    elif not name.startswith("_"):
        try:  # a submodule: pktsim.plots, pktsim.sim, ...
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))
