"""The simulator's and the search's exact outcomes for fixed seeds, pinned: a speed-up of the event loop or
the search must not change a single request's first or last token, nor a plan's hosts, knees or p99.

The engines are written out here rather than loaded from the shipped profiles, so a re-measured profile
does not move the pins; between them they take every path of the event loop (prefill and decode buckets,
a step table that speculative decoding bends, least outstanding requests and round robin, continuous and
static batching, the admission bound). A pin that fails after a deliberate change of behaviour is
re-pinned with `python -m tests.planner.test_pinned_outcomes`, which prints the current figures."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np

from planner.demand import Demand
from planner.plan import Knees, Search, knee_of, size_region
from planner.simulate import (
    Balancer,
    Batching,
    Engine,
    HostGroup,
    LogNormal,
    Outcome,
    draw_requests,
    simulate,
)


def _steps(base_ms: float, per_sequence_ms: float, batch: int, bend: float = 0.0) -> tuple[float, ...]:
    """A step table in seconds, index = batch size; `bend` makes small batches relatively faster, as a
    speculative-decoding profile's table does (its speed-up falls as the batch grows)."""
    steps = ((base_ms + per_sequence_ms * b) * (1 - bend / b) / 1000 for b in range(1, batch + 1))
    return (0.0, *steps)


DECODE_BUCKETS = (1024, 2048, 4096, 8192)
BUCKETED = Engine(
    prefill_tokens_per_second=9000.0,
    decode_step_seconds=_steps(20.0, 0.9, 16, bend=0.3),
    prefill_buckets=(128, 512, 1024, 2048, 4096, 8192),
    decode_buckets=DECODE_BUCKETS,
    decode_step_by_bucket=tuple(_steps(20.0 + 2 * i, 0.9 + 0.2 * i, 16, bend=0.3) for i in range(4)),
)
PLAIN = Engine(prefill_tokens_per_second=12000.0, decode_step_seconds=_steps(18.0, 1.1, 16))
TEMPLATES = (HostGroup("bucketed", BUCKETED, 2, 1), HostGroup("plain", PLAIN, 3, 1))
MIX = (2.0, 1.0)
PROMPT = LogNormal.fit(900, 3000)
OUTPUT = LogNormal.fit(250, 900)
DEMAND = Demand(PROMPT, OUTPUT, 900, 250, 8191, 1024)
FLEET = [TEMPLATES[0].with_count(3), TEMPLATES[1].with_count(2)]


def digest(outcome: Outcome) -> str:
    """Every request's first and last token time, host and refusal, to the bit."""
    shed = outcome.shed if outcome.shed is not None else np.zeros(0, dtype=bool)
    parts = (outcome.ttft, outcome.finish, outcome.host.astype(np.int64), shed)
    return hashlib.sha256(b"".join(np.ascontiguousarray(part).tobytes() for part in parts)).hexdigest()[:20]


def run(case: str) -> Outcome:
    rate = 13.0 if case != "shed" else 22.0
    requests = draw_requests(rate, 300.0, PROMPT, OUTPUT, seed=11, max_prompt=8191, max_output=1024)
    if case == "lor":
        return simulate(FLEET, requests)
    if case == "round-robin":
        return simulate(FLEET, requests, Balancer.ROUND_ROBIN)
    if case == "static":
        return simulate(FLEET, requests, batching=Batching.STATIC)
    if case == "shed":
        return simulate(FLEET, requests, max_queued=4)
    raise ValueError(case)


PINNED_OUTCOMES = {
    "lor": "97696fc8845976b90343",
    "round-robin": "e4e5fe2cd678c8d96922",
    "static": "01accbaf1bf797e8e1c5",
    "shed": "05384d01336749470046",
}

QUICK = Search(slo_ms=1000, window_seconds=60, verify_seconds=120, slice_hosts=6, window_requests=2000)


def sizings() -> dict[str, tuple[object, ...]]:
    """The search's figures, as plan_event reads them: hosts, counts, p99 and knees."""
    knees = Knees()
    figures: dict[str, tuple[object, ...]] = {}
    for name, rate, search in (
        ("fast", 900.0, QUICK),
        ("fast, other seed", 900.0, replace(QUICK, seed=8, verify_seconds=60)),
        ("direct", 900.0, replace(QUICK, fast=False)),
        ("small fleet", 12.0, QUICK),
    ):
        sized = size_region(TEMPLATES, MIX, DEMAND, rate, search, knees=knees)
        figures[name] = (sized.scale, sized.counts, sized.p99_ttft_ms, sized.knee, sized.slice_knee)
    figures["knee_of"] = (knee_of(FLEET, DEMAND, QUICK),)
    return figures


PINNED_SIZINGS: dict[str, tuple[object, ...]] = {
    "fast": (318, (212, 106), 586.2131040834328, 901.9462258569755, 17.01785331805614),
    "fast, other seed": (320, (213, 107), 891.7674376499888, 903.6069919013188, 16.930185588841912),
    "direct": (315, (210, 105), 910.7441808107706, 893.4372991979473, 17.01785331805614),
    "small fleet": (5, (3, 2), 484.5773274858391, 14.634760661581126, 14.634760661581126),
    "knee_of": (14.634760661581126,),
}


def test_the_simulators_outcome_is_pinned_for_fixed_seeds() -> None:
    assert {case: digest(run(case)) for case in PINNED_OUTCOMES} == PINNED_OUTCOMES


def test_the_searchs_hosts_knees_and_p99_are_pinned() -> None:
    assert sizings() == PINNED_SIZINGS


if __name__ == "__main__":
    print({case: digest(run(case)) for case in PINNED_OUTCOMES})
    print(sizings())
