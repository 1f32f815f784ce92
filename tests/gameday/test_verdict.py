"""The verdict's rules on small hand-made days: what each rule passes and what it fails."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gameday.loop import Minute, RegionMinute, region_row
from gameday.scenario import Counterfactual, Judge, Metrics, Scenario
from gameday.serving import Curve
from gameday.verdict import Rules, Summary, compare, excused, judge

WEIGHTS = {"us-east-1/1": 25, "us-east-1/2": 25, "us-west-2": 30, "us-east-2": 20}
# Policy defaults (floor 5, gain 10, drain after 2 of 3 runs): drop step ceil(250 / 2) = 125.
RULES = Rules(slo_ms=1000, slo_errors=0.01, max_step=125, floor=5, initial_weights=WEIGHTS)


def scenario(faults=(), **judge_figures) -> Scenario:
    return Scenario(
        config="config/prime-day.yaml",
        start=datetime(2027, 7, 8, 19, tzinfo=UTC),
        minutes=60,
        traffic={"us-east-1": [(0, 1000.0)]},
        faults=list(faults),
        judge=Judge(**{"lost_requests": 10**9, "goodput": 0.0, **judge_figures}),
    )


def row(**figures) -> RegionMinute:
    base = dict(
        offered_rps=100.0,
        served_rps=100.0,
        good_rps=100.0,
        capacity_rps=200.0,
        weight=25,
        hosts=10,
        tasks=10,
        targets=10,
        fleets=2,
        ttft_p99_ms=500.0,
        answer_share=0.25,
    )
    base.update(figures)
    return RegionMinute(**base)


def day(count: int = 30, changes: dict[tuple[int, str], dict] | None = None, fail_open=()) -> list[Minute]:
    """`count` quiet minutes; `changes[(minute, target)]` overrides that target's figures."""
    changes = changes or {}
    minutes = []
    for minute in range(count):
        cells = {
            name: row(**{"weight": weight, **changes.get((minute, name), {})})
            for name, weight in WEIGHTS.items()
        }
        regions = {
            "us-east-1": region_row([cells["us-east-1/1"], cells["us-east-1/2"]]),
            "us-west-2": cells["us-west-2"],
            "us-east-2": cells["us-east-2"],
        }
        minutes.append(Minute(minute, regions, [], cells, minute in fail_open))
    return minutes


SLOW = {"ttft_p99_ms": 2500.0}


def test_a_quiet_day_passes():
    assert judge(scenario(), day(), RULES).verdict == "pass"


def test_a_regions_fault_excuses_that_region_only_and_only_from_its_own_start():
    deaths = {"kind": "engine_deaths", "region": "us-west-2", "share": 0.2, "at": 10}
    run = day(changes={(12, "us-west-2"): SLOW, (12, "us-east-2"): SLOW, (5, "us-west-2"): SLOW})
    summary = judge(scenario([deaths]), run, RULES)
    assert summary.violations == (
        "us-west-2: SLO missed in 1 minutes outside its own faults' grace (first at minute 5)",
        "us-east-2: SLO missed in 1 minutes outside its own faults' grace (first at minute 12)",
    )
    assert summary.slo_minutes_violated == {"us-east-1": 0, "us-west-2": 2, "us-east-2": 1}


def test_a_fault_without_a_region_excuses_nothing():
    errors = {"kind": "api_errors", "service": "route53", "at": 10, "until": 20}
    summary = judge(scenario([errors]), day(changes={(12, "us-west-2"): SLOW}), RULES)
    assert summary.verdict == "fail"
    assert not excused(scenario([errors]), "us-west-2", 12)


def test_a_cell_down_is_excused_but_its_sibling_is_judged():
    down = {"kind": "region_down", "region": "us-east-1/2", "at": 5, "until": 8}
    gone = {"served_rps": 0.0, "good_rps": 0.0, "shed_rps": 100.0, "error_share": 1.0, "down": True}
    changes = {(m, "us-east-1/2"): gone for m in range(5, 8)}
    changes[(6, "us-east-1/1")] = SLOW
    summary = judge(scenario([down]), day(changes=changes), RULES)
    assert summary.violations == (
        "us-east-1/1: SLO missed in 1 minutes outside its own faults' grace (first at minute 6)",
    )
    # Its region's fault excuses each of its cells.
    region_down = {"kind": "region_down", "region": "us-east-1", "at": 5, "until": 8}
    assert excused(scenario([region_down]), "us-east-1/1", 6)


