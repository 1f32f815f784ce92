"""Cells inside regions: a region decided on its healthy cells, its weight split over its cells by spare
slots, a bad cell drained inside its region, the region drained only once every cell is bad."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.routing.cells import apportion, decide_cells, region_signals_of, split_region
from orchestrator.routing.policy import PolicyParams, RegionMemory, RegionSignals, Status, decide

PARAMS = PolicyParams()
GROUPS = {"us-east-1": ("us-east-1/1", "us-east-1/2"), "us-west-2": ("us-west-2",)}


def healthy(slots: float = 384, in_flight: float = 100) -> RegionSignals:
    return RegionSignals(0.001, 0.0, 12, 4, slots, in_flight)


def failing() -> RegionSignals:
    return RegionSignals(0.0, 0.2, 12, 4, 384, 300)


def run(minutes, current=None, memory=None, groups=GROUPS, budget=100):
    weights = dict(current or {"us-east-1/1": 25, "us-east-1/2": 25, "us-west-2": 50})
    memory = dict(memory or {})
    history = []
    for signals in minutes:
        decision = decide_cells(PARAMS, budget, weights, signals, memory, groups)
        history.append(decision)
        weights, memory = decision.weights, decision.memory
    return history


def test_a_bad_cell_drains_to_the_floor_while_its_region_keeps_serving():
    bad_cell = {"us-east-1/1": failing(), "us-east-1/2": healthy(), "us-west-2": healthy()}
    history = run([bad_cell] * 6)
    last = history[-1].weights
    assert last["us-east-1/1"] == PARAMS.floor
    # us-east-1 is not drained: it carries what its healthy cell's spare slots earn (as many as us-west-2's).
    assert last["us-east-1/2"] > 25
    assert abs((last["us-east-1/1"] + last["us-east-1/2"]) - last["us-west-2"]) <= 10
    statuses = {r.region: r.status for r in history[-1].regions}
    assert statuses == {
        "us-east-1/1": Status.DEGRADED,
        "us-east-1/2": Status.HEALTHY,
        "us-west-2": Status.HEALTHY,
    }


def test_without_cells_the_same_bad_half_would_drain_to_the_other_region():
    """What the cells change: as one target, a region whose half fails looks bad as a whole (its error
    share is the failing half's, diluted but above the bar) and drains to the other region."""
    merged = RegionSignals(0.0, 0.1, 24, 8, 768, 400)
    weights, memory = {"us-east-1": 50, "us-west-2": 50}, {}
    for _ in range(6):
        decision = decide(PARAMS, 100, weights, {"us-east-1": merged, "us-west-2": healthy()}, memory)
        weights, memory = decision.weights, decision.memory
    assert weights["us-east-1"] == PARAMS.floor


def test_a_region_whose_every_cell_is_bad_drains_as_a_whole():
    every_cell_bad = {"us-east-1/1": failing(), "us-east-1/2": failing(), "us-west-2": healthy()}
    history = run([every_cell_bad] * 6)
    last = history[-1].weights
    assert last["us-east-1/1"] + last["us-east-1/2"] <= PARAMS.floor + 1
    assert last["us-west-2"] > 90


def test_one_bad_minute_in_a_cell_moves_nothing():
    calm = {"us-east-1/1": healthy(), "us-east-1/2": healthy(), "us-west-2": healthy()}
    blip = {**calm, "us-east-1/1": failing()}
    with_blip = run([calm, calm, calm, blip])
    before, during = with_blip[-2].weights, with_blip[-1].weights
    assert during["us-east-1/1"] == before["us-east-1/1"]
    # No weight leaves the region for a cell's one bad minute.
    assert during["us-east-1/1"] + during["us-east-1/2"] >= before["us-east-1/1"] + before["us-east-1/2"]
    assert {r.region: r.status for r in with_blip[-1].regions}["us-east-1/1"] is Status.SUSPECT


def test_a_region_splits_its_weight_over_its_cells_by_spare_slots():
    uneven = {
        "us-east-1/1": healthy(slots=384, in_flight=284),  # 100 spare
        "us-east-1/2": healthy(slots=384, in_flight=84),  # 300 spare
        "us-west-2": healthy(slots=768, in_flight=368),  # 400 spare
    }
    history = run([uneven] * 8)
    last = history[-1].weights
    assert last["us-east-1/2"] > 2 * last["us-east-1/1"]
    assert sum(last.values()) == 100


def test_a_cell_without_metrics_holds_and_its_sibling_takes_the_rest():
    missing = {"us-east-1/1": None, "us-east-1/2": healthy(), "us-west-2": healthy()}
    history = run([missing] * 3)
    assert all(d.weights["us-east-1/1"] == 25 for d in history)
    assert {r.region: r.status for r in history[-1].regions}["us-east-1/1"] is Status.MISSING


def test_pins_name_cells():
    calm = {"us-east-1/1": healthy(), "us-east-1/2": healthy(), "us-west-2": healthy()}
    decision = decide_cells(
        PARAMS,
        100,
        {"us-east-1/1": 25, "us-east-1/2": 25, "us-west-2": 50},
        calm,
        {},
        GROUPS,
        {"us-east-1/2": 0},
    )
    assert decision.weights["us-east-1/2"] == 0
    assert {r.region: r.status for r in decision.regions}["us-east-1/2"] is Status.PINNED


def test_regions_without_cells_are_decided_exactly_as_before():
    groups = {"us-east-1": ("us-east-1",), "us-west-2": ("us-west-2",)}
    signals = {"us-east-1": failing(), "us-west-2": healthy()}
    current, memory = {"us-east-1": 60, "us-west-2": 40}, {"us-east-1": RegionMemory(1, 0)}
    assert decide_cells(PARAMS, 100, current, signals, memory, groups) == decide(
        PARAMS, 100, current, signals, memory
    )


def test_region_signals_never_average_bad_cells_into_a_healthy_region():
    short_of_hosts = RegionSignals(0.0, 0.0, 1, 4, 32, 10)
    erroring = RegionSignals(0.0, 0.02, 12, 4, 384, 100)
    combined = region_signals_of(PARAMS, [short_of_hosts, erroring], [True, True])
    assert combined is not None and combined.problems(PARAMS)
    assert region_signals_of(PARAMS, [None, None]) is None
    # One cell drained, the other healthy: the region is the healthy cell.
    assert region_signals_of(PARAMS, [erroring, healthy()], [True, False]) == healthy()


signals_strategy = st.none() | st.builds(
    RegionSignals,
    slow_first_token_share=st.floats(0, 0.05),
    error_share=st.floats(0, 0.05),
    healthy_hosts=st.integers(0, 40),
    min_hosts=st.integers(0, 10),
    serving_slots=st.floats(0, 2000),
    requests_in_flight=st.floats(0, 2000),
    degraded=st.booleans(),
)


@given(
    st.lists(
        st.fixed_dictionaries({n: signals_strategy for names in GROUPS.values() for n in names}), max_size=8
    ),
    st.fixed_dictionaries({n: st.integers(0, 120) for names in GROUPS.values() for n in names}),
)
def test_cell_weights_stay_in_bounds_and_a_region_never_exceeds_a_route53_weight(minutes, start):
    weights, memory = start, {}
    for signals in minutes:
        decision = decide_cells(PARAMS, 100, weights, signals, memory, GROUPS)
        assert set(decision.weights) == set(start)
        assert all(0 <= w <= 255 for w in decision.weights.values())
        assert decision.weights["us-east-1/1"] + decision.weights["us-east-1/2"] <= 255
        assert sum(decision.weights.values()) > 0
        weights, memory = decision.weights, decision.memory


@given(st.integers(0, 255), st.dictionaries(st.sampled_from("abcd"), st.floats(0, 1000), min_size=1))
def test_apportion_adds_up_exactly(total, shares):
    parts = apportion(total, shares)
    assert sum(parts.values()) == total and all(p >= 0 for p in parts.values())


def test_the_drained_cells_weight_goes_to_its_sibling_first():
    """The run a cell is confirmed bad, the weight it gives up goes to its sibling in the same region: the
    region's total moves no more than one damped step, so its users are not sent abroad at once."""
    calm = {
        "us-east-1/1": healthy(),
        "us-east-1/2": healthy(),
        "us-west-2": healthy(slots=768, in_flight=200),
    }
    settled = run([calm] * 12)[-1].weights
    bad = {**calm, "us-east-1/1": failing()}
    history = run([bad] * PARAMS.bad_runs_to_drain, current=settled, memory=run([calm] * 12)[-1].memory)
    before, after = settled, history[-1].weights
    assert after["us-east-1/1"] < before["us-east-1/1"]
    dropped = before["us-east-1/1"] - after["us-east-1/1"]
    assert after["us-east-1/2"] - before["us-east-1/2"] >= dropped - PARAMS.gain_step
    region_before = before["us-east-1/1"] + before["us-east-1/2"]
    region_after = after["us-east-1/1"] + after["us-east-1/2"]
    assert abs(region_after - region_before) <= PARAMS.gain_step


@settings(max_examples=60, deadline=None)
@given(
    slots=st.fixed_dictionaries(
        {c: st.floats(60, 1500) for c in ("us-east-1/1", "us-east-1/2", "us-west-2")}
    ),
    load=st.floats(0.05, 0.95),
    start=st.fixed_dictionaries({c: st.integers(1, 60) for c in ("us-east-1/1", "us-east-1/2", "us-west-2")}),
)
def test_steady_demand_with_requests_following_the_cells_weights_converges(slots, load, start):
    """The feedback a cell has: its requests in flight are its share of the answers times the demand. The
    split inside a region follows spare slots, which follow the split: sixty runs at steady demand, the
    last twenty change nothing (the game day's unplanned surge swung two cells 5-6 points every minute)."""
    demand = load * sum(slots.values())
    weights = dict(start)
    memory = {c: RegionMemory(good_runs=9) for c in weights} | {"us-east-1": RegionMemory(good_runs=9)}
    history = []
    for _ in range(60):
        total = sum(weights.values())
        signals = {
            c: RegionSignals(0.001, 0.0, 12, 4, slots[c], demand * weights[c] / total) for c in weights
        }
        decision = decide_cells(PARAMS, 100, weights, signals, memory, GROUPS)
        weights, memory = decision.weights, decision.memory
        history.append(weights)
    assert all(h == history[-1] for h in history[-20:]), history[-20:]


def test_two_equal_cells_near_their_cliff_do_not_swing():
    """Two equal cells at 85% load started 30/10: the split settles instead of swapping every minute."""
    weights = {"us-east-1/1": 30, "us-east-1/2": 10, "us-west-2": 60}
    memory: dict[str, RegionMemory] = {}
    seen = []
    for _ in range(40):
        total = sum(weights.values())
        signals = {
            c: RegionSignals(0.001, 0.0, 12, 4, 400, 0.85 * 1200 * weights[c] / total) for c in weights
        }
        decision = decide_cells(PARAMS, 100, weights, signals, memory, GROUPS)
        weights, memory = decision.weights, decision.memory
        seen.append(weights["us-east-1/1"])
    assert len(set(seen[-10:])) == 1, seen
    assert abs(seen[-1] - weights["us-east-1/2"]) <= 4


def test_a_drained_cells_weight_leaves_its_region_beyond_its_siblings_spare_slots():
    """On main the sibling took the whole region's weight in one run while it had no room: two loaded cells
    swapped all and nothing. A cell's drain cuts its region's weight by the cell's share; the sibling takes
    at most what its spare slots can serve."""
    loaded = {
        "us-east-1/1": healthy(384, 345),  # 90% busy: 39 slots spare each
        "us-east-1/2": healthy(384, 345),
        "us-west-2": healthy(768, 300),
    }
    memory = {
        name: RegionMemory(good_runs=9) for name in ("us-east-1", "us-east-1/1", "us-east-1/2", "us-west-2")
    }
    start = {"us-east-1/1": 25, "us-east-1/2": 25, "us-west-2": 50}
    bad = {**loaded, "us-east-1/1": failing()}
    history = run([bad] * PARAMS.drain_runs, current=start, memory=memory)
    after = history[-1].weights
    assert after["us-east-1/1"] == PARAMS.floor
    room = 39 * 25 / 345  # the sibling's spare slots, in weight
    assert after["us-east-1/2"] - 25 <= room + 1, after
    assert after["us-east-1/1"] + after["us-east-1/2"] <= 50 - (25 - PARAMS.floor) + room + 1, after


def test_a_cell_without_metrics_does_not_squeeze_its_sibling():
    """On main a cell with missing metrics made its region look half as large: its sibling went 24 -> 11."""
    even = {
        "us-east-1/1": None,
        "us-east-1/2": healthy(384, 230),  # 60% busy, as us-west-2
        "us-west-2": healthy(768, 460),
    }
    history = run([even] * 10, current={"us-east-1/1": 24, "us-east-1/2": 24, "us-west-2": 52})
    assert all(d.weights["us-east-1/1"] == 24 for d in history)
    assert all(abs(d.weights["us-east-1/2"] - 24) <= 1 for d in history), [d.weights for d in history]


def test_when_every_cell_is_bad_a_cell_without_hosts_still_steps_down():
    """On main a cell with no hosts kept its share while its sibling was bad too."""
    signals = {
        "us-east-1/1": RegionSignals(0.0, 0.0, 0, 4, 0, 0, degraded=True),
        "us-east-1/2": failing(),
        "us-west-2": healthy(768, 300),
    }
    start = {"us-east-1/1": 24, "us-east-1/2": 24, "us-west-2": 52}
    history = run([signals] * PARAMS.drain_runs, current=start)
    assert history[-1].weights["us-east-1/1"] == PARAMS.floor


def test_a_growing_region_does_not_ratchet_its_weight_onto_the_heavier_cell():
    """The unplanned-surge game day, minutes 25-38: two equal cells (11 tasks each, the same requests per
    unit of weight) while their region's weight grows a unit every few runs. Each unit went by the cells'
    current proportions, largest remainder first, so to the heavier cell, and the deadband kept the gap:
    18/17 became 19/17 and 20/17, and the heavier cell shed (138 requests/s beside its twin's 122) while its
    twin had room. What the region gains goes to the cell below its balanced weight."""
    names = ("us-east-1/1", "us-east-1/2")
    weights = {"us-east-1/1": 18, "us-east-1/2": 17}
    memory = {n: RegionMemory(good_runs=9) for n in names}
    seen = []
    for total in (35, 36, 36, 37, 37, 38, 38, 39, 40, 41):
        signals = {
            n: RegionSignals(0.001, 0.0, 11, 4, 1152, 60.0 * weights[n], requests_per_second=7.0 * weights[n])
            for n in names
        }
        weights, memory, _ = split_region(PARAMS, total, names, weights, signals, memory)
        seen.append((weights["us-east-1/1"], weights["us-east-1/2"]))
    assert all(abs(a - b) <= 1 for a, b in seen), seen
