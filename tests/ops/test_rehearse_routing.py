"""The rehearsal command: its output forms (table, one JSON object per minute, PNG) and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops.rehearse_routing import main

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios" / "routing"


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
            ["bad.yaml", "minutes[0] names ['us-west-2'], not in regions (us-east-1)"],
        ),
        (
            "regions: {us-east-1: {weight: 50}}\nminutes:\n"
            "  - us-east-1: {slow_first_token_share: 2, error_share: 0, healthy_hosts: 1, min_hosts: 1,"
            " serving_slots: 1, requests_in_flight: 0}\n",
            ["bad.yaml:3", "minutes[0].us-east-1.slow_first_token_share", "less than or equal to 1"],
        ),
        (
            "regions: {us-east-1: {wieght: 50}}\nminutes: []\n",
            ["bad.yaml:1", "regions.us-east-1.wieght", "unknown key"],
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
