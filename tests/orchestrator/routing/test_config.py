"""The orchestrator's config survives the trip through the Lambda's environment."""

from __future__ import annotations

from pathlib import Path

from orchestrator.routing.config import parse_config
from settings import load_settings
from stacks.routing_names import orchestrator_config

REPO = Path(__file__).resolve().parents[3]


def test_round_trip_through_json():
    config = orchestrator_config(load_settings(REPO / "config" / "default.yaml"))
    assert parse_config(config.to_json()) == config
    assert config.budget == 100
    assert [r.name for r in config.regions] == ["us-east-1", "us-west-2", "us-east-2"]
