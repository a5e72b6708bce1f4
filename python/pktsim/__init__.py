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

from . import _core, _lazy
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
    "SweepError": "experiments",
    "per_class": "experiments",
    "per_ring": "experiments",
    "results": "experiments",
    "summarize": "experiments",
    "sweep": "experiments",
    "time_series": "experiments",
    "compare": "comparison",
    "fit": "fitting",
    "Fit": "fitting",
}

__all__ = [
    "GROUPS",
    "Prediction",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "compare",
    "fit",
    "Fit",
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
    "SweepError",
    "expand_values",
    "__version__",
]


def __getattr__(name: str):
    return _lazy.attribute(__name__, globals(), _LAZY, name)


def __dir__() -> list:
    return _lazy.names(globals(), _LAZY)
