"""The testbed's error type (kept apart so the CLI can name it without importing the rest)."""


class TestbedError(Exception):
    """A testbed step that failed; the message names the step and what the system said."""

    __test__ = False  # not a pytest test class
