"""A scenario's neighbours (gameday/variants.py): the same day with its traffic scaled, runnable from any
folder."""

from __future__ import annotations

from pathlib import Path

from gameday.scenario import load_scenario
from gameday.variants import write_scaled

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "gameday" / "event-starts-early.yaml"


def test_a_neighbour_scales_every_traffic_point_and_loads_from_elsewhere(tmp_path):
    original, _, config = load_scenario(SCENARIO)
    neighbour, _, neighbour_config = load_scenario(write_scaled(SCENARIO, 1.03, tmp_path))
    assert neighbour_config.resolve() == config.resolve()
    for region, points in original.traffic.items():
        assert [m for m, _ in neighbour.traffic[region]] == [m for m, _ in points]
        assert [rps for _, rps in neighbour.traffic[region]] == [rps * 1.03 for _, rps in points]
    # Everything else is the day as it was.
    assert neighbour.model_copy(update={"traffic": original.traffic, "config": original.config}) == original
