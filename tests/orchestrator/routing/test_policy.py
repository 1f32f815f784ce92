"""The routing policy's invariants, over generated weights, signals and memories (hypothesis), and the
few behaviours the properties do not pin down."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from orchestrator.routing.policy import (
    MAX_WEIGHT,
    PolicyParams,
    RegionMemory,
    RegionSignals,
    Status,
    decide,
)

REGIONS = ("us-east-1", "us-west-2", "us-east-2")
PARAMS = PolicyParams()

params_strategy = st.builds(
    lambda floor, gain, confirm, extra, recover: PolicyParams(
        floor=floor,
        gain_step=gain,
        bad_runs_to_drain=confirm,
        drain_runs=confirm + extra,
        healthy_runs_to_recover=recover,
    ),
    floor=st.integers(1, 50),
    gain=st.integers(1, 60),
    confirm=st.integers(1, 3),
    extra=st.integers(0, 3),
    recover=st.integers(1, 5),
)
signals_strategy = st.builds(
    RegionSignals,
    slow_first_token_share=st.floats(0, 0.2),
    error_share=st.floats(0, 0.1),
    healthy_hosts=st.integers(0, 40),
    min_hosts=st.integers(0, 10),
    serving_slots=st.floats(0, 2000),
    requests_in_flight=st.floats(0, 2000),
    degraded=st.booleans(),
)
weights_strategy = st.fixed_dictionaries({region: st.integers(0, MAX_WEIGHT) for region in REGIONS})
memory_strategy = st.fixed_dictionaries(
    {region: st.builds(RegionMemory, st.integers(0, 5), st.integers(0, 5)) for region in REGIONS}
)
maybe_signals = st.fixed_dictionaries({region: st.none() | signals_strategy for region in REGIONS})


def healthy(slots: float = 384, in_flight: float = 100) -> RegionSignals:
    return RegionSignals(0.001, 0.0, 12, 4, slots, in_flight)


def degraded() -> RegionSignals:
    """A hard fault: 5% of requests failed (not shed)."""
    return RegionSignals(0.2, 0.05, 12, 4, 384, 300)


@given(params_strategy, weights_strategy, maybe_signals, memory_strategy, st.integers(1, 600))
def test_weights_stay_in_range_and_never_all_zero(params, weights, signals, memory, budget):
    decision = decide(params, budget, weights, signals, memory)
    assert all(0 <= w <= MAX_WEIGHT for w in decision.weights.values())
    assert sum(decision.weights.values()) > 0


@given(params_strategy, weights_strategy, maybe_signals, memory_strategy)
def test_every_unpinned_weight_moves_by_at_most_the_step(params, weights, signals, memory):
    decision = decide(params, 100, weights, signals, memory)
    if sum(weights.values()) == 0:
        return  # the all-zero rescue sets the floor at once; covered below
    for region in REGIONS:
        assert abs(decision.weights[region] - weights[region]) <= params.max_step


@given(params_strategy, st.integers(0, MAX_WEIGHT), memory_strategy)
def test_a_region_that_stays_degraded_reaches_its_floor_within_drain_runs(params, start, memory):
    weights = {"us-east-1": start, "us-west-2": 30, "us-east-2": 20}
    memory = {**memory, "us-east-1": RegionMemory()}
    for _ in range(params.drain_runs):
        signals = {"us-east-1": degraded(), "us-west-2": healthy(), "us-east-2": healthy()}
        decision = decide(params, 100, weights, signals, memory)
        weights, memory = decision.weights, decision.memory
    assert weights["us-east-1"] <= params.floor


def test_the_default_drains_within_three_runs_from_the_highest_weight():
    weights = {"us-east-1": MAX_WEIGHT, "us-west-2": 30, "us-east-2": 20}
    memory: dict[str, RegionMemory] = {}
    history = []
    for _ in range(3):
        decision = decide(
            PARAMS,
            100,
            weights,
            {"us-east-1": degraded(), "us-west-2": healthy(), "us-east-2": healthy()},
            memory,
        )
        weights, memory = decision.weights, decision.memory
        history.append(weights["us-east-1"])
    assert history[0] == MAX_WEIGHT  # one bad minute moves nothing
    assert history[-1] == PARAMS.floor


def corner(floor: int, gain: int, regions: list[tuple[int, float, float]]) -> tuple:
    """A case for the steady-inputs property: weights from 0, each region's (healthy hosts, serving slots,
    requests in flight) steady, nothing slow or failing."""
    params = PolicyParams(
        floor=floor, gain_step=gain, bad_runs_to_drain=1, drain_runs=1, healthy_runs_to_recover=1
    )
    signals = {
        region: RegionSignals(0.0, 0.0, hosts, 0, slots, in_flight)
        for region, (hosts, slots, in_flight) in zip(REGIONS, regions, strict=True)
    }
    return params, dict.fromkeys(REGIONS, 0), signals


@settings(max_examples=60, deadline=None)  # many runs per example on a shared machine
@given(params_strategy, weights_strategy, st.fixed_dictionaries({r: signals_strategy for r in REGIONS}))
# Found by a CI run: a region of little capacity grows the weights' sum, and the sum, a whole number from
# shares measured on the weights themselves, flipped 474/475 with us-east-1 253/254 for ever.
@example(*corner(18, 5, [(1, 3.0, 1.0), (1, 3.0, 1.0), (1, 0.5, 1.0)]))
# And: a region of no capacity beside one with 75 slots, the gain step 1: the sum to grow to 152 grew by
# under a unit a run, so never, and the least weight flipped between the floor and one above it.
@example(*corner(1, 1, [(1, 0.0, 0.0), (1, 1.0, 0.0), (1, 75.0, 0.0)]))
# And: two equal regions sharing 67 beside a drained one at the floor of 33: the tied unit went to each in
# turn, as the order of the balanced targets changed with which regions sat at their least weight.
@example(*corner(33, 1, [(0, 0.0, 0.0), (1, 1.0, 1.0), (1, 1.0, 1.0)]))
def test_steady_inputs_settle_to_steady_weights(params, weights, signals):
    memory: dict[str, RegionMemory] = {}
    for _ in range(MAX_WEIGHT + 10):  # enough for any streak to settle and any weight to cross the range
        decision = decide(params, 100, weights, signals, memory)
        weights, memory = decision.weights, decision.memory
    settled = dict(weights)
    for _ in range(10):
        decision = decide(params, 100, weights, signals, memory)
        weights, memory = decision.weights, decision.memory
        assert weights == settled


@given(params_strategy, weights_strategy, maybe_signals, memory_strategy, st.sampled_from(REGIONS))
def test_missing_metrics_change_nothing_for_that_region(params, weights, signals, memory, region):
    signals = {**signals, region: None}
    decision = decide(params, 100, weights, signals, memory)
    if sum(weights.values()) > 0:
        assert decision.weights[region] == weights[region]
    assert decision.memory[region] == memory[region]
    assert next(r for r in decision.regions if r.region == region).status is Status.MISSING


def test_one_bad_minute_moves_nothing():
    weights = {"us-east-1": 50, "us-west-2": 30, "us-east-2": 20}
    signals = {"us-east-1": degraded(), "us-west-2": healthy(), "us-east-2": healthy()}
    memory = {r: RegionMemory(good_runs=10) for r in REGIONS}
    decision = decide(PARAMS, 100, weights, signals, memory)
    assert decision.weights["us-east-1"] == 50
    assert "suspect" in decision.reason


def test_when_every_region_looks_bad_the_last_weights_stay():
    weights = {"us-east-1": 40, "us-west-2": 35, "us-east-2": 25}
    memory = {r: RegionMemory(bad_runs=5) for r in REGIONS}
    decision = decide(PARAMS, 100, weights, {r: degraded() for r in REGIONS}, memory)
    assert decision.weights == weights
    assert "every region looks bad" in decision.reason


def test_a_recovered_region_waits_before_gaining_weight():
    weights = {"us-east-1": PARAMS.floor, "us-west-2": 50, "us-east-2": 45}
    memory = {
        "us-east-1": RegionMemory(bad_runs=4),
        "us-west-2": RegionMemory(0, 9),
        "us-east-2": RegionMemory(0, 9),
    }
    seen = []
    for _ in range(PARAMS.healthy_runs_to_recover):
        total = sum(weights.values())  # requests follow the weights: the floor region is nearly idle
        signals = {r: healthy(384, 600 * weights[r] / total) for r in REGIONS}
        decision = decide(PARAMS, 100, weights, signals, memory)
        weights, memory = decision.weights, decision.memory
        seen.append(weights["us-east-1"])
    assert seen[: PARAMS.healthy_runs_to_recover - 1] == [PARAMS.floor] * (PARAMS.healthy_runs_to_recover - 1)
    assert seen[-1] == PARAMS.floor + PARAMS.gain_step


def test_weights_follow_spare_capacity():
    weights = {"us-east-1": 34, "us-west-2": 33, "us-east-2": 33}
    signals = {"us-east-1": healthy(600, 0), "us-west-2": healthy(300, 0), "us-east-2": healthy(100, 0)}
    memory = {r: RegionMemory(good_runs=9) for r in REGIONS}
    for _ in range(10):
        decision = decide(PARAMS, 100, weights, signals, memory)
        weights, memory = decision.weights, decision.memory
    assert weights["us-east-1"] > weights["us-west-2"] > weights["us-east-2"] >= PARAMS.floor


def test_pins_are_obeyed_at_once_and_the_rest_follows_the_policy():
    weights = {"us-east-1": 50, "us-west-2": 30, "us-east-2": 20}
    memory = {r: RegionMemory(good_runs=9) for r in REGIONS}
    decision = decide(PARAMS, 100, weights, {r: healthy() for r in REGIONS}, memory, pins={"us-east-1": 0})
    assert decision.weights["us-east-1"] == 0
    assert next(r for r in decision.regions if r.region == "us-east-1").status is Status.PINNED
    assert decision.weights["us-west-2"] > 30


def test_weights_that_would_all_be_zero_become_the_floor():
    weights = {r: 0 for r in REGIONS}
    decision = decide(PARAMS, 100, weights, {r: None for r in REGIONS}, {})
    assert decision.weights == {r: PARAMS.floor for r in REGIONS}


def _all_bad(names: tuple[str, str, str]) -> dict[str, int]:
    hostless, serving, worse = names
    weights = {hostless: 186, serving: 7, worse: 7}
    signals = {
        hostless: RegionSignals(0.0, 0.0, 0, 4, 0, 0, degraded=True),
        serving: RegionSignals(0.05, 0.02, 8, 2, 256, 200),  # bad, but serving: 56 slots spare
        worse: RegionSignals(0.2, 0.1, 4, 1, 128, 100),  # worse: 28 slots spare
    }
    memory = {r: RegionMemory(good_runs=9) for r in names}
    for _ in range(PARAMS.drain_runs):
        decision = decide(PARAMS, 100, weights, signals, memory)
        weights, memory = decision.weights, decision.memory
    return weights


def test_when_every_region_is_bad_a_region_without_healthy_hosts_loses_its_share_within_drain_runs():
    """Holding the last weights kept 93% of answers on a region with no healthy host."""
    weights = _all_bad(("us-east-1", "us-west-2", "us-east-2"))
    assert weights["us-east-1"] == PARAMS.floor
    assert weights["us-east-1"] / sum(weights.values()) < 0.05


def test_when_every_region_is_bad_the_freed_weight_goes_by_spare_slots_never_by_name():
    """On main the best-ranked region took it all, ties broken by name: a region with 17% of the capacity
    went from 20% to 63% of the traffic."""
    first = _all_bad(("us-east-1", "us-west-2", "us-east-2"))
    # The same regions under other names, the sorting order reversed: the same weights.
    renamed = _all_bad(("zz-hostless", "zz-serving", "aa-worse"))
    assert [first["us-east-1"], first["us-west-2"], first["us-east-2"]] == [
        renamed["zz-hostless"],
        renamed["zz-serving"],
        renamed["aa-worse"],
    ]
    gained = {r: first[r] - 7 for r in ("us-west-2", "us-east-2")}
    assert gained["us-east-2"] > 0, "the region with spare slots takes its part"
    assert gained["us-west-2"] == pytest.approx(2 * gained["us-east-2"], abs=2), gained  # 56 vs 28 spare


@given(params_strategy, weights_strategy, st.fixed_dictionaries({r: signals_strategy for r in REGIONS}))
def test_when_every_region_is_bad_weights_never_all_zero_and_hostless_regions_never_gain(
    params, weights, signals
):
    signals = {r: RegionSignals(0.5, 0.5, s.healthy_hosts, s.min_hosts, 10, 5) for r, s in signals.items()}
    memory = {r: RegionMemory(bad_runs=5) for r in REGIONS}
    decision = decide(params, 100, weights, signals, memory)
    assert sum(decision.weights.values()) > 0
    for region, s in signals.items():
        if s.healthy_hosts == 0 and sum(weights.values()) > 0:
            assert decision.weights[region] <= max(weights[region], params.floor)


@settings(max_examples=80, deadline=None)
@given(
    slots=st.fixed_dictionaries({r: st.floats(20, 2000) for r in REGIONS}),
    load=st.floats(0.05, 0.98),
    weights=st.fixed_dictionaries({r: st.integers(1, 100) for r in REGIONS}),
)
def test_steady_demand_with_requests_following_the_weights_converges(slots, load, weights):
    """The feedback the real fleet has: each region's requests in flight are its share of the answers
    times the demand. Sixty runs at steady demand: the last twenty change nothing."""
    demand = load * sum(slots.values())
    memory = {r: RegionMemory(good_runs=9) for r in REGIONS}
    history = []
    for _ in range(60):
        total = sum(weights.values())
        signals = {
            r: RegionSignals(0.001, 0.0, 12, 4, slots[r], demand * weights[r] / total) for r in REGIONS
        }
        decision = decide(PARAMS, 100, weights, signals, memory)
        weights, memory = decision.weights, decision.memory
        history.append(weights)
    assert all(h == history[-1] for h in history[-20:]), history[-20:]


def test_the_attack_suites_forty_thirty_swing_settles():
    """Two equal regions at 70% load started 40/30 swung 40<->30 every minute for ever."""
    weights = {"us-east-1": 40, "us-west-2": 30}
    memory = {r: RegionMemory(good_runs=9) for r in weights}
    seen = []
    for _ in range(30):
        total = sum(weights.values())
        signals = {r: RegionSignals(0.001, 0.0, 12, 4, 384, 0.7 * 768 * weights[r] / total) for r in weights}
        decision = decide(PARAMS, 70, weights, signals, memory)
        weights, memory = decision.weights, decision.memory
        seen.append(weights["us-east-1"])
    assert len(set(seen[-10:])) == 1


def test_latency_and_shedding_never_make_a_region_bad():
    """On main a 1% slow-first-token share drained a region whole, and sheds counted as errors: overload
    then cascaded region to region. Both rise with load; only hard faults make a region bad."""
    overloaded = RegionSignals(0.6, 0.0, 12, 4, 384, 384, shed_share=0.4)
    weights = {"us-east-1": 50, "us-west-2": 30, "us-east-2": 20}
    memory: dict[str, RegionMemory] = {r: RegionMemory(good_runs=9) for r in REGIONS}
    for _ in range(10):
        decision = decide(
            PARAMS, 100, weights, {**{r: healthy() for r in REGIONS}, "us-east-1": overloaded}, memory
        )
        weights, memory = decision.weights, decision.memory
        assert {r.region: r.status for r in decision.regions}["us-east-1"] is Status.HEALTHY
    assert overloaded.problems(PARAMS) == []


def test_an_overloaded_region_sheds_weight_toward_spare_capacity_in_proportion():
    """Its demand (in flight and shed) is 1.6x its slots while the others sit at a quarter: it loses weight
    at once, more than the old dead zone's 1 a run."""
    overloaded = RegionSignals(0.6, 0.0, 12, 4, 384, 384, shed_share=0.375)  # 614 slots of demand
    weights = {"us-east-1": 50, "us-west-2": 30, "us-east-2": 20}
    memory = {r: RegionMemory(good_runs=9) for r in REGIONS}
    signals = {"us-east-1": overloaded, "us-west-2": healthy(384, 46), "us-east-2": healthy(384, 31)}
    decision = decide(PARAMS, 100, weights, signals, memory)
    assert decision.weights["us-east-1"] <= 50 - PARAMS.gain_step


