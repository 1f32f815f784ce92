"""Admission and the queue-wait budget: who gets a slot, who waits, who is refused, and by when a waiting
request must have its first output."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving.admission import (
    QUEUE_WAIT_BUDGET_ENV,
    Admission,
    admission,
    first_output_deadline,
    queue_wait_budget_ms,
    queue_wait_shed_message,
)


def test_a_replica_fills_its_slots_then_its_queue_then_refuses() -> None:
    # Two batch slots and a queue of one: requests 1-2 get slots, the third waits, the fourth is refused.
    assert [admission(held, 2, 1) for held in range(4)] == [
        Admission.SLOT,
        Admission.SLOT,
        Admission.QUEUED,
        Admission.REFUSED,
    ]


def test_without_a_queue_a_full_replica_refuses_at_once() -> None:
    assert admission(1, 1, 0) is Admission.REFUSED


@given(held=st.integers(0, 200), slots=st.integers(1, 64), queued=st.integers(0, 64))
def test_admission_holds_at_most_slots_and_queue(held: int, slots: int, queued: int) -> None:
    fate = admission(held, slots, queued)
    assert (fate is Admission.REFUSED) == (held >= slots + queued)
    assert (fate is Admission.SLOT) == (held < slots)


def test_only_a_queued_request_has_a_first_output_deadline() -> None:
    # The deadline counts from arrival (taken in execute(), so the preparation's time counts too).
    assert first_output_deadline(100.0, Admission.QUEUED, 800) == pytest.approx(100.8)
    assert first_output_deadline(100.0, Admission.SLOT, 800) is None, "a slot's wait is the engine's prefill"
    assert first_output_deadline(100.0, Admission.QUEUED, None) is None, "no budget set: no deadline"


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, None), ("", None), ("  ", None), ("0", None), ("800", 800), (" 450 ", 450)]
)
def test_the_budget_is_read_from_the_environment_and_0_or_unset_turns_it_off(raw, expected) -> None:
    environ = {} if raw is None else {QUEUE_WAIT_BUDGET_ENV: raw}
    assert queue_wait_budget_ms(environ) == expected


@pytest.mark.parametrize("raw", ["-5", "0.8", "800ms", "1e3", "eight hundred"])
def test_a_bad_budget_names_the_variable(raw: str) -> None:
    with pytest.raises(
        ValueError, match=rf"^{QUEUE_WAIT_BUDGET_ENV}: must be a whole number of milliseconds.*"
    ):
        queue_wait_budget_ms({QUEUE_WAIT_BUDGET_ENV: raw})


def test_the_shed_message_says_overloaded_the_cause_and_to_retry() -> None:
    # "overloaded" is what the queue-full shed says too: clients and tests read both the same way.
    message = queue_wait_shed_message("assistant", 800)
    assert message.startswith("assistant is overloaded: ")
    assert "no batch slot freed within 800 ms of arrival" in message and "retry" in message
