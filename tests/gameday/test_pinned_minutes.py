"""A short day through the whole twin, pinned minute by minute (syrupy): a change meant to make the game
day faster (bench/gameday_speed.py) must leave every figure of every minute as it was. A change meant to
alter the day updates the pin with `--snapshot-update`, and its diff shows which minutes moved."""

from __future__ import annotations

from pathlib import Path

from gameday.run import run_scenario

REPO = Path(__file__).resolve().parents[2]

# Prime-day's fleet and cells at the peak, with every kind of fault the orchestrator's calls see (duplicate
# deliveries, CloudWatch and SSM failing, late metrics) and some the serving side does.
DAY = """\
config: {config}
start: "2027-07-08T12:00:00-07:00"
minutes: 30
traffic:
  us-east-1: [[0, 2400], [30, 2500]]
  us-west-2: [[0, 1450], [30, 1500]]
  us-east-2: [[0, 950], [30, 1000]]
faults:
  - {{kind: duplicate_runs, at: 2, until: 6}}
  - {{kind: api_errors, service: cloudwatch, at: 8, until: 11}}
  - {{kind: api_errors, service: ssm, at: 12, until: 14}}
  - {{kind: engine_deaths, region: us-west-2, share: 0.2, at: 15}}
  - {{kind: metrics_delay, minutes: 2, at: 18, until: 22}}
  - {{kind: region_down, region: us-east-1/2, at: 22, until: 27}}
"""


def test_a_short_day_is_pinned_minute_by_minute(tmp_path, snapshot):
    path = tmp_path / "short-day.yaml"
    path.write_text(DAY.format(config=REPO / "config" / "prime-day.yaml"))
    result = run_scenario(path)
    assert [minute.public(with_cells=True) for minute in result.minutes] == snapshot
    assert result.summary.public() == snapshot
