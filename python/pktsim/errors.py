"""Errors pktsim shows to users."""


class ScenarioError(ValueError):
    """A scenario, cost profile or command-line value was rejected.

    ``str(err)`` is the whole message; the parts are also attributes:
    ``origin`` (file or source), ``path`` (dotted key), ``value`` (as written, or None) and
    ``expected`` (what would have been accepted, with units).
    """

    origin: str = ""
    path: str = ""
    value: "str | None" = None
    expected: str = ""


class UsageError(Exception):
    """A command-line value that is wrong; the message says which and why."""
