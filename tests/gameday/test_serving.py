"""The per-fleet curves against a direct simulation of a whole fleet with the planner's simulator."""

from __future__ import annotations

import pytest

from gameday.serving import derive, measure, per_host_rps
from planner.demand import Demand
from planner.profiles import load_profiles
from planner.simulate import HostGroup, LogNormal


@pytest.fixture(scope="module")
def fleet():
    profiles = load_profiles()
    templates = [
        HostGroup("inf2.48xlarge", profiles[("inf2.48xlarge", 8)].engine(32), 3, 0),
        HostGroup("trn1.32xlarge", profiles[("trn1.32xlarge", 8)].engine(32), 4, 0),
    ]
    demand = Demand(LogNormal.fit(900, 3000), LogNormal.fit(250, 900), 900, 250, 8191, 1024)
    return templates, demand, derive(templates, [20, 10], demand, 1000.0)


@pytest.mark.parametrize("utilisation", [0.5, 0.8])
def test_the_curve_matches_a_direct_simulation_of_a_larger_fleet(fleet, utilisation):
    """A slice of 12 hosts stands for the fleet: a fleet of 30 pools better, so the curve may err high
    (towards caution) but not by much, and never low by more than the simulation's own noise."""
    templates, demand, curve = fleet
    hosts = [templates[0].with_count(20), templates[1].with_count(10)]
    capacity = sum(group.count * per_host_rps(group, demand) for group in hosts)
    p99, slow, seconds, _ = measure(hosts, utilisation * capacity, demand, 1000.0, 300.0, seed=5)
    curve_p99, curve_slow, curve_seconds = curve.at(utilisation)
    assert curve_p99 == pytest.approx(p99, rel=0.15)
    assert curve_seconds == pytest.approx(seconds, rel=0.1)
    assert abs(curve_slow - slow) < 0.01


def test_latency_rises_towards_the_throughput_bound(fleet):
    _, _, curve = fleet
    assert curve.at(0.5)[0] < 1000 < curve.at(1.0)[0]
    assert curve.at(0.98)[1] > curve.at(0.5)[1]


def test_a_prompt_costs_its_prefill_bucket_on_an_engine_compiled_with_buckets():
    from gameday.serving import per_host_rps
    from planner.demand import Demand
    from planner.profiles import load_profiles
    from planner.simulate import HostGroup, LogNormal

    profile = load_profiles()[("inf2.48xlarge", 8)]
    demand = Demand(LogNormal.fit(900, 3000), LogNormal.fit(250, 900), 900, 250, 8191, 1024)
    plain = HostGroup("inf2.48xlarge", profile.engine(32), 1, 0)
    bucketed = HostGroup("inf2.48xlarge", profile.engine(32, prefill_buckets=(1024, 2048, 4096, 8192)), 1, 0)
    assert per_host_rps(bucketed, demand) < per_host_rps(plain, demand)


def test_an_overloaded_fleet_serves_within_the_objective_with_a_short_queue_and_the_wait_budget(fleet):
    """Offered 1.5x its capacity: replicas that let one batch wait (the container's own default) admit
    nearly their capacity and serve almost nothing within the objective (a request waits about a stream
    for its slot). A queue of one alone sheds the excess but is not enough on the published profiles: a
    stream holds its slot 33 ms a token, so the one queued request waits about a second (p99 past the
    objective). With the queue-wait budget as deployed (800 ms: settings' default, 80% of the objective)
    what waits past it is shed, and the fleet serves what it admits within the objective, at over 90%
    of the nominal bound."""
    templates, demand, _ = fleet
    hosts = [templates[0].with_count(4), templates[1].with_count(2)]
    capacity = sum(group.count * per_host_rps(group, demand) for group in hosts)
    deep = measure(hosts, 1.5 * capacity, demand, 1000.0, 240.0, seed=5, max_queued=32)
    short = measure(hosts, 1.5 * capacity, demand, 1000.0, 240.0, seed=5, max_queued=1)
    budget = measure(hosts, 1.5 * capacity, demand, 1000.0, 240.0, seed=5, max_queued=1, queue_wait_s=0.8)
    for *_, admitted in (deep, short, budget):
        assert admitted < 0.7  # all shed the excess
    assert deep[1] > 0.9  # slow share
    assert short[0] > 1000  # the queue of one alone: its p99 past the objective
    p99, slow, _, admitted = budget
    assert p99 <= 800 and slow == 0.0
    assert 1.5 * admitted * (1 - slow) > 0.9  # served within the objective, of the nominal capacity


def test_slower_engines_slow_share_is_measured_at_the_stretched_threshold(fleet):
    """Engines at 20% speed stretch every first token by 1/0.2: at half load (p99 about 240 ms at full
    speed, 1.2 s stretched) more than 1% of first tokens then miss the objective (about 2%), which is what
    the slow-first-token alarm pages on. On the published profiles the objective breaks at half load only
    below 24% of the engines' speed (240 ms / 1,000 ms); at 30% (the estimates' p99 was 420 ms) 0.3% are
    late."""
    _, _, curve = fleet
    assert curve.slow_at_speed(0.5, 1.0) == pytest.approx(curve.at(0.5)[1])
    assert curve.at(0.5)[0] < 1000 < curve.at(0.5)[0] / 0.2
    assert curve.slow_at_speed(0.5, 0.2) > 0.01 > curve.at(0.5)[1]
    assert curve.slow_at_speed(0.5, 0.2) > curve.slow_at_speed(0.5, 0.7) >= curve.slow_at_speed(0.5, 1.0)