def test_goodput_is_judged_per_region_and_overall_against_the_scenarios_threshold():
    half_good = {(m, "us-east-2"): {"good_rps": 50.0} for m in range(30)}
    summary = judge(scenario(goodput=0.9), day(changes=half_good), RULES)
    assert summary.goodput["us-east-2"] == pytest.approx(0.5)
    assert summary.goodput["overall"] == pytest.approx(350 / 400)
    assert summary.violations == (
        "us-east-2: goodput 50.00% below 90.00%",
        "overall: goodput 87.50% below 90.00%",
    )
    # Beyond the fleets' capacity, what they could have served is the basis, not what was offered.
    overloaded = {(m, "us-east-2"): {"offered_rps": 400.0, "good_rps": 200.0} for m in range(30)}
    assert judge(scenario(goodput=0.99), day(changes=overloaded), RULES).goodput["us-east-2"] == 1.0


def test_lost_requests_are_held_to_the_scenarios_budget():
    losing = {(3, "us-west-2"): {"shed_rps": 10.0}}
    slo = "us-west-2: SLO missed in 1 minutes outside its own faults' grace (first at minute 3)"
    assert judge(scenario(lost_requests=600), day(changes=losing), RULES).violations == (slo,)
    summary = judge(scenario(lost_requests=599), day(changes=losing), RULES)
    assert summary.violations == (
        slo,
        "600 requests lost (of 600; the rest shed for demand beyond what the fleets could serve), "
        "over the budget of 599",
    )


# A target offered 300 rps, serving 200 and shedding the other 100 at its edge.
SHEDDING_A_THIRD = {
    "offered_rps": 300.0,
    "served_rps": 200.0,
    "good_rps": 200.0,
    "shed_rps": 100.0,
    "overload_shed_rps": 100.0,
}


def us_east_2_shedding_a_third(**more: float) -> dict:
    """30 minutes of us-east-2 offered 300 rps, serving 200 and shedding 100, no room elsewhere."""
    full = {(m, name): {"capacity_rps": 100.0} for m in range(30) for name in WEIGHTS}
    shedding = {**SHEDDING_A_THIRD, **more}
    return full | {(m, "us-east-2"): dict(shedding) for m in range(30)}


def test_sheds_of_demand_beyond_a_targets_capacity_are_neither_slo_errors_nor_lost_against_the_budget():
    """us-east-2 offered 300 rps with 200 it can serve: the 100 it sheds at the edge are overload's
    answer, judged by goodput; a shed within its capacity, or an engine's error, is judged as lost."""
    overloaded = us_east_2_shedding_a_third()
    summary = judge(scenario(lost_requests=0, goodput=0.99), day(changes=overloaded), RULES)
    assert summary.verdict == "pass", summary.violations
    assert summary.requests_lost == 100 * 60 * 30  # still reported
    # The same sheds while the other targets had room (capacity 200 each, 100 offered): the routing could
    # have placed them, so they are judged.
    elsewhere = {k: v for k, v in overloaded.items() if k[1] == "us-east-2"}
    summary = judge(scenario(lost_requests=0, goodput=0.0), day(changes=elsewhere), RULES)
    assert "us-east-2: SLO missed in 30 minutes" in summary.violations[0]
    assert summary.violations[1].startswith("180,000 requests lost")
    # Shed while it had room (150 offered, 200 capacity): every shed is judged.
    within = {
        (m, "us-east-2"): {
            "offered_rps": 150.0,
            "served_rps": 140.0,
            "good_rps": 140.0,
            "shed_rps": 10.0,
            "overload_shed_rps": 10.0,
        }
        for m in range(30)
    }
    summary = judge(scenario(lost_requests=0, goodput=0.0), day(changes=within), RULES)
    assert "us-east-2: SLO missed in 30 minutes" in summary.violations[0]
    assert summary.violations[1].startswith("18,000 requests lost")


