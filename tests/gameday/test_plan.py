"""The plan the verdict holds a target to: the config's event schedule on time, per cell."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from gameday.plan import planned_hosts
from settings import load_settings

REPO = Path(__file__).resolve().parents[2]
START = datetime.fromisoformat("2027-07-08T00:00:00-07:00")  # config/prime-day.yaml's event


def test_the_plan_is_the_events_minimum_from_its_start_to_its_end_split_over_cells():
    settings = load_settings(REPO / "config" / "prime-day.yaml")
    # us-east-2 runs one cell (us-east-1 and us-west-2 two each).
    during = planned_hosts(settings, "us-east-2", START)
    assert during == {"inf2.48xlarge": 162, "trn1.32xlarge": 81}
    # Before the start the raise may be under way, but the plan promises only the fleet's own minimum.
    before = planned_hosts(settings, "us-east-2", START - timedelta(minutes=1))
    own = {f.instance_type: f.min for f in settings.regions["us-east-2"].fleets}
    assert before == own and before != during
    assert planned_hosts(settings, "us-east-2", START + timedelta(days=2)) == own  # the end restores it
    # us-east-1 runs two cells: each is held to its share of the region's event minimum.
    cells = [planned_hosts(settings, f"us-east-1/{index}", START) for index in (1, 2)]
    assert [c["inf2.48xlarge"] for c in cells] == [145, 144]
    assert sum(c["trn1.32xlarge"] for c in cells) == 144
