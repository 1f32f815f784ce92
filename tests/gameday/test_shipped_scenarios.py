"""Every shipped scenario through the whole twin (real templates, the planner's simulator, the real
orchestrator handler on moto): its verdict and the figures the game-day issue asks of it."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from gameday.__main__ import main
from gameday.run import run_scenario

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios" / "gameday"
_results: dict[str, object] = {}


def result(name: str, tmp_path_factory: pytest.TempPathFactory):
    if name not in _results:
        png = tmp_path_factory.mktemp("png") / f"{name}.png"
        _results[name] = run_scenario(SCENARIOS / f"{name}.yaml", png=png)
        assert png.stat().st_size > 10_000
    return _results[name]


def series(run, region: str, field: str) -> list[float]:
    return [getattr(minute.regions[region], field) for minute in run.minutes]


def test_prime_day_holds_the_slo_all_day(tmp_path_factory):
    run = result("prime-day", tmp_path_factory)
    assert run.summary.verdict == "pass", run.summary.violations
    assert run.summary.slo_minutes_violated == {"us-east-1": 0, "us-west-2": 0, "us-east-2": 0}
    assert run.summary.requests_lost == 0


def test_region_loss_at_peak_moves_traffic_off_within_5_minutes_and_back(tmp_path_factory):
    run = result("region-loss-at-peak", tmp_path_factory)
    assert run.summary.verdict == "pass", run.summary.violations
    fault = run.scenario.faults[0]
    shares = series(run, "us-east-1", "answer_share")
    assert max(shares[fault.at + 5 : fault.until]) < 0.01
    for survivor in ("us-west-2", "us-east-2"):
        ttft = series(run, survivor, "ttft_p99_ms")[fault.at + 15 : fault.until]
        errors = series(run, survivor, "error_share")[fault.at + 15 : fault.until]
        assert max(ttft) <= 1000 and max(errors) <= 0.01
    assert series(run, "us-east-1", "weight")[-1] >= 25


def test_unplanned_surge_adds_hosts_in_steps_minutes_apart(tmp_path_factory):
    run = result("unplanned-surge", tmp_path_factory)
    assert run.summary.verdict == "pass", run.summary.violations
    hosts = series(run, "us-east-1", "hosts")
    steps = [m for m in range(1, len(hosts)) if hosts[m] > hosts[m - 1]]
    assert len(steps) >= 2
    assert max(b - a for a, b in itertools.pairwise(steps)) < 20


@pytest.mark.xfail(
    strict=True,
    reason="after the reliability fixes 10% dead engines still drain the region: their requests fail for the "
    "3 minutes the HTTP target group takes to mark them unhealthy, which is 2 of 2 minutes above the 1% "
    "routing error alarm that both the region's Route 53 health check and the region-unfit composite follow",
)
def test_engine_deaths_take_hosts_out_of_rotation_not_the_region(tmp_path_factory):
    run = result("engine-deaths", tmp_path_factory)
    assert run.summary.verdict == "pass", run.summary.violations
    fault = run.scenario.faults[0]
    tasks = series(run, "us-west-2", "tasks")
    assert min(tasks[fault.at :]) <= math.floor(tasks[fault.at - 1] * 0.9) + 1  # they left rotation
    assert tasks[-1] >= tasks[fault.at - 1]  # and were replaced
    assert min(series(run, "us-west-2", "weight")[fault.at :]) > 5
    assert all(series(run, "us-west-2", "healthy"))


def test_orchestrator_faults_never_overstep_or_drain(tmp_path_factory):
    run = result("orchestrator-faults", tmp_path_factory)
    assert run.summary.verdict == "pass", run.summary.violations
    for region in ("us-east-1", "us-west-2", "us-east-2"):
        weights = series(run, region, "weight")
        assert max(abs(b - a) for a, b in itertools.pairwise(weights)) <= 10
        assert min(weights) > 5


def test_event_end_loses_no_large_share_of_tasks_in_any_minute(tmp_path_factory):
    run = result("event-end", tmp_path_factory)
    assert run.summary.verdict == "pass", run.summary.violations
    for region in ("us-east-1", "us-west-2", "us-east-2"):
        assert max(series(run, region, "stopped_share")) <= 0.1


def test_json_output_is_one_object_per_minute_then_the_summary(tmp_path, capsys):
    path = tmp_path / "short.yaml"
    path.write_text(
        (SCENARIOS / "engine-deaths.yaml")
        .read_text()
        .replace("minutes: 90", "minutes: 6")
        .replace("../../config", str(REPO / "config"))
        .replace("at: 20", "at: 2")
    )
    status = main([str(path), "--json", "--png", str(tmp_path / "short.png")])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["minute"] for line in lines[:-1]] == list(range(6))
    keys = {"offered_rps", "served_rps", "shed_rps", "weight", "hosts", "tasks", "ttft_p99_ms", "error_share"}
    assert all(set(region) == keys for line in lines[:-1] for region in line["regions"].values())
    assert any("engine_deaths" in event for event in lines[2]["events"])
    summary = lines[-1]["summary"]
    assert set(summary) == {"verdict", "violations", "slo_minutes_violated", "requests_lost"}
    assert status == (0 if summary["verdict"] == "pass" else 1)