def test_a_saturated_target_with_nowhere_to_send_the_excess_sheds_as_its_curve_does_unjudged():
    """Offered 2,309 rps against 2,274 it serves at best within the objective, no target with room: it
    sheds 63, not 35, because a fleet reaches its best only offered well past it (two-regions-lost-at-peak,
    minute 45). The 28 beyond the excess are the saturation's, not a choice any routing, plan or scaling
    made; a plan short of what it has is still judged, and so is the same shed while another target has
    room."""
    from gameday.verdict import excused_shed_rps, judged_lost_rps

    saturated = RegionMinute(
        offered_rps=2309.0, capacity_rps=2274.0, planned_capacity_rps=2274.0, shed_rps=63.0
    )
    saturated = RegionMinute(**{**vars(saturated), "overload_shed_rps": 63.0})
    assert excused_shed_rps(saturated, 1.0) == pytest.approx(63.0)
    # As unavoidable_share gives it when every target is past its basis: 1 but for the sums' rounding.
    assert excused_shed_rps(saturated, 1.0 - 1e-15) == pytest.approx(63.0)
    assert judged_lost_rps(saturated, 1.0) == 0.0
    # Room elsewhere (the share of its excess no target could take: a half): the excess's half alone.
    assert excused_shed_rps(saturated, 0.5) == pytest.approx(17.5)
    # Its plan would have had 2,300 serving: the 26 rps the plan would have served beyond its tasks count.
    short = RegionMinute(**{**vars(saturated), "planned_capacity_rps": 2300.0})
    assert judged_lost_rps(short, 1.0) == pytest.approx(26.0)
    # Below its basis it is not saturated: whatever it sheds is judged.
    below = RegionMinute(**{**vars(saturated), "offered_rps": 2200.0})
    assert judged_lost_rps(below, 1.0) == pytest.approx(63.0)


def test_sheds_within_the_planned_capacity_are_the_systems_loss_beyond_it_overloads():
    """A global overload where us-east-2's tasks serve 200 rps but the config's schedule on time would have
    had 260 serving (a raise late): of its 100 rps shed at the edge, the 60 the plan would have served are
    lost and judged; the 40 beyond the plan are overload's. The rule on one row: the larger of capacity
    and plan is what the target is held to."""
    from gameday.verdict import excused_shed_rps, judged_lost_rps, planned_basis_rps

    late = row(offered_rps=300.0, capacity_rps=200.0, planned_capacity_rps=260.0, shed_rps=100.0)
    late = RegionMinute(**{**vars(late), "overload_shed_rps": 100.0})
    assert planned_basis_rps(late) == 260.0
    assert excused_shed_rps(late, 1.0) == pytest.approx(40.0)
    assert judged_lost_rps(late, 1.0) == pytest.approx(60.0)
    # A target that has more than its plan (tracking scaled it out) is held to what it has.
    ahead = RegionMinute(**{**vars(late), "planned_capacity_rps": 150.0})
    assert judged_lost_rps(ahead, 1.0) == pytest.approx(0.0)

    raised_late = us_east_2_shedding_a_third(planned_capacity_rps=260.0)
    summary = judge(scenario(lost_requests=0, goodput=0.0), day(changes=raised_late), RULES)
    assert "us-east-2: SLO missed in 30 minutes" in summary.violations[0]
    assert summary.violations[1].startswith(f"{60 * 60 * 30:,} requests lost")
    # The plan on time (its capacity is the plan's): the same sheds are overload's.
    on_time = {
        key: {**figures, "planned_capacity_rps": 200.0} if key[1] == "us-east-2" else figures
        for key, figures in raised_late.items()
    }
    assert judge(scenario(lost_requests=0, goodput=0.0), day(changes=on_time), RULES).verdict == "pass"


def test_route_53_failing_open_is_its_own_violation_and_never_a_drain():
    unhealthy = {(m, name): {"healthy": False} for m in range(10, 13) for name in WEIGHTS}
    summary = judge(scenario(), day(changes=unhealthy, fail_open={10, 11, 12}), RULES)
    assert summary.violations == (
        "Route 53 failed open (every record unhealthy) in 3 minutes (first at minute 10)",
    )
    assert summary.fail_open_minutes == 3
    # The same checks failing for one region while others stay healthy is a drain while it serves.
    one = {(10, "us-west-2"): {"healthy": False}}
    assert "us-west-2: drained in minute 10" in judge(scenario(), day(changes=one), RULES).violations[0]


