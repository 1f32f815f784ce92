"""The scenario format: a mistake is a 'file:line: key: problem' line and exit status 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from gameday.__main__ import main
from gameday.scenario import load_scenario
from settings.loader import ConfigError

REPO = Path(__file__).resolve().parents[2]
GOOD = f"""\
config: {REPO / "config" / "prime-day.yaml"}
start: "2027-07-08T00:00:00-07:00"
minutes: 30
traffic:
  us-east-1: [[0, 900], [20, 2500]]
"""

CASES = [
    (GOOD.replace("minutes: 30", "minutes: 0"), ":3: minutes: must be greater than or equal to 1, got 0"),
    (GOOD.replace('-07:00"', '"'), ":2: start: needs an offset"),
    (GOOD.replace("[[0, 900], [20, 2500]]", "[[20, 900], [0, 2500]]"), ":4: traffic: us-east-1: the points"),
    (GOOD + "faults:\n  - {kind: region_gone, region: us-east-1, at: 3}\n", ":7: faults[0]"),
    (
        GOOD + "faults:\n  - {kind: region_down, region: us-east-1, at: 9, until: 4}\n",
        "until (4) must be after",
    ),
    (GOOD + "faults:\n  - {kind: api_errors, service: lambda, at: 3}\n", ":7: faults[0].api_errors.service"),
    (
        GOOD + "dns: {ttl_seconds: 60, stale: 0.1}\n",
        ":6: dns.stale: unknown key; did you mean 'stale_share'?",
    ),
    (GOOD.replace("config: ", "config: missing-"), ":1: config: file"),
]


@pytest.mark.parametrize(("text", "message"), CASES)
def test_a_bad_scenario_names_file_line_and_key(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_scenario(path)
    assert f"{path}" in str(raised.value) and message in str(raised.value)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("  eu-west-9: [[0, 10]]\n", ":6: traffic.eu-west-9: not a region of"),
        (
            "faults:\n  - {kind: capacity_shortage, region: us-east-2, instance_type: trn2.48xlarge, "
            "at: 0}\n",
            "instance_type: us-east-2 has no trn2.48xlarge fleet",
        ),
        # us-east-1 and us-west-2 run 2 cells in this config, us-east-2 one: a fault names a region or a
        # real cell.
        (
            "faults:\n  - {kind: region_down, region: us-east-1/3, at: 0}\n",
            ":7: faults[0].region: not a region or cell of",
        ),
        (
            "faults:\n  - {kind: engine_deaths, region: us-east-2/1, share: 0.1, at: 0}\n",
            ":7: faults[0].region: not a region or cell of",
        ),
        (
            "faults:\n  - {kind: capacity_shortage, region: us-east-1/2, instance_type: trn2.48xlarge, "
            "at: 0}\n",
            "instance_type: us-east-1/2 has no trn2.48xlarge fleet",
        ),
    ],
)
def test_a_scenario_that_does_not_fit_its_config_exits_2(tmp_path, capsys, extra, message):
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD + extra)
    assert main([str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    assert captured.out == ""


def test_traffic_is_linear_between_points_and_flat_beyond(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(GOOD)
    scenario, _, config = load_scenario(path)
    assert config.name == "prime-day.yaml"
    assert scenario.offered("us-east-1", 10) == pytest.approx(1700)
    assert scenario.offered("us-east-1", 25) == 2500
    assert scenario.offered("us-west-2", 5) == 0


def test_a_fault_may_name_a_cell_of_a_region_of_several(tmp_path):
    from gameday.run import check_against_config
    from settings import load_settings

    path = tmp_path / "ok.yaml"
    path.write_text(GOOD + "faults:\n  - {kind: region_down, region: us-east-1/2, at: 0, until: 5}\n")
    scenario, document, config = load_scenario(path)
    check_against_config(scenario, document, load_settings(config), config)  # raises on a problem


def test_serving_errors_that_flap_strike_on_alternate_minutes_from_their_start():
    from gameday.scenario import ServingErrors

    fault = ServingErrors(kind="serving_errors", region="us-west-2", share=0.5, every=2, at=20, until=26)
    assert [m for m in range(18, 30) if fault.striking(m)] == [20, 22, 24]
    steady = ServingErrors(kind="serving_errors", region="us-west-2", share=0.5, at=3, until=5)
    assert [m for m in range(0, 8) if steady.striking(m)] == [3, 4]


DEPLOY_CASES = [
    (
        "deploys:\n  - {kind: deploy, at: 5, change: kernel}\n",
        ":7: deploys[0].change: ",
    ),
    (
        "deploys:\n  - {kind: deploy, at: 5, change: image, revision: {errors: 0.1, slower: 2}}\n",
        "one of errors, slower, crashes at most, got errors, slower",
    ),
    (
        "deploys:\n  - {kind: deploy, at: 5, change: image, revision: {errors: 1.5}}\n",
        ":7: deploys[0].revision.errors: ",
    ),
    (
        "deploys:\n  - {kind: deploy, at: 5, change: image, revision: {slower: 0.5}}\n",
        ":7: deploys[0].revision.slower: ",
    ),
    (
        "deploys:\n  - {kind: deploy, at: 5, change: new_cell}\n",
        "a new_cell deploy names its `cell`",
    ),
    (
        "deploys:\n  - {kind: deploy, at: 5, change: image, cell: us-east-1/2}\n",
        "`cell` is for a new_cell deploy",
    ),
    (
        "deploys:\n  - {kind: deploy, at: 5, change: config, revision: {crashes: true}}\n",
        "a config change has no tasks of a new revision",
    ),
    (
        "deploys:\n  - {kind: deploy, at: 9, change: image}\n  - {kind: deploy, at: 5, change: image}\n",
        ":6: deploys: one deploy at a time, in order of their minutes, got [9, 5]",
    ),
    (
        "deploys:\n  - {kind: deploy, at: 5, change: image, revison: {}}\n",
        ":7: deploys[0].revison: unknown key; did you mean 'revision'?",
    ),
    ("day_zero: yes please\n", ":6: day_zero: "),
]


@pytest.mark.parametrize(("extra", "message"), DEPLOY_CASES)
def test_a_bad_deploy_names_file_line_and_key(tmp_path, extra, message):
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD + extra)
    with pytest.raises(ConfigError) as raised:
        load_scenario(path)
    assert f"{path}" in str(raised.value) and message in str(raised.value)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("deploys:\n  - {kind: deploy, at: 30, change: image}\n", ":7: deploys[0].at: after the scenario's"),
        (
            "deploys:\n  - {kind: deploy, at: 3, change: new_cell, cell: us-east-2/2}\n",
            ":7: deploys[0].cell: not a cell of",
        ),
        (
            "deploys:\n  - {kind: deploy, at: 1, change: image}\n"
            "  - {kind: deploy, at: 3, change: new_cell, cell: us-east-1/2}\n",
            ":8: deploys[1].change: a new cell is created by the day's first deploy",
        ),
        ("day_zero: true\n", ":6: day_zero: a day from an empty account is not run by the game day yet"),
        (
            "day_zero: true\ndeploys:\n  - {kind: deploy, at: 3, change: new_cell, cell: us-east-1/2}\n",
            ":8: deploys[0].change: day zero creates every cell of",
        ),
    ],
)
def test_a_deploy_that_does_not_fit_its_config_exits_2(tmp_path, capsys, extra, message):
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD + extra)
    assert main([str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err


def test_a_deploy_defaults_to_a_good_revision(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(GOOD + "deploys:\n  - {kind: deploy, at: 5, change: image}\n")
    scenario, _, _ = load_scenario(path)
    (deploy,) = scenario.deploys
    assert deploy.revision.good and deploy.revision.speed == 1.0 and not scenario.day_zero
    slow = deploy.revision.model_copy(update={"slower": 2.0})
    assert not slow.good and slow.speed == 0.5
