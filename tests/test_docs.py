"""The scenario reference is generated from the schema and cannot drift from it."""

from pktsim import docgen


def test_the_committed_scenario_reference_is_the_generated_one():
    assert docgen.OUT.read_text() == docgen.scenario_reference(), "run `python -m pktsim.docgen` and commit docs/scenario-reference.md"


def test_every_scenario_key_is_in_the_reference():
    import json

    from pktsim import _core

    schema = json.loads(_core.schema("scenario"))
    text = docgen.scenario_reference()
    for key in schema["properties"]:
        assert f"`{key}`" in text, key
    for key in ("defer_hard_irqs", "gro_flush_timeout", "rx_ring", "budget_time", "contention"):
        assert f"| `{key}` |" in text, key


def test_every_key_in_the_reference_says_what_it_means():
    """Each key is declared once, with its doc line: a row with an empty meaning is a key
    whose declaration lost it."""
    import re

    text = docgen.scenario_reference()
    rows = [re.split(r"(?<!\\)\|", line.strip().strip("|")) for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) > 100 and all(len(cells) >= 4 for cells in rows)
    empty = [cells[0].strip() for cells in rows if not cells[-1].strip()]
    assert not empty, f"keys without a meaning: {empty}"