def test_weight_steps_follow_the_policys_documented_limit():
    handover = {(m, "us-west-2"): {"weight": 88} for m in range(10, 30)}  # freed weight: 30 -> 88
    assert judge(scenario(), day(changes=handover), RULES).verdict == "pass"
    jump = {(m, "us-west-2"): {"weight": 200} for m in range(10, 30)}
    assert judge(scenario(), day(changes=jump), RULES).violations == (
        "us-west-2: weight moved 30 -> 200 in minute 10, more than the policy's step 125",
    )


def test_a_front_door_down_must_leave_the_answers_within_5_minutes():
    door = {"kind": "front_door_down", "region": "us-west-2", "at": 5, "until": 20}
    lost = {"served_rps": 0.0, "good_rps": 0.0, "shed_rps": 100.0, "error_share": 1.0, "capacity_rps": 0.0}
    changes = {(m, "us-west-2"): lost for m in range(5, 20)}
    summary = judge(scenario([door]), day(changes=changes), RULES)
    assert summary.violations == (
        "us-west-2: still in Route 53's answers 10 minutes after the 5-minute deadline "
        "(minute 10, front_door_down)",
    )


def test_the_counterfactual_needs_the_orchestrator_to_make_each_measure_strictly_better():
    with_it = Summary("pass", (), {"us-west-2": 3}, 1000)
    without = Summary("pass", (), {"us-west-2": 9}, 1000)
    wanted = scenario().model_copy(update={"counterfactual": Counterfactual()})
    result = compare(wanted, with_it, without)
    assert result.verdict == "fail"
    assert result.violations == (
        "the orchestrator did not make requests_lost better: 1,000 with it, 1,000 without",
    )
    assert result.counterfactual == {
        "slo_minutes": {"on": 3, "off": 9},
        "requests_lost": {"on": 1000, "off": 1000},
    }
    only_slo = scenario().model_copy(update={"counterfactual": Counterfactual(must_improve=["slo_minutes"])})
    assert compare(only_slo, with_it, without).verdict == "pass"


def test_a_region_drained_while_its_live_cell_serves_counts_only_the_live_cells_targets():
    down = {"kind": "region_down", "region": "us-east-1/2", "at": 5, "until": 20}
    gone = {"served_rps": 0.0, "good_rps": 0.0, "capacity_rps": 0.0, "down": True, "targets": 0}
    changes = {(m, "us-east-1/2"): {**gone, "weight": 2} for m in range(5, 20)}
    changes.update({(m, "us-east-1/1"): {"weight": 3} for m in range(10, 30)})  # the region: 50 -> 5
    summary = judge(scenario([down]), day(changes=changes), RULES)
    assert "us-east-1: drained in minute 10 while 100% of its targets served" in summary.violations
    # Its goodput is what the live cell served over what it could: the down cell's requests are the budget's.
    assert summary.goodput["us-east-1"] == 1.0


def test_a_page_the_scenario_names_must_come_by_its_minute():
    wanted = {"pages": [{"target": "us-east-2", "metric": "SlowFirstToken", "by": 20}]}
    minutes = day()
    assert judge(scenario(**wanted), minutes, RULES).violations == (
        "us-east-2: no page on SlowFirstToken by minute 20",
    )
    minutes[25].pages = {"us-east-2": ("SlowFirstToken",)}  # too late
    assert judge(scenario(**wanted), minutes, RULES).verdict == "fail"
    minutes[12].pages = {"us-east-2": ("TimeToFirstToken",)}  # another alarm's page is not this one
    assert judge(scenario(**wanted), minutes, RULES).verdict == "fail"
    minutes[15].pages = {"us-east-2": ("SlowFirstToken", "TimeToFirstToken")}
    assert judge(scenario(**wanted), minutes, RULES).verdict == "pass"


def test_a_target_failing_requests_by_a_fault_may_be_drained_but_only_then():
    """A serving-errors fault above 5% (a hard fault) or engine deaths allow the drain, within the fault
    and its grace; a drain of a serving target otherwise is a violation."""
    drained = {(m, "us-east-2"): {"weight": 5} for m in range(10, 30)}
    errors = {"kind": "serving_errors", "region": "us-east-2", "share": 0.5, "every": 2, "at": 8, "until": 20}
    assert not any("drained" in v for v in judge(scenario([errors]), day(changes=drained), RULES).violations)
    small = {**errors, "share": 0.02}  # below the hard-fault threshold: overload-sized, not a fault
    assert any("drained" in v for v in judge(scenario([small]), day(changes=drained), RULES).violations)
    deaths = {"kind": "engine_deaths", "region": "us-east-2", "share": 0.02, "at": 9}
    assert not any("drained" in v for v in judge(scenario([deaths]), day(changes=drained), RULES).violations)
    late = {(m, "us-east-2"): {"weight": 5} for m in range(27, 30)}  # long after the deaths' grace
    assert any("drained" in v for v in judge(scenario([deaths]), day(changes=late), RULES).violations)


