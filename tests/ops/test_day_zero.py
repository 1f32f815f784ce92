"""The day-zero sequence both dry runs print: every step in the checklist's order, the caller's marked."""

import pytest

from ops.day_zero import STEP_NAMES, checklist


def test_the_sequence_runs_quotas_to_subscribe_in_order_with_the_callers_step_marked():
    text = checklist("config/prime-day.yaml", "compile")
    assert list(STEP_NAMES[:1] + STEP_NAMES[-2:]) == ["quotas", "subscribe", "check"]
    positions = [text.index(f". {name}: ") for name in STEP_NAMES]
    assert positions == sorted(positions)
    marked = [line for line in text.splitlines() if line.startswith(" ->")]
    assert marked == [
        " ->  6. compile: make compile CONFIG=config/prime-day.yaml APPROVE=1, until "
        "`make compile DRY_RUN=1` shows every key complete"
    ]


def test_an_unknown_step_is_refused_naming_the_steps():
    with pytest.raises(ValueError, match="no day-zero step 'deploi'; steps: quotas, permissions"):
        checklist("c.yaml", "deploi")
