"""Every shipped routing scenario replayed through the real policy: what each one must show."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.routing_replay import replay
from ops.routing_scenario import drains, load_scenario
from settings import load_settings
from settings.loader import ConfigError
from stacks.routing_names import policy_params

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios" / "routing"
PARAMS = policy_params(load_settings(REPO / "config" / "default.yaml"))


def weights(name: str, region: str) -> list[int]:
    return [m.decision.weights[region] for m in replay(load_scenario(SCENARIOS / f"{name}.yaml"), PARAMS)]


def test_every_shipped_scenario_is_tested_here():
    shipped = {path.stem for path in SCENARIOS.glob("*.yaml")}
    assert shipped == {
        "degrade-and-recover",
        "flapping",
        "missing-metrics",
        "all-bad",
        "missing-minutes",
        "cell-drain",
    }


def test_a_bad_cell_is_drained_without_draining_its_region():
    """cell-drain.yaml: us-east-1/1 fails from minute 10 to 29. It reaches the floor within drain_runs runs,
    its sibling takes its weight the same run, us-east-1 as a whole never nears the floor, and the cell
    regains weight once it has been healthy long enough."""
    minutes = replay(load_scenario(SCENARIOS / "cell-drain.yaml"), PARAMS)
    cell = [m.decision.weights["us-east-1/1"] for m in minutes]
    sibling = [m.decision.weights["us-east-1/2"] for m in minutes]
    assert cell[10 + PARAMS.drain_runs - 1] == PARAMS.floor
    assert all(weight == PARAMS.floor for weight in cell[12:30])
    assert sibling[11] >= sibling[9] + (cell[9] - cell[11]) - PARAMS.gain_step
    region = [c + s for c, s in zip(cell, sibling, strict=True)]
    assert min(region[10:30]) > 3 * PARAMS.floor
    assert all(d.region != "us-east-1" for m in minutes for d in m.decision.regions)
    assert cell[-1] > PARAMS.floor


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
    assert east[-1] > PARAMS.floor + PARAMS.gain_step  # and keeps gaining
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


# ---- the file format: repeat, ranges and errors ---------------------------------------------------

FINE = (
    "{slow_first_token_share: 0.002, error_share: 0, healthy_hosts: 4, min_hosts: 1, serving_slots: 8, "
    "requests_in_flight: 2}"
)
# Slow first tokens and failed requests: the failures make it bad (slow first tokens alone never do).
SLOW = FINE.replace("0.002", "0.2").replace("error_share: 0,", "error_share: 0.2,")
CONFIG_REGIONS = ("us-east-1", "us-west-2", "us-east-2")


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as error:
        load_scenario(written(tmp_path, text), CONFIG_REGIONS, "config/default.yaml")
    return str(error.value).splitlines()


def test_repeat_stands_for_that_many_minutes_in_a_row(tmp_path):
    text = (
        "regions: {us-east-1: {weight: 50}, us-west-2: {weight: 50}}\nminutes:\n"
        f"  - {{us-east-1: {FINE}, us-west-2: {FINE}, repeat: 3}}\n"
        f"  - us-east-1: {SLOW}\n    repeat: 2\n"
        f"  - {{us-east-1: {FINE}}}\n"
    )
    scenario = load_scenario(written(tmp_path, text))
    assert len(scenario.minutes) == 6
    assert [set(minute) for minute in scenario.minutes] == [{"us-east-1", "us-west-2"}] * 3 + [
        {"us-east-1"}
    ] * 3
    assert [m["us-east-1"].slow_first_token_share for m in scenario.minutes] == [0.002] * 3 + [0.2] * 2 + [
        0.002
    ]


def test_ranges_cover_minutes_in_any_order_and_replay_like_the_list_they_stand_for(tmp_path):
    ranged = (
        "regions: {us-east-1: {weight: 50}, us-west-2: {weight: 50}}\nminutes:\n"
        f"  10-19: {{us-east-1: {FINE}, us-west-2: {FINE}}}\n"
        f"  0-4: {{us-east-1: {FINE}, us-west-2: {FINE}}}\n"
        f"  5-9: {{us-east-1: {SLOW}, us-west-2: {FINE}}}\n"
        f"  20: {{us-west-2: {FINE}}}\n"
    )
    listed = (
        "regions: {us-east-1: {weight: 50}, us-west-2: {weight: 50}}\nminutes:\n"
        + f"  - {{us-east-1: {FINE}, us-west-2: {FINE}}}\n" * 5
        + f"  - {{us-east-1: {SLOW}, us-west-2: {FINE}}}\n" * 5
        + f"  - {{us-east-1: {FINE}, us-west-2: {FINE}}}\n" * 10
        + f"  - {{us-west-2: {FINE}}}\n"
    )
    from_ranges = load_scenario(written(tmp_path, ranged))
    from_list = load_scenario(written(tmp_path, listed))
    assert from_ranges == from_list and len(from_ranges.minutes) == 21
    assert [m.decision for m in replay(from_ranges, PARAMS)] == [
        m.decision for m in replay(from_list, PARAMS)
    ]
    assert drains(replay(from_ranges, PARAMS), PARAMS)[0].first_bad_minute == 5


def test_a_region_the_config_does_not_deploy_is_refused_at_its_line(tmp_path):
    text = (
        "regions:\n  us-east-1: {weight: 50}\n  eu-west-1: {weight: 50}\n"
        f"minutes:\n  - {{us-east-1: {FINE}}}\n"
    )
    (problem,) = problems(tmp_path, text)
    assert problem == (
        f"{tmp_path / 'scenario.yaml'}:3: regions.eu-west-1: eu-west-1 is not a region of "
        "config/default.yaml (us-east-1, us-west-2, us-east-2); rehearse with the config that deploys it "
        "(CONFIG=...)"
    )


def test_field_and_cross_field_mistakes_are_reported_together_in_plain_words(tmp_path):
    text = (
        "regions: {us-east-1: {weight: 50}}\n"
        "minutes:\n"
        f"  - us-east-1: {FINE.replace('slow_first_token_share', 'slow_first_token_shares')}\n"
        f"  - us-east-1: {FINE.replace('error_share: 0', 'error_share: 2')}\n"
        f"    repeat: 0\n"
        f"  - us-west-2: {FINE}\n"
    )
    found = problems(tmp_path, text)
    path = tmp_path / "scenario.yaml"
    assert f"{path}:3: minutes[0].us-east-1.slow_first_token_shares: unknown key; did you mean " in "\n".join(
        found
    )
    assert "'slow_first_token_share'?" in "\n".join(found)
    assert f"{path}:4: minutes[1].us-east-1.error_share: must be less than or equal to 1, got 2" in found
    assert f"{path}:5: minutes[1].repeat: must be a whole number of minutes, 1 to 10080, got 0" in found
    assert f"{path}:6: minutes[2].us-west-2: us-west-2 is not in this scenario's regions (us-east-1)" in found
    assert not any("Input should" in problem for problem in found)
    lines = [int(problem.split(":")[1]) for problem in found]
    assert lines == sorted(lines)


@pytest.mark.parametrize(
    ("minutes", "expected"),
    [
        (
            f"  0-4: {{us-east-1: {FINE}}}\n  8-9: {{us-east-1: {FINE}}}\n",
            ":4: minutes.8-9: no entry for minute(s) 5-7 before it",
        ),
        (f"  1-4: {{us-east-1: {FINE}}}\n", ":3: minutes.1-4: no entry for minute(s) 0 before it"),
        (
            f"  0-4: {{us-east-1: {FINE}}}\n  3: {{us-east-1: {FINE}}}\n",
            ":4: minutes.3: overlaps minute(s) already covered (up to 4)",
        ),
        (
            f"  4-2: {{us-east-1: {FINE}}}\n",
            ":3: minutes.4-2: must be a minute (7) or a range of minutes (0-9)",
        ),
        (
            f"  0-9: {{us-east-1: {FINE}, repeat: 2}}\n",
            ":3: minutes.0-9.repeat: a range says how many minutes; repeat is for list entries",
        ),
        ("  0-99999: {}\n", ":2: minutes: stands for 100000 minutes, more than 10080"),
    ],
)
def test_range_mistakes_name_the_range(tmp_path, minutes, expected):
    found = problems(tmp_path, "regions: {us-east-1: {weight: 50}}\nminutes:\n" + minutes)
    assert any(expected in problem for problem in found), found


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("regions: {us-east-1: {weight: 50}}\n", ":1: minutes: required key is missing"),
        ("regions: {us-east-1: {weight: 50}}\nminutes: []\n", ":2: minutes: has no minutes"),
        ("regions: {us-east-1: {weight: 50}}\nminutes: 7\n", ":2: minutes: must be a list of minute entries"),
        (
            f"regions: {{us-east-1: {{weight: 0}}}}\nminutes:\n  - {{us-east-1: {FINE}}}\n",
            ":1: regions: every region has weight 0",
        ),
        (
            "region: {us-east-1: {weight: 5}}\nminutes:\n  - {}\n",
            ":1: region: unknown key; did you mean 'regions'?",
        ),
    ],
)
def test_top_level_mistakes(tmp_path, text, expected):
    found = problems(tmp_path, text)
    assert any(expected in problem for problem in found), found