def test_a_front_door_down_is_not_drained_while_serving():
    """Its targets stay healthy and idle, yet its Route 53 check must fail (front-door-down)."""
    drained = {(m, "us-west-2"): {"healthy": False} for m in range(10, 20)}
    door = {"kind": "front_door_down", "region": "us-west-2", "at": 10, "until": 20}
    assert not any("drained" in v for v in judge(scenario([door]), day(changes=drained), RULES).violations)
    assert any("drained" in v for v in judge(scenario(), day(changes=drained), RULES).violations)


def test_the_drain_deadline_follows_the_policys_documented_runs():
    """Errors from minute 10 on, metrics 2 minutes late, the policy's defaults (3 of 5 confirm; drain 3
    runs, 2 to confirm: 2 runs to the floor). Minute 12 is the third bad one; the run of minute 17 reads
    minute 14, the third confirmed: by then the weight must be at the floor."""
    from gameday.verdict import confirmed_bad_minutes, drain_deadline_misses
    from orchestrator.routing.policy import PolicyParams

    policy = PolicyParams()
    bad = [m >= 10 for m in range(30)]
    assert confirmed_bad_minutes(bad, policy).index(True) == 12
    delays = [2] * 30
    # The unbroken policy: at the floor in minute 16 (the alarm seen at 15, confirmed the run after).
    drained = [40 if m < 16 else 5 for m in range(30)]
    assert drain_deadline_misses(bad, drained, delays, policy) == []
    # Dropping by 10 a run (drain_runs huge): 40, 30, ... reaches the floor at minute 19.
    slow = [40 if m < 16 else max(5, 40 - 10 * (m - 15)) for m in range(30)]
    assert drain_deadline_misses(bad, slow, delays, policy) == [17, 18]
    # Never drained: every minute from 17 on; minutes the orchestrator could not act in ask nothing.
    assert drain_deadline_misses(bad, [40] * 30, delays, policy) == list(range(17, 30))
    skip = [m < 25 for m in range(30)]
    assert drain_deadline_misses(bad, [40] * 30, delays, policy, skip) == list(range(25, 30))


def test_a_target_failing_on_alternate_minutes_is_held_to_the_m_of_n_deadline_only_while_bad():
    from gameday.verdict import drain_deadline_misses
    from orchestrator.routing.policy import PolicyParams

    policy = PolicyParams()
    flapping = [m >= 10 and (m - 10) % 2 == 0 for m in range(30)]  # 10, 12, 14, ...: 14 confirms
    misses = drain_deadline_misses(flapping, [40] * 30, [2] * 30, policy)
    assert misses[0] == 21  # its run reads minute 18, with 14 and 16 confirmed before it
    assert all(flapping[m - 3] for m in misses)  # only minutes whose run reads a bad minute
    # One bad minute (an engine's death) confirms nothing.
    assert drain_deadline_misses([m == 10 for m in range(30)], [40] * 30, [2] * 30, policy) == []


def test_a_target_kept_above_the_floor_while_it_fails_is_a_violation():
    errors = {
        (m, "us-west-2"): {"shed_rps": 20.0, "served_rps": 80.0, "good_rps": 80.0} for m in range(10, 30)
    }
    faults = [{"kind": "serving_errors", "region": "us-west-2", "share": 0.2, "at": 10}]
    summary = judge(scenario(faults), day(changes=errors), RULES)
    assert any(
        v.startswith("us-west-2: weight above the floor") and "first at minute 17" in v
        for v in summary.violations
    ), summary.violations
    drained = {key: {**figures, "weight": 5} if key[0] >= 16 else figures for key, figures in errors.items()}
    summary = judge(scenario(faults), day(changes=drained), RULES)
    assert not any("weight above the floor" in v for v in summary.violations), summary.violations


