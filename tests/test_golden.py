"""Every figure pktsim prints for the bundled scenarios is as recorded (tests/golden.py)."""

import golden


def test_outputs_equal_the_recorded_golden_outputs(reproduced_all):
    diffs = golden.differences(__import__("json").loads(golden.GOLDEN.read_text()), golden.collect(reproduced_all))
    assert not diffs, (
        f"{len(diffs)} differences from tests/data/golden.json (python tests/golden.py shows them; --update records a deliberate change):\n"
        + "\n".join(diffs[:40])
    )
