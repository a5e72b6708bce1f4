"""pktsim: predict and explain the performance of software packet-processing systems.

>>> import pktsim
>>> p = pktsim.predict("examples/linux-router-64B.toml")
>>> round(p["r_max_pps"] / 1e6, 2)
1.67
"""

from . import _core
from .errors import ScenarioError
from .model import GROUPS, Prediction, from_measurement, parse_quantity, predict
from .scenario import Scenario
from .sim import RunResult, run
from .values import expand_values
from .experiments import SweepInterrupted, per_class, per_ring, results, summarize, sweep, time_series
from .comparison import compare
from . import plots

__version__ = _core.VERSION

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