def test_a_region_back_from_an_outage_offers_no_room_until_the_policys_return_and_must_be_back_by_it():
    """us-west-2 down in minutes 5-9. Back at 10 with room (capacity 200, offered 10), it cannot take
    us-east-2's excess until the policy's return: its first healthy minute read after the metrics delay
    (2), the 3 healthy runs the policy trusts it after, and a minute for DNS: minutes 10-15. us-east-2,
    offered 300 against 200 in minutes 10-17, sheds for want of a room nobody could route to until 16;
    from 16 those sheds are judged. And us-west-2 must be back in Route 53's answers by minute 16."""
    from gameday.verdict import return_minutes

    down = {"kind": "region_down", "region": "us-west-2", "at": 5, "until": 10}
    assert return_minutes(scenario([down]), RULES.policy) == 6
    gone = {"served_rps": 0.0, "good_rps": 0.0, "capacity_rps": 0.0, "down": True, "answer_share": 0.0}
    changes = {(m, "us-west-2"): dict(gone) for m in range(5, 10)}
    back = {"offered_rps": 10.0, "served_rps": 10.0, "good_rps": 10.0, "answer_share": 0.03}
    changes |= {(m, "us-west-2"): dict(back) for m in range(10, 30)}
    full = {
        (m, name): {"capacity_rps": 100.0} for m in range(10, 18) for name in ("us-east-1/1", "us-east-1/2")
    }
    changes |= full | {(m, "us-east-2"): dict(SHEDDING_A_THIRD) for m in range(10, 16)}
    summary = judge(scenario([down]), day(changes=changes), RULES)
    assert summary.verdict == "pass", summary.violations
    # Two minutes more of the same sheds, past the return: judged (us-west-2 had room for them).
    later = changes | {(m, "us-east-2"): dict(SHEDDING_A_THIRD) for m in range(16, 18)}
    summary = judge(scenario([down]), day(changes=later), RULES)
    assert summary.violations == (
        "us-east-2: SLO missed in 2 minutes outside its own faults' grace (first at minute 16)",
    )
    # Still out of the answers at minute 16: the allowance is not a free pass.
    absent = changes | {(16, "us-west-2"): {**back, "answer_share": 0.0}}
    summary = judge(scenario([down]), day(changes=absent), RULES)
    assert summary.violations == (
        "us-west-2: not back in Route 53's answers by minute 16, 6 minutes after its region_down ended "
        "(0.0% of them)",
    )


# A fleet's response to load as the twin's curves have it (gameday/serving.py), by hand: offered at its
# nominal capacity it admits 98.5%, and it serves at best 1.02 of it (`servable`) offered 1.5 times that.
CURVE = Curve(
    utilisation=(0.5, 0.9, 0.95, 1.0, 1.5, 2.0),
    ttft_p99_ms=(300.0,) * 6,
    slow_share=(0.0,) * 6,
    seconds_in_system=(5.0,) * 6,
    threshold_ms=1000.0,
    per_host_rps={"inf2.48xlarge": 10.0},
    admitted_share=(1.0, 1.0, 0.998, 0.985, 0.68, 0.51),
)


def on_the_curve(offered: float, capacity: float = 200.0) -> dict:
    """A target's figures offered `offered` requests/s with `capacity` within the objective, shedding at
    the edge what CURVE sheds at that load."""
    shed = offered * (1.0 - CURVE.admitted(offered / capacity * CURVE.servable))
    return {
        "offered_rps": offered,
        "served_rps": offered - shed,
        "good_rps": offered - shed,
        "shed_rps": shed,
        "overload_shed_rps": shed,
        "capacity_rps": capacity,
        "curve": CURVE,
    }


@settings(max_examples=60, deadline=None)
@given(level=st.floats(min_value=0.5, max_value=1.6))
def test_demand_split_evenly_sheds_as_the_fleets_curve_does_and_none_of_it_is_judged(level):
    """Every target offered the same share of its capacity: no routing could do better, so whatever the
    fleets' own curve sheds there is overload's, at any load. Before, a fleet at 95-100% of its capacity,
    where random arrivals already find every slot full now and then (about 1% offered exactly its
    capacity), had every shed judged while all the others had a few percent of room: a judge harder on a
    day at 98% than on one at 102%."""
    even = {(m, name): on_the_curve(level * 200.0) for m in range(30) for name in WEIGHTS}
    summary = judge(scenario(lost_requests=0, goodput=0.0), day(changes=even), RULES)
    assert summary.verdict == "pass", summary.violations


