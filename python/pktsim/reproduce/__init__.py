"""Reproductions of the seed papers: each returns predicted vs reported rows.

Contract (``pktsim reproduce PAPER --json``)::

    {"paper": "...", "title": "...",
     "rows": [{"quantity": "...", "reported": x, "predicted": y, "unit": "...", "source": "...",
               "rel_error": e, "kind": "predicted" | "fitted" | "derived" | "relation", ...}],
     "summary": {"predicted": n, "median_abs_error": m, "max_abs_error": w,
                 "relations": r, "relations_held": h, ...},
     ...}

``kind`` says what a row is (see :mod:`pktsim.reproduce.rows`): a prediction (with the
fitted rows it comes from, ``fitted_on``), a fitted point (also ``fitted: true``), a
derived value (true by construction: the paper's own arithmetic, pktsim's inputs, which
are never in ``reported``, or a value that could not have come out otherwise) or a
relation (with ``holds``). ``summary``
(:func:`summary`) counts the predicted rows and gives their median and largest
|rel_error| (fitted and derived rows are left out), and how many relations hold.

``pktsim reproduce all --json`` prints a list with one such object per paper, as it always
has; the summary over all papers is ``summary(row for p in papers for row in p["rows"])``
(the last lines of the text output).

A row is built by :func:`pktsim.reproduce.rows.row` and shown by ``rows.text_table`` /
``rows.html_table``; that module stands alone (the paper modules import it, not this one).

The papers are listed once, here (:data:`PAPERS`, a :class:`Paper` each): the command
line's help and ``reproduce all``, the progress bar and the HTML report read them from
this list. A paper's module (its ``TITLE``, ``reproduce()`` and ``figures()``) and
:mod:`~pktsim.reproduce.rows` are imported when first used, so that the command line
reads the list without them.
"""

from __future__ import annotations

from .. import _lazy

__all__ = ["AUTHORS", "KINDS", "PAPERS", "Paper", "paper_id", "reproduce", "row", "summary"]


class Paper:
    """One reproduction: its ``key`` ("000", "xdp2018"), the ``aliases`` it is also found
    by (its first authors' names, lower case), the ``module`` of this package that
    reproduces it, the simulations its reproduction ``runs`` (for the progress bar's ETA;
    the tests hold it to the count) and the bundled ``scenario`` the report shows, if any.

    ``title``, ``reproduce`` and ``figures`` are the module's ``TITLE``, ``reproduce()`` and
    ``figures(directory, result)`` (the report's plots: (file name, caption) each).
    Indexed, a paper is still the (title, reproduce) pair that :data:`PAPERS` used to hold."""

    __slots__ = ("key", "aliases", "module", "runs", "scenario")

    def __init__(self, key: str, aliases: tuple, module: str, runs: int, scenario: str | None = None):
        self.key, self.aliases, self.module, self.runs, self.scenario = key, aliases, module, runs, scenario

    def __repr__(self) -> str:
        return f"Paper({self.key!r}, {self.aliases!r}, {self.module!r}, runs={self.runs})"

    def _module(self):
        import importlib

        return importlib.import_module(f".{self.module}", __name__)

    @property
    def title(self) -> str:
        return self._module().TITLE

    @property
    def reproduce(self):
        return self._module().reproduce

    def scenario_text(self, res: dict) -> tuple[str, str]:
        """The scenario the report shows, (name, TOML text): the bundled file, or the
        module's ``scenario(res)`` (built from the reproduction's fitted values)."""
        from ..scenarios import path as scenario_path

        if self.scenario:
            return f"{self.scenario}.toml", scenario_path(self.scenario).read_text()
        make = getattr(self._module(), "scenario", None)
        if make is None:
            return "", ""
        import tomli_w

        from ..scenario import Scenario

        data = make(res)
        data = data.to_dict() if isinstance(data, Scenario) else data
        return "built from the fitted values", tomli_w.dumps(data)

    @property
    def figures(self):
        return self._module().figures

    def __getitem__(self, i: int):
        return (self.title, self.reproduce)[i]


# Paper key -> the paper, in the order `reproduce all` runs them.
PAPERS: dict[str, Paper] = {
    p.key: p
    for p in (
        Paper("000", ("raumer",), "paper000", runs=0),
        Paper("001", ("meyer",), "paper001", runs=122, scenario="meyer2014-rt"),
        Paper("002", ("beifuss",), "paper002", runs=49, scenario="beifuss2015-napi"),
        Paper("003", ("bolla",), "paper003", runs=18),
        Paper("004", ("rizzo",), "paper004", runs=24),
        # Beyond the seed papers: published figures of today's receive path.
        Paper("xdp2018", ("hoiland", "høiland", "xdp"), "paper_xdp", runs=69),
    )
}

# First authors: a paper can be named by number, by author, or author and year
# ("raumer2015", "Meyer").
AUTHORS = {alias: p.key for p in PAPERS.values() for alias in p.aliases}

# Names of pktsim.reproduce.rows, imported with it when first used.
_ROWS = ("KINDS", "row", "summary")


def __getattr__(name: str):
    return _lazy.attribute(__name__, globals(), dict.fromkeys(_ROWS, "rows"), name)


def __dir__() -> list:
    return _lazy.names(globals(), _ROWS)


def paper_id(name: str) -> str | None:
    """The paper's key for ``name`` ("000", "raumer", "raumer2015", "Raumer et al."), or None."""
    if name in PAPERS:
        return name
    import re

    m = re.match(r"^([^\W\d_]+)", name.strip().lower())
    return AUTHORS.get(m.group(1)) if m else None


def reproduce(paper: str) -> dict:
    """The result of one paper's reproduction (``pktsim reproduce PAPER --json``), with its
    ``summary``. ``paper`` is a key ("001") or a first author ("meyer2014")."""
    from .rows import summary

    paper = paper_id(paper) or paper
    if paper not in PAPERS:
        raise KeyError(paper)
    res = PAPERS[paper].reproduce()
    res["summary"] = summary(res["rows"])
    return res
