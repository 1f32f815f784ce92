"""The latency term: a region slow at its first token while another region has room gives weight away, in
steps, never to the floor, holds what it kept while it has been slow lately, and gains it back once fast;
a region slow because every region is overloaded keeps its share (overload is not degradation)."""

from __future__ import annotations

import itertools

from orchestrator.routing.cells import decide_cells
from orchestrator.routing.policy import (
    SLOW_HOLD_RUNS,
    PolicyParams,
    RegionMemory,
    RegionSignals,
    Status,
    decide,
)
from orchestrator.routing.state import RunState, parse_state

PARAMS = PolicyParams()
SLOTS = {"us-east-1": 1000.0, "us-west-2": 800.0, "us-east-2": 600.0}
GROUPS = {r: (r,) for r in SLOTS}
BUDGET = 100
SETTLED = {"us-east-1": 42, "us-west-2": 33, "us-east-2": 25}  # in proportion to the slots


def observe(demand: dict[str, float], slow_above: dict[str, float]) -> dict[str, RegionSignals]:
    """Each region's minute with `demand` (in slots) on it: slow first tokens (5%) above the utilisation
    `slow_above` names for it, few (0.2%) below; shed past its slots."""
    signals = {}
    for region, wanted in demand.items():
        slots = SLOTS[region]
        in_flight = min(wanted, slots)
        shed = 1.0 - in_flight / wanted if wanted > slots else 0.0
        slow = 0.05 if wanted / slots > slow_above.get(region, 1.0) else 0.002
        signals[region] = RegionSignals(slow, 0.0, round(slots / 32), 2, slots, in_flight, shed_share=shed)
    return signals


def run_loop(level: float, slow_above, runs: int, start=SETTLED, memory=None):
    """Demand at `level` of all slots, following last run's weights (read a run late, as the real loop);
    `slow_above(run)`: each region's utilisation above which its first tokens are slow, that run."""
    weights = dict(start)
    memory = dict(memory or {r: RegionMemory(good_runs=9) for r in SLOTS})
    served_by = dict(weights)
    history, statuses, details = [], [], []
    total_demand = level * sum(SLOTS.values())
    for run in range(runs):
        total = sum(served_by.values())
        demand = {r: total_demand * served_by[r] / total for r in SLOTS}
        signals = observe(demand, slow_above(run))
        decision = decide_cells(PARAMS, BUDGET, weights, signals, memory, GROUPS, followed=served_by)
        served_by = dict(weights)
        for r in SLOTS:
            assert abs(decision.weights[r] - weights[r]) <= PARAMS.gain_step, (run, weights, decision.weights)
        weights, memory = decision.weights, decision.memory
        history.append(weights)
        statuses.append({d.region: d.status for d in decision.regions})
        details.append({d.region: d.detail for d in decision.regions})
    return history, statuses, details


def test_a_region_slow_at_any_load_gives_its_weight_to_the_others_down_to_one_above_the_floor():
    """us-east-2's engines lost speed (slow at any load), the others run at 60%: equal utilisation alone
    would keep its 25 for ever (as on the slow-degradation game day)."""
    history, statuses, details = run_loop(0.6, lambda _: {"us-east-2": 0.0}, 30)
    east2 = [h["us-east-2"] for h in history]
    assert east2[0] == 25  # one slow minute moves nothing
    assert east2[1] < 25  # two in a row do
    assert min(east2) == east2[-1] == PARAMS.floor + 1  # never the floor: latency does not drain
    assert all(b <= a for a, b in itertools.pairwise(east2))  # down only, never back and forth
    # What it gave up went to the others, who have room.
    assert history[-1]["us-east-1"] > SETTLED["us-east-1"] and history[-1]["us-west-2"] > SETTLED["us-west-2"]
    assert sum(history[-1].values()) == BUDGET
    assert all(s["us-east-2"] is Status.HEALTHY for s in statuses)
    assert "first tokens slow" in details[1]["us-east-2"]


def test_the_cut_waits_for_the_minute_after_it_before_cutting_again():
    """Metrics a minute or more behind: a run that reads a minute from before the last cut does not cut
    again (the cut is of the weight that minute followed)."""
    weights = dict(SETTLED)
    memory = {r: RegionMemory(good_runs=9, slow=1 if r == "us-east-2" else 0) for r in SLOTS}
    demand = {r: 0.6 * SLOTS[r] for r in SLOTS}
    signals = observe(demand, {"us-east-2": 0.0})
    first = decide(PARAMS, BUDGET, weights, signals, memory, followed=SETTLED)
    assert first.weights["us-east-2"] == 18  # 3/4 of 25
    # Next run: the minute read still followed 25 (the cut is not in it yet), and it is still slow.
    second = decide(PARAMS, BUDGET, first.weights, signals, first.memory, followed=SETTLED)
    assert second.weights["us-east-2"] == 18


def test_a_global_overload_moves_no_weight_for_latency():
    """Every region slow because every region is loaded: weight by spare slots alone, as without slow
    first tokens."""
    slow_everywhere = {r: 0.7 for r in SLOTS}
    history, _, _ = run_loop(0.9, lambda _: slow_everywhere, 20)
    quiet, _, _ = run_loop(0.9, lambda _: {}, 20)
    assert history == quiet
    assert all(h == SETTLED for h in history)


def test_a_slow_region_keeps_its_weight_when_the_fast_ones_have_no_spare_slots():
    demand = {"us-east-1": 1100.0, "us-west-2": 900.0, "us-east-2": 300.0}  # the fast ones shed
    signals = observe(demand, {"us-east-2": 0.0})
    signals = {
        r: (s if r == "us-east-2" else RegionSignals(0.002, 0.0, 30, 2, SLOTS[r], SLOTS[r], shed_share=0.1))
        for r, s in signals.items()
    }
    memory = {r: RegionMemory(good_runs=9, slow=0b11 if r == "us-east-2" else 0) for r in SLOTS}
    decision = decide(PARAMS, BUDGET, SETTLED, signals, memory)
    assert decision.weights["us-east-2"] >= SETTLED["us-east-2"]  # no room elsewhere: it gains if anything


