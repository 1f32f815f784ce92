"""The rehearsal command: its output forms (table, one JSON object per minute, PNG) and its errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ops.rehearse_routing import BAD, MISSING, main, plot, region_states, runs_of
from ops.routing_replay import replay
from ops.routing_scenario import load_scenario
from settings import load_settings
from stacks.routing_names import policy_params

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios" / "routing"
PARAMS = policy_params(load_settings(REPO / "config" / "default.yaml"))


def test_json_prints_one_object_per_minute(capsys, tmp_path):
    assert main([str(SCENARIOS / "flapping.yaml"), "--json", "--png", str(tmp_path / "plot.png")]) == 0
    out = capsys.readouterr().out.splitlines()
    objects = [json.loads(line) for line in out]
    assert [o["minute"] for o in objects] == list(range(30))
    assert set(objects[0]) == {"minute", "weights", "reason"}
    assert set(objects[0]["weights"]) == {"us-east-1", "us-west-2", "us-east-2"}
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_table_shows_weights_reasons_and_the_runs_to_the_floor(capsys, tmp_path):
    assert main([str(SCENARIOS / "degrade-and-recover.yaml"), "--png", str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    assert "us-east-1 degraded" in out
    assert "us-east-1: bad from minute 10, at the floor (5) in minute 11: 2 runs" in out


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (
            "regions: {us-east-1: {weight: 50}}\nminutes:\n"
            "  - us-west-2: {slow_first_token_share: 0, error_share: 0, healthy_hosts: 1, min_hosts: 1,"
            " serving_slots: 1, requests_in_flight: 0}\n",
            ["bad.yaml:3", "minutes[0].us-west-2: us-west-2 is not in this scenario's regions (us-east-1)"],
        ),
        (
            "regions: {us-east-1: {weight: 50}}\nminutes:\n"
            "  - us-east-1: {slow_first_token_share: 2, error_share: 0, healthy_hosts: 1, min_hosts: 1,"
            " serving_slots: 1, requests_in_flight: 0}\n",
            [
                "bad.yaml:3",
                "minutes[0].us-east-1.slow_first_token_share",
                "must be less than or equal to 1, got 2",
            ],
        ),
        (
            "regions: {us-east-1: {wieght: 50}}\nminutes: []\n",
            [
                "bad.yaml:1",
                "regions.us-east-1.wieght",
                "unknown key; did you mean 'weight'?",
                "has no minutes",
            ],
        ),
        (
            "regions: {us-east-1: {weight: 50}, ap-south-1: {weight: 5}}\nminutes:\n"
            "  - us-east-1: {slow_first_token_share: 0, error_share: 0, healthy_hosts: 1, min_hosts: 1,"
            " serving_slots: 1, requests_in_flight: 0}\n",
            [
                "bad.yaml:1: regions.ap-south-1: ap-south-1 is not a region of config/default.yaml "
                "(us-east-1, us-west-2, us-east-2)"
            ],
        ),
    ],
)
def test_a_bad_scenario_names_file_line_and_key(tmp_path, capsys, text, fragments):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert main([str(bad)]) == 1
    error = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in error
    assert "Traceback" not in error


def test_the_table_fits_120_columns_even_on_a_wider_terminal(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert main([str(SCENARIOS / "degrade-and-recover.yaml"), "--png", str(tmp_path / "p.png")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 120
    assert any("degrade-and-recover.yaml" in line for line in lines[:2])  # the title names the scenario
    assert re.search(r"us-east-2 healthy: \d+->\d+ \(utilisation", "".join(lines))  # wrapped, not cut


def test_the_table_marks_minutes_without_metrics(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    assert main([str(SCENARIOS / "missing-metrics.yaml"), "--png", str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\d+\?", out) and "? = no metrics" in out


def minutes_of(name: str):
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    return scenario, replay(scenario, PARAMS)


def test_region_states_as_the_policy_saw_them():
    _, missing = minutes_of("missing-metrics")
    states = region_states(missing)
    assert runs_of(states["us-east-2"], MISSING) == [(5, 15)]
    assert runs_of(states["us-east-1"], MISSING) == runs_of(states["us-east-1"], BAD) == []
    _, flapping = minutes_of("flapping")
    bad = runs_of(region_states(flapping)["us-west-2"], BAD)
    assert bad and all(length == 1 for _, length in bad)


def test_the_plot_names_the_scenario_and_shades_bad_and_missing_runs():
    for name in ("flapping", "missing-metrics"):
        scenario, minutes = minutes_of(name)
        figure = plot(f"{name}.yaml", scenario, minutes, PARAMS)
        weights_axes, state_axes = figure.axes
        assert weights_axes.get_title().startswith(f"{name}.yaml")
        # one lane per region, and a shaded bar for each of its bad or missing runs
        assert len(state_axes.get_yticklabels()) == len(scenario.regions)
        shaded = sum(len(collection.get_paths()) for collection in state_axes.collections)
        states = region_states(minutes)
        assert shaded == sum(len(runs_of(s, BAD)) + len(runs_of(s, MISSING)) for s in states.values())
        assert shaded > 0


def test_regions_with_equal_weights_stay_apart(tmp_path):
    figures = (
        "{slow_first_token_share: 0, error_share: 0, healthy_hosts: 4, min_hosts: 1, serving_slots: 8, "
        "requests_in_flight: 2}"
    )
    path = tmp_path / "twins.yaml"
    path.write_text(
        "regions: {us-east-1: {weight: 30}, us-west-2: {weight: 30}, us-east-2: {weight: 30}}\nminutes:\n"
        f"  0-9: {{us-east-1: {figures}, us-west-2: {figures}, us-east-2: {figures}}}\n"
    )
    scenario = load_scenario(path)
    minutes = replay(scenario, PARAMS)
    assert len(set(minutes[-1].decision.weights.values())) == 1
    lines = plot("twins.yaml", scenario, minutes, PARAMS).axes[0].get_lines()[:3]
    assert len({tuple(line.get_ydata()) for line in lines}) == 3
    assert len({line.get_linestyle() for line in lines}) == 3
    assert len({line.get_marker() for line in lines}) == 3


def test_pngs_of_different_scenarios_differ(tmp_path):
    for name in ("flapping", "missing-metrics"):
        assert main([str(SCENARIOS / f"{name}.yaml"), "--json", "--png", str(tmp_path / f"{name}.png")]) == 0
    assert (tmp_path / "flapping.png").read_bytes() != (tmp_path / "missing-metrics.png").read_bytes()