def test_a_target_beyond_the_even_split_by_more_than_a_unit_of_weight_is_judged_for_the_difference():
    """Three targets at 90% of their capacity and us-east-2 at 110%: 760 requests/s over 800 of capacity,
    an even split at 95%. A unit of weight (of the configured 100) carries 7.6 requests/s, 3.8% of a
    target's capacity: routing can place a target's share no closer than that, so us-east-2 is excused
    what its curve sheds at 98.8% of its capacity and judged the rest. Within a unit of the even split it
    is excused all."""
    from gameday.verdict import even_level, judged_lost_rps, unavoidable_share, weight_unit_rps

    rows = {name: on_the_curve(180.0) for name in WEIGHTS}
    rows["us-east-2"] = on_the_curve(220.0)
    [minute] = day(1, {(0, name): figures for name, figures in rows.items()})
    assert even_level(minute) == pytest.approx(0.95)
    assert weight_unit_rps(minute, 100) == pytest.approx(7.6)
    assert unavoidable_share(minute) == 0.0  # its 20 requests/s beyond its capacity fit in the others' room
    over = minute.cells["us-east-2"]
    allowed = 220.0 * (1.0 - CURVE.admitted((0.95 + 7.6 / 200) * CURVE.servable))
    assert 0 < allowed < over.overload_shed_rps
    assert judged_lost_rps(over, 0.0, 0.95, 7.6) == pytest.approx(over.overload_shed_rps - allowed)
    summary = judge(
        scenario(lost_requests=0, goodput=0.0),
        day(changes={(m, name): figures for m in range(30) for name, figures in rows.items()}),
        RULES,
    )
    assert "us-east-2: SLO missed in 30 minutes" in summary.violations[0]
    # Within a unit of the even split (0.95 + 3.8% of 200 = 197.6 requests/s), the others a little under it.
    near = {**{name: on_the_curve(188.0) for name in WEIGHTS}, "us-east-2": on_the_curve(196.0)}
    [minute] = day(1, {(0, name): figures for name, figures in near.items()})
    level = even_level(minute)
    assert level == pytest.approx(0.95) and minute.cells["us-east-2"].overload_shed_rps > 0
    assert all(
        judged_lost_rps(row, unavoidable_share(minute), level, weight_unit_rps(minute, 100)) == 0.0
        for row in minute.cells.values()
    )


def test_room_that_came_into_service_before_the_control_loop_can_see_it_is_not_room():
    """us-east-2 is offered 250 requests/s against 200 all day and every other target is full, until
    us-west-2's new tasks double its capacity at minute 10. Its tasks are in the metrics the run of minute
    13 reads (2 minutes late) and its weights reach every client at 14: until then no routing could have
    sent it us-east-2's excess. From minute 14 the room is there and us-east-2's sheds are judged."""
    full = {"offered_rps": 200.0, "capacity_rps": 200.0}
    shedding = {
        "offered_rps": 250.0,
        "served_rps": 200.0,
        "good_rps": 200.0,
        "shed_rps": 50.0,
        "overload_shed_rps": 50.0,
        "capacity_rps": 200.0,
    }
    changes = {}
    for m in range(30):
        for name in ("us-east-1/1", "us-east-1/2", "us-west-2"):
            changes[(m, name)] = full
        changes[(m, "us-east-2")] = shedding
        if m >= 10:
            changes[(m, "us-west-2")] = {**full, "capacity_rps": 400.0}
    summary = judge(scenario(lost_requests=0, goodput=0.0), day(changes=changes), RULES)
    assert summary.violations[0] == (
        "us-east-2: SLO missed in 16 minutes outside its own faults' grace (first at minute 14)"
    )
    assert summary.violations[1].startswith(f"{50 * 60 * 16:,} requests lost")
    # A scenario whose metrics come 4 minutes late gives the loop two minutes more.
    late = Scenario(**{**vars(scenario(lost_requests=0, goodput=0.0)), "metrics": Metrics(delay_minutes=4)})
    assert "first at minute 16" in judge(late, day(changes=changes), RULES).violations[0]


