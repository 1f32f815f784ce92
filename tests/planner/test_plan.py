"""Sizing: design rates, the fleet mix, slices, and the search for the smallest fleet meeting the SLO."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.plan import (
    Demand,
    PlanError,
    Search,
    design_rates,
    fleet_counts,
    nominal_capacity,
    size_region,
    slice_of,
)
from planner.profiles import load_profiles
from planner.simulate import HostGroup, LogNormal, draw_requests, simulate

PROFILES = load_profiles()
TEMPLATES = (
    HostGroup("inf2.48xlarge", PROFILES[("inf2.48xlarge", 8)].engine(32), 3, 0),
    HostGroup("trn1.32xlarge", PROFILES[("trn1.32xlarge", 8)].engine(32), 4, 0),
)
MIX = (20.0, 10.0)
DEMAND = Demand(LogNormal.fit(900, 3000), LogNormal.fit(250, 900), 900, 250, 8191, 1024)
QUICK = Search(slo_ms=1000, window_seconds=120, verify_seconds=300, slice_hosts=12)


def groups(counts: tuple[int, ...]) -> list[HostGroup]:
    return [template.with_count(count) for template, count in zip(TEMPLATES, counts, strict=True)]


def test_without_region_loss_each_region_is_sized_for_its_peak_plus_headroom() -> None:
    rates = design_rates({"a": 100.0, "b": 50.0}, {"a": 1, "b": 1}, headroom=0.2, survive_region_loss=False)
    assert rates["a"].rate == pytest.approx(120) and rates["b"].rate == pytest.approx(60)


def test_surviving_a_region_loss_adds_the_lost_regions_traffic_by_route53_weight() -> None:
    peaks = {"us-east-1": 2500.0, "us-west-2": 1500.0, "us-east-2": 1000.0}
    weights = {"us-east-1": 50, "us-west-2": 30, "us-east-2": 20}
    rates = design_rates(peaks, weights, headroom=0.2, survive_region_loss=True)
    assert rates["us-west-2"].rate == pytest.approx(1500 + 2500 * 30 / 50)
    assert rates["us-west-2"].reason == "us-east-1 lost"
    assert rates["us-east-2"].rate == pytest.approx(1000 + 2500 * 20 / 50)
    assert rates["us-east-1"].rate == pytest.approx(2500 + 1500 * 50 / 70)


def test_a_single_region_cannot_fail_over_and_keeps_its_headroom() -> None:
    rates = design_rates({"a": 100.0}, {"a": 1}, headroom=0.1, survive_region_loss=True)
    assert rates["a"].rate == pytest.approx(110)


@given(total=st.integers(1, 20_000), mix=st.lists(st.floats(0.5, 100), min_size=1, max_size=3))
def test_fleet_counts_keep_the_mix_and_grow_together(total: int, mix: list[float]) -> None:
    now, later = fleet_counts(total, mix), fleet_counts(total + 1, mix)
    assert all(b >= a >= 1 for a, b in zip(now, later, strict=True))
    for count, weight in zip(now, mix, strict=True):
        assert count == pytest.approx(total * weight / sum(mix), abs=1.0) or count == 1


def test_a_slice_keeps_the_mix_and_takes_its_share_of_the_capacity() -> None:
    fleet = groups((2000, 1000))
    part, share = slice_of(fleet, 12, DEMAND)
    assert [g.count for g in part] == [8, 4]
    assert share == pytest.approx(12 / 3000)
    assert slice_of(groups((4, 2)), 12, DEMAND) == (groups((4, 2)), 1.0)


@pytest.mark.parametrize("load", [0.8, 0.9])
def test_a_slice_errs_towards_more_hosts_than_the_full_fleet(load: float) -> None:
    """The slice's accuracy, against a full simulation of 60 hosts at loads around the sizing point."""
    fleet = groups((40, 20))
    rate = load * nominal_capacity(fleet, DEMAND)
    full = simulate(fleet, draw_requests(rate, 300, DEMAND.prompt, DEMAND.output, 7, 8191, 1024))
    part, share = slice_of(fleet, 12, DEMAND)
    sliced = simulate(part, draw_requests(rate * share, 300, DEMAND.prompt, DEMAND.output, 7, 8191, 1024))
    assert full.p99_ttft_ms() <= sliced.p99_ttft_ms() <= 1.1 * full.p99_ttft_ms()


def p99_at(scale: int, rate: float, seconds: float) -> float:
    part, share = slice_of(groups(fleet_counts(scale, MIX)), QUICK.slice_hosts, DEMAND)
    load = draw_requests(rate * share, seconds, DEMAND.prompt, DEMAND.output, QUICK.seed, 8191, 1024)
    return simulate(part, load).p99_ttft_ms()


def test_the_search_returns_the_smallest_fleet_meeting_the_slo() -> None:
    sized = size_region(TEMPLATES, MIX, DEMAND, 150.0, QUICK)
    assert sized.counts == fleet_counts(sized.scale, MIX)
    assert sized.p99_ttft_ms <= 1000
    assert p99_at(sized.scale - 1, 150.0, QUICK.window_seconds) > 1000
    assert nominal_capacity(groups(sized.counts), DEMAND) >= 150


def test_more_traffic_never_needs_fewer_hosts() -> None:
    sizes = [size_region(TEMPLATES, MIX, DEMAND, rate, QUICK).scale for rate in (50.0, 150.0, 450.0)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]


def test_no_traffic_needs_no_hosts() -> None:
    assert size_region(TEMPLATES, MIX, DEMAND, 0.0, QUICK).counts == (0, 0)


def test_an_slo_no_fleet_reaches_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="no fleet up to"):
        size_region(TEMPLATES, MIX, DEMAND, 50.0, Search(slo_ms=300, window_seconds=60, max_growth=2))
