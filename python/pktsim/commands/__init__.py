"""The ``pktsim`` commands other than ``run``: :mod:`pktsim.cli` parses the command line and
imports a command's module only when it runs (``pktsim.commands.cmd_sweep`` brings in
:mod:`pktsim.commands.sweep` alone).

One module per family of commands: :mod:`~pktsim.commands.model` (model, compare),
:mod:`~pktsim.commands.sweep` (sweep, plot), :mod:`~pktsim.commands.calibrate`
(calibrate, plot-groups), :mod:`~pktsim.commands.reproduce`, :mod:`~pktsim.commands.tune`,
:mod:`~pktsim.commands.fit`, :mod:`~pktsim.commands.observe`,
:mod:`~pktsim.commands.testbed` (every ``pktsim testbed`` command) and
:mod:`~pktsim.commands.files` (import-host, schema, profiles, trace-info, examples); what several
of them share is in :mod:`~pktsim.commands.common`.
"""

# Public name -> the module of this package that defines it.
_HOME = {
    "cmd_model": "model",
    "cmd_compare": "model",
    "format_chain_model": "model",
    "cmd_sweep": "sweep",
    "cmd_plot": "sweep",
    "cmd_calibrate": "calibrate",
    "cmd_plot_groups": "calibrate",
    "profile_groups": "calibrate",
    "cmd_reproduce": "reproduce",
    "cmd_tune": "tune",
    "cmd_fit": "fit",
    "cmd_observe": "observe",
    "cmd_testbed_run": "testbed",
    "cmd_testbed_validate": "testbed",
    "cmd_testbed_probe": "testbed",
    "cmd_testbed_plot": "testbed",
    "cmd_testbed_tune_check": "testbed",
    "cmd_testbed_teardown": "testbed",
    "cmd_import_host": "files",
    "cmd_schema": "files",
    "cmd_profiles": "files",
    "cmd_examples": "files",
    "cmd_trace_info": "files",
}

__all__ = list(_HOME)


def __getattr__(name: str):
    import importlib

    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_HOME))