def test_a_region_slow_only_above_half_its_slots_settles_instead_of_swinging():
    """Slowness that comes and goes with load: weight leaves until it is fast, then holds for
    SLOW_HOLD_RUNS runs before it may gain again, so it probes a few times an hour, not every few minutes."""
    history, _, _ = run_loop(0.6, lambda _: {"us-east-2": 0.5}, 90)
    east2 = [h["us-east-2"] for h in history]
    reversals = sum(
        (b - a) * (c - b) < 0
        for a, b, c in zip(east2, east2[1:], east2[2:], strict=False)
        if b != a or c != b
    )
    changes = sum(a != b for a, b in itertools.pairwise(east2))
    assert changes <= 90 // SLOW_HOLD_RUNS * 3, east2
    assert reversals <= 2 * (90 // SLOW_HOLD_RUNS), east2
    assert max(east2[10:]) < SETTLED["us-east-2"]  # it never goes back to the share that made it slow


def test_a_region_whose_engines_recover_gets_its_weight_back():
    def slow_above(run: int) -> dict[str, float]:
        return {"us-east-2": 0.0} if run < 20 else {}

    history, _, _ = run_loop(0.6, slow_above, 20 + SLOW_HOLD_RUNS + 20)
    east2 = [h["us-east-2"] for h in history]
    assert east2[19] == PARAMS.floor + 1
    # Held while it has been slow lately (the last slow minute is read at run 19)...
    assert all(w == PARAMS.floor + 1 for w in east2[20 : 19 + SLOW_HOLD_RUNS])
    # ...then back to its share.
    assert abs(east2[-1] - SETTLED["us-east-2"]) <= 1, east2


def test_the_latency_history_survives_the_state_round_trip_and_old_states_read_as_fast():
    memory = {"us-east-2": RegionMemory(1, 0, 0b1, 0b101)}
    assert parse_state(RunState(memory=memory).to_json()).memory == memory
    assert parse_state('{"memory": {"us-east-2": [1, 0, 1]}}').memory == {
        "us-east-2": RegionMemory(1, 0, 1, 0)
    }


def test_slow_minutes_of_a_region_bad_for_errors_do_not_hold_it_after_it_recovers():
    """A region drained for errors is slow as well; once it recovers, the recovery rules alone apply (it
    gains `gain_step` a run after `healthy_runs_to_recover` good runs), not the latency term's hold."""
    weights = {"us-east-1": PARAMS.floor, "us-west-2": 55, "us-east-2": 40}
    memory = {r: RegionMemory(good_runs=9) for r in SLOTS}
    failing = RegionSignals(0.2, 0.05, 30, 2, 1000.0, 300.0)
    for _ in range(5):
        signals = {**observe({r: 0.5 * SLOTS[r] for r in SLOTS}, {}), "us-east-1": failing}
        decision = decide(PARAMS, BUDGET, weights, signals, memory)
        weights, memory = decision.weights, decision.memory
    assert weights["us-east-1"] == PARAMS.floor
    assert not memory["us-east-1"].slow_lately()
    for _ in range(PARAMS.healthy_runs_to_recover):
        signals = observe({r: 0.5 * SLOTS[r] for r in SLOTS}, {})
        decision = decide(PARAMS, BUDGET, weights, signals, memory)
        weights, memory = decision.weights, decision.memory
    assert weights["us-east-1"] == PARAMS.floor + PARAMS.gain_step


def _slow_region_beside(receiver: RegionSignals) -> dict[str, int]:
    """us-east-1 and us-west-2 slow for two runs, us-east-2 fast: what us-east-2 is given."""
    memory = {r: RegionMemory(good_runs=9, slow=0b11) for r in ("us-east-1", "us-west-2")}
    memory["us-east-2"] = RegionMemory(good_runs=9)
    signals = {
        "us-east-1": RegionSignals(0.02, 0.0, 31, 2, 1000, 900),
        "us-west-2": RegionSignals(0.02, 0.0, 25, 2, 800, 720),
        "us-east-2": receiver,
    }
    return decide(PARAMS, BUDGET, SETTLED, signals, memory, followed=SETTLED).weights


def test_a_fast_region_takes_a_slow_ones_weight_only_as_far_as_its_room_goes():
    """The surge-2.5x-event game day: every region near its bound, us-east-1's first tokens slow, us-east-2
    fast with a few slots to spare. Sized by spare slots alone, us-east-2 took the whole cut (+10) and shed
    a fifth of its requests. With 12 slots spare at 588 in flight for its 25, it has room for none."""
    weights = _slow_region_beside(RegionSignals(0.002, 0.0, 19, 2, 600, 588))
    assert weights["us-east-2"] <= SETTLED["us-east-2"] + 1, weights
    assert sum(weights.values()) == BUDGET
    # With room for it, the cut goes there.
    roomy = _slow_region_beside(RegionSignals(0.002, 0.0, 19, 2, 600, 300))
    assert roomy["us-east-2"] >= SETTLED["us-east-2"] + 5, roomy


def test_a_region_shedding_at_its_edge_takes_no_weight_from_a_slow_one():
    """A fleet limited by its prefill sheds before its slots fill: 560 of 600 in flight, 2% shed."""
    weights = _slow_region_beside(RegionSignals(0.002, 0.0, 19, 2, 600, 560, shed_share=0.02))
    assert weights["us-east-2"] <= SETTLED["us-east-2"] + 1, weights
