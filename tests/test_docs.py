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
