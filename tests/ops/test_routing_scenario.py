"""Every shipped routing scenario replayed through the real policy: what each one must show."""

from __future__ import annotations

from pathlib import Path

from ops.routing_scenario import drains, load_scenario, replay
from settings import load_settings
from stacks.routing_names import policy_params

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios" / "routing"
PARAMS = policy_params(load_settings(REPO / "config" / "default.yaml"))


def weights(name: str, region: str) -> list[int]:
    return [m.decision.weights[region] for m in replay(load_scenario(SCENARIOS / f"{name}.yaml"), PARAMS)]


def test_every_shipped_scenario_is_tested_here():
    shipped = {path.stem for path in SCENARIOS.glob("*.yaml")}
    assert shipped == {"degrade-and-recover", "flapping", "missing-metrics", "all-bad", "missing-minutes"}


def test_degraded_region_reaches_its_floor_within_three_runs_and_recovers():
    minutes = replay(load_scenario(SCENARIOS / "degrade-and-recover.yaml"), PARAMS)
    (drain,) = drains(minutes, PARAMS)
    assert (drain.region, drain.first_bad_minute) == ("us-east-1", 10)
    assert drain.runs is not None and drain.runs <= 3
    east = [m.decision.weights["us-east-1"] for m in minutes]
    assert east[10] == east[9]  # the first bad minute alone moves nothing
    assert all(weight == PARAMS.floor for weight in east[drain.floor_minute : 40])
    # Healthy again from minute 40: it waits healthy_runs_to_recover runs, then gains a bounded step a run.
    assert east[40 + PARAMS.healthy_runs_to_recover - 2] == PARAMS.floor
    assert east[40 + PARAMS.healthy_runs_to_recover - 1] == PARAMS.floor + PARAMS.gain_step
    assert east[-1] > 40
    # While it is drained, the others carry the traffic.
    assert minutes[20].decision.weights["us-west-2"] > minutes[9].decision.weights["us-west-2"]


def test_a_region_bad_for_single_minutes_is_never_drained():
    minutes = replay(load_scenario(SCENARIOS / "flapping.yaml"), PARAMS)
    assert drains(minutes, PARAMS) == []
    west = [m.decision.weights["us-west-2"] for m in minutes]
    assert min(west[3:]) >= west[2]


def test_missing_metrics_hold_that_regions_weight():
    east2 = weights("missing-metrics", "us-east-2")
    assert len(set(east2[4:20])) == 1


def test_every_region_bad_keeps_the_last_weights():
    minutes = replay(load_scenario(SCENARIOS / "all-bad.yaml"), PARAMS)
    held = [m.decision.weights for m in minutes[4:15]]
    assert all(w == held[0] for w in held)
    assert "every region looks bad" in minutes[8].decision.reason