def test_a_target_that_scales_itself_into_overload_is_held_to_the_capacity_it_had():
    """us-east-2 serves 190 requests/s of its 200 while every other target is full; at minute 10 its
    scaling stops 2 tasks and leaves it 180: it sheds 10 a second from then on, with no room anywhere.
    Overload? No: it had the room and gave it up under demand that needed it, so until its capacity is
    back, those sheds are the system's (the scale-in cooldown at 60 s did this on after-midnight). A
    scale-in that leaves room for the minute's demand is ordinary: demand that grows past it later sheds
    as overload."""
    full = {"offered_rps": 200.0, "capacity_rps": 200.0}
    shed = {"served_rps": 180.0, "good_rps": 180.0, "shed_rps": 10.0, "overload_shed_rps": 10.0}
    changes = {}
    for m in range(30):
        for name in ("us-east-1/1", "us-east-1/2", "us-west-2"):
            changes[(m, name)] = full
        changes[(m, "us-east-2")] = {"offered_rps": 190.0, "capacity_rps": 200.0}
        if m >= 10:
            changes[(m, "us-east-2")] = {"offered_rps": 190.0, "capacity_rps": 180.0, **shed}
    changes[(10, "us-east-2")]["stopped"] = 2
    summary = judge(scenario(lost_requests=0, goodput=0.0), day(changes=changes), RULES)
    assert summary.violations[0] == (
        "us-east-2: SLO missed in 20 minutes outside its own faults' grace (first at minute 10)"
    )
    # Back to 200 at minute 20: from then on it is held to what it has.
    for m in range(20, 30):
        changes[(m, "us-east-2")] = {"offered_rps": 210.0, "capacity_rps": 200.0, **shed}
    summary = judge(scenario(lost_requests=0, goodput=0.0), day(changes=changes), RULES)
    assert summary.violations[0] == (
        "us-east-2: SLO missed in 10 minutes outside its own faults' grace (first at minute 10)"
    )
    # The same scale-in at 170 requests/s left it room: demand grown past it at minute 15 is overload.
    for m in range(10, 30):
        offered = 170.0 if m < 15 else 190.0
        changes[(m, "us-east-2")] = {
            "offered_rps": offered,
            "capacity_rps": 180.0,
            **(shed if m >= 15 else {}),
        }
    changes[(10, "us-east-2")]["stopped"] = 2
    assert judge(scenario(lost_requests=0, goodput=0.0), day(changes=changes), RULES).verdict == "pass"


def test_a_scale_in_that_meets_a_surge_its_metrics_could_not_show_yet_is_the_surges():
    """The same scale-in at minute 10, but the day's demand had risen since minute 7, the newest its
    scaling could have read (metrics 2 minutes late, a minute to act): it acted on a quieter day than the
    one it met. Its sheds are judged as any overload's, and here no target had room."""
    full = {"offered_rps": 200.0, "capacity_rps": 200.0}
    surging = {"offered_rps": 230.0, "capacity_rps": 200.0, "served_rps": 200.0, "good_rps": 200.0}
    surging |= {"shed_rps": 30.0, "overload_shed_rps": 30.0}
    shed = {"served_rps": 180.0, "good_rps": 180.0, "shed_rps": 20.0, "overload_shed_rps": 20.0}
    changes = {}
    for m in range(30):
        for name in ("us-east-1/1", "us-east-1/2"):
            changes[(m, name)] = surging if m >= 9 else full
        changes[(m, "us-west-2")] = full
        changes[(m, "us-east-2")] = full
        if m >= 10:
            changes[(m, "us-east-2")] = {"offered_rps": 200.0, "capacity_rps": 180.0, **shed}
    changes[(10, "us-east-2")]["stopped"] = 2
    summary = judge(scenario(lost_requests=0, goodput=0.0), day(changes=changes), RULES)
    assert summary.verdict == "pass", summary.violations
    # The same minutes with the surge a minute earlier than the scaling could not see either: still the
    # surge's. Seen (from minute 6 on, read at minute 10): the scale-in is the system's.
    for m in range(5, 9):
        for name in ("us-east-1/1", "us-east-1/2"):
            changes[(m, name)] = surging
    summary = judge(scenario(lost_requests=0, goodput=0.0), day(changes=changes), RULES)
    assert summary.violations[0].startswith("us-east-2: SLO missed in 20 minutes")
