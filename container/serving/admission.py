"""Whether a replica takes a request, and by when a queued one must have its first output.

A replica admits its batch slots (max_num_seqs) and MAX_QUEUED_PER_REPLICA more; past that it refuses at
once. An admitted request beyond the slots waits in vLLM's own queue for a stream to finish: on Neuron's
33 ms decode steps about a second, so an overloaded fleet's first tokens pass the 1 s objective even for the
requests it admits. QUEUE_WAIT_BUDGET_MS bounds that wait: a request admitted into the queue that has no first
output from the engine that long after its arrival (preparation included) is aborted in the engine and shed
like one refused at once (UNAVAILABLE, outcome "shed"), so its client retries where there is room rather than
being served late. A request admitted into a free slot is never timed out: its wait is the engine's prefill.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from assistant.environ_number import whole_number_from_environ

QUEUE_WAIT_BUDGET_ENV = "QUEUE_WAIT_BUDGET_MS"


class Admission(enum.Enum):
    SLOT = "slot"  # the replica held fewer requests than its batch slots
    QUEUED = "queued"  # admitted to wait for a slot
    REFUSED = "refused"  # slots and queue full: shed at once


def admission(held: int, serving_slots: int, max_queued: int) -> Admission:
    """The fate of a request that arrives while the replica holds `held` admitted, unfinished requests."""
    if held >= serving_slots + max_queued:
        return Admission.REFUSED
    return Admission.SLOT if held < serving_slots else Admission.QUEUED


def queue_wait_budget_ms(environ: Mapping[str, str]) -> int | None:
    """The budget in milliseconds, or None when unset or 0 (off); ValueError naming the variable otherwise."""
    unit = "milliseconds (0 or unset: no budget)"
    return whole_number_from_environ(environ, QUEUE_WAIT_BUDGET_ENV, 0, unit) or None


def first_output_deadline(arrival: float, admitted: Admission, budget_ms: int | None) -> float | None:
    """When (on arrival's clock, in seconds) a request must have had its first engine output; None: never."""
    if budget_ms is None or admitted is not Admission.QUEUED:
        return None
    return arrival + budget_ms / 1000.0


def queue_wait_shed_message(model_name: str, budget_ms: int) -> str:
    return (
        f"{model_name} is overloaded: no batch slot freed within {budget_ms} ms of arrival; "
        "retry (another host may have room)"
    )
