"""TOML reading, the one place it is imported from: the standard library's ``tomllib``
(Python 3.11 and later), else ``tomli``, the same parser as a package (a dependency on
Python 3.10). ``from pktsim.tomlread import tomllib`` wherever TOML is read."""

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

__all__ = ["tomllib"]