def test_a_region_failing_every_other_minute_is_drained():
    """On main 50% errors on alternate minutes never made 2 bad runs in a row: never drained. 3 bad runs of
    the last 5 drain it."""
    weights = {"us-east-1": 50, "us-west-2": 30, "us-east-2": 20}
    memory = {r: RegionMemory(good_runs=9) for r in REGIONS}
    seen = []
    for minute in range(12):
        east = RegionSignals(0.0, 0.5, 12, 4, 384, 100) if minute % 2 == 0 else healthy()
        decision = decide(
            PARAMS, 100, weights, {**{r: healthy() for r in REGIONS}, "us-east-1": east}, memory
        )
        weights, memory = decision.weights, decision.memory
        seen.append({r.region: r.status for r in decision.regions}["us-east-1"])
    assert Status.DEGRADED in seen[:5]
    assert weights["us-east-1"] == PARAMS.floor


def _timed(in_flight: float, rate: float | None, shed: float = 0.0) -> RegionSignals:
    return RegionSignals(0.0, 0.0, 10, 2, 320.0, in_flight, shed_share=shed, requests_per_second=rate)


def test_a_region_whose_requests_take_far_longer_than_the_typical_is_credited_with_fewer_per_slot():
    from orchestrator.routing.policy import SLOW_TIME_FACTOR, SLOWEST_SPEED, slower_than_typical

    # Time in system: in flight over the admitted rate. 4 s typical; 6.4 s is 1.6 times it.
    signals = {"a": _timed(400, 100), "b": _timed(400, 100), "c": _timed(640, 100)}
    assert slower_than_typical(signals) == pytest.approx({"c": 4.0 / 6.4})
    # Load alone makes a request take somewhat longer: under SLOW_TIME_FACTOR nothing moves.
    signals["c"] = _timed(400 * SLOW_TIME_FACTOR * 0.99, 100)
    assert slower_than_typical(signals) == {}
    # Never below SLOWEST_SPEED: a time in system gone wrong cannot take a region further.
    signals["c"] = _timed(4000, 100)
    assert slower_than_typical(signals) == {"c": SLOWEST_SPEED}
    # The rate counts sheds, which hold no slot: half shed, the admitted half takes 8 s, not 4.
    signals["c"] = _timed(400, 100, shed=0.5)
    assert slower_than_typical(signals) == pytest.approx({"c": 0.5})
    # Nothing to compare with: one region timed, rates unpublished, no load.
    assert slower_than_typical({"a": _timed(400, 100), "c": _timed(640, None)}) == {}
    assert slower_than_typical({"a": _timed(400, 100), "b": _timed(400, 100), "c": _timed(0.0, 0.0)}) == {}


def test_the_balanced_split_gives_a_slow_region_the_share_its_requests_per_slot_earn():
    from orchestrator.routing.policy import balanced_shares

    signals = {"a": _timed(400, 100), "b": _timed(400, 100), "c": _timed(640, 100)}
    shares = balanced_shares(signals, {"a": 30, "b": 30, "c": 30})
    # Same slots, same weight per request: a and b alike, c at 4 / 6.4 of theirs.
    assert shares["a"] == pytest.approx(shares["b"])
    assert shares["c"] == pytest.approx(shares["a"] * 4.0 / 6.4)


def test_the_decision_says_when_a_region_is_credited_with_fewer_requests_a_slot():
    signals = {"a": _timed(400, 100), "b": _timed(400, 100), "c": _timed(800, 100)}
    memory = {r: RegionMemory(good_runs=9) for r in signals}
    followed = {"a": 34, "b": 33, "c": 33}
    decision = decide(PARAMS, 100, followed, signals, memory, followed=followed)
    details = {d.region: d.detail for d in decision.regions}
    assert decision.weights["c"] < 33 and "50% of its slots counted" in details["c"], details
    assert "slots counted" not in details["a"] + details["b"]
