"""Sizing: design rates, the fleet mix, slices, and the search for the smallest fleet meeting the SLO."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.plan import (
    Demand,
    DesignRate,
    FleetPlan,
    Knees,
    PlanError,
    RegionPlan,
    Search,
    Sized,
    design_rates,
    fleet_counts,
    knee_of,
    nominal_capacity,
    size_region,
    slice_of,
)
from planner.profiles import Profile
from planner.simulate import HostGroup, LogNormal, draw_requests, simulate

# The sizing's mechanics on profiles of their own (the kit's estimates of 2026-11), not the shipped files:
# those follow their published source (tests/planner/test_profiles.py), and the properties below (a
# TTFT-bound knee, the buckets' share of the work) are about the search, not about one chip's figures.
ESTIMATE = {
    "source": "test",
    "tensor_parallel": 8,
    "max_num_seqs": 32,
    "prefill_tokens_per_second": 8200.0,
    "decode_step_ms": {1: 7.0, 8: 8.5, 32: 12.0},
}
PROFILES = {
    (kind, 8): Profile.model_validate({**ESTIMATE, "instance_type": kind})
    for kind in ("inf2.48xlarge", "trn1.32xlarge")
}
TEMPLATES = (
    HostGroup("inf2.48xlarge", PROFILES[("inf2.48xlarge", 8)].engine(32), 3, 0),
    HostGroup("trn1.32xlarge", PROFILES[("trn1.32xlarge", 8)].engine(32), 4, 0),
)
MIX = (20.0, 10.0)
DEMAND = Demand(LogNormal.fit(900, 3000), LogNormal.fit(250, 900), 900, 250, 8191, 1024)
BUCKETS = (512, 1024, 2048, 4096, 8192)
BUCKETED = (
    HostGroup("inf2.48xlarge", PROFILES[("inf2.48xlarge", 8)].engine(32, prefill_buckets=BUCKETS), 3, 0),
    HostGroup("trn1.32xlarge", PROFILES[("trn1.32xlarge", 8)].engine(32, prefill_buckets=BUCKETS), 4, 0),
)
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


def test_failover_headroom_sizes_a_region_above_its_share_of_a_lost_regions_traffic() -> None:
    peaks = {"us-east-1": 2500.0, "us-west-2": 1500.0, "us-east-2": 1000.0}
    weights = {"us-east-1": 50, "us-west-2": 30, "us-east-2": 20}
    rates = design_rates(peaks, weights, headroom=0.2, survive_region_loss=True, failover_headroom=0.1)
    west = rates["us-west-2"]
    assert west.failover_load == pytest.approx(1500 + 2500 * 30 / 50)
    assert west.rate == pytest.approx(west.failover_load * 1.1)
    assert west.reason == "us-east-1 lost +10%" and west.failover_reason == "us-east-1 lost"
    assert west.peak == 1500
    alone = design_rates(peaks, weights, headroom=0.2, survive_region_loss=False, failover_headroom=0.1)
    assert alone["us-west-2"].failover_load == 0 and alone["us-west-2"].rate == pytest.approx(1800)


def test_buckets_cut_a_fleets_throughput_bound() -> None:
    """Mean prefill work x1.45 at the forecast's prompts: the bound falls, trn1's most (more replicas)."""
    plain = nominal_capacity([TEMPLATES[1].with_count(1)], DEMAND)
    bucketed = nominal_capacity([BUCKETED[1].with_count(1)], DEMAND)
    assert 0.7 < bucketed / plain < 0.85


@pytest.mark.parametrize("seed", [3, 7, 11])
@pytest.mark.parametrize("rate", [1500.0, 3000.0])
def test_the_fast_path_gives_the_hosts_of_the_direct_search(seed: int, rate: float) -> None:
    """Scaling the slice's knee by the rate against searching the fleet itself, in the same windows."""
    search = Search(slo_ms=1000, window_seconds=120, verify_seconds=120, slice_hosts=12, seed=seed)
    fast = size_region(BUCKETED, MIX, DEMAND, rate, search)
    direct = size_region(BUCKETED, MIX, DEMAND, rate, Search(**{**search.__dict__, "fast": False}))
    assert fast.fast and not direct.fast
    assert abs(fast.scale - direct.scale) <= max(1, 0.01 * direct.scale), (fast.scale, direct.scale)
    assert fast.simulations < direct.simulations


def test_with_a_longer_verification_the_fast_path_stays_within_the_direct_searchs_steps() -> None:
    """The direct search steps up 2% when the full window disagrees, the fast path steps its knee down 1%.
    Both measure "SLO crossed at" alike: the slice's knee confirmed over the verification window, over
    the slice's share of the fleet's capacity (it was the short window's knee in the direct search, so
    plans 1% apart printed margins of +12% and +10%)."""
    search = Search(slo_ms=1000, window_seconds=120, verify_seconds=300, slice_hosts=12)
    fast = size_region(BUCKETED, MIX, DEMAND, 3000.0, search)
    direct = size_region(BUCKETED, MIX, DEMAND, 3000.0, Search(**{**search.__dict__, "fast": False}))
    assert abs(fast.scale - direct.scale) <= 0.02 * direct.scale, (fast.scale, direct.scale)
    assert fast.p99_ttft_ms <= 1000
    assert direct.slice_knee == pytest.approx(fast.slice_knee)
    capacity = nominal_capacity(groups_of(BUCKETED, direct.counts), DEMAND) / nominal_capacity(
        groups_of(BUCKETED, fast.counts), DEMAND
    )
    assert direct.knee / fast.knee == pytest.approx(capacity, rel=0.002)


def groups_of(templates: tuple[HostGroup, ...], counts: tuple[int, ...]) -> list[HostGroup]:
    return [template.with_count(count) for template, count in zip(templates, counts, strict=True)]


def test_decode_buckets_lower_the_throughput_bound_by_the_buckets_full_batches_reach() -> None:
    """The forecast's sequences in the container's token-generation buckets: about 9 in 10 full batches
    decode at 4,096 or 8,192 tokens, so the mean full-batch step is well above the profile's 12 ms."""
    profile = PROFILES[("trn1.32xlarge", 8)]
    engine = profile.engine(32, 8192, BUCKETS, decode_buckets=(1024, 2048, 4096, 8192))
    shares = DEMAND.full_batch_buckets(engine)
    assert shares[4096] + shares[8192] == pytest.approx(0.89, abs=0.03)
    assert DEMAND.full_batch_step(engine) > 1.3 * engine.decode_step_seconds[32]
    plain = nominal_capacity([BUCKETED[1].with_count(1)], DEMAND)
    decoded = nominal_capacity([HostGroup("trn1.32xlarge", engine, 4, 1)], DEMAND)
    assert 0.8 < decoded / plain < 0.92


def test_regions_of_one_shape_share_one_knee_search() -> None:
    search = Search(slo_ms=1000, window_seconds=120, verify_seconds=120, slice_hosts=12)
    knees = Knees()
    first = size_region(BUCKETED, MIX, DEMAND, 3000.0, search, knees=knees)
    second = size_region(BUCKETED, MIX, DEMAND, 2000.0, search, knees=knees)
    assert first.simulations > 0 and second.simulations == 0
    assert second.scale == pytest.approx(first.scale * 2 / 3, abs=2)


def test_the_knee_is_where_p99_crosses_the_slo() -> None:
    search = Search(slo_ms=1000, window_seconds=120, verify_seconds=120, slice_hosts=12)
    sized = size_region(BUCKETED, MIX, DEMAND, 3000.0, search)
    assert sized.knee >= 3000.0
    fleet = [t.with_count(c) for t, c in zip(BUCKETED, sized.counts, strict=True)]
    part, share = slice_of(fleet, 12, DEMAND)

    def p99(rate: float) -> float:
        load = draw_requests(rate * share, 120, DEMAND.prompt, DEMAND.output, search.seed, 8191, 1024)
        return simulate(part, load).p99_ttft_ms()

    assert p99(sized.knee) <= 1000 < p99(sized.knee * 1.03)
    assert knee_of(fleet, DEMAND, search) == pytest.approx(sized.knee, rel=0.01)


def test_margins_headroom_and_cost_per_million_tokens() -> None:
    design = DesignRate(3300.0, "us-east-1 lost +10%", 1500.0, 3000.0, "us-east-1 lost")
    sized = Sized(300, (200, 100), 900.0, 1, 1, (8, 4), knee=3400.0, fast=True)
    fleets = (
        FleetPlan("inf2.48xlarge", 200, 300, 2400, 12.0, 180, 400, traffic_share=0.6),
        FleetPlan("trn1.32xlarge", 100, 150, 1600, 20.0, 90, 200, traffic_share=0.4),
    )
    plan = RegionPlan("us-west-2", 1500.0, design, fleets, sized, 900.0, 250.0, 150, 1800.0)
    assert plan.normal_margin == pytest.approx(3400 / 1500 - 1)
    assert plan.failover_margin == pytest.approx(3400 / 3000 - 1)
    assert plan.cost_per_hour == 200 * 12 + 100 * 20
    assert plan.cost_range == (180 * 12 + 90 * 20, 400 * 12 + 200 * 20)
    tokens = 1500 * 3600 * 1150 / 1e6  # millions per hour at the peak
    assert plan.cost_per_million_tokens() == pytest.approx(4400 / tokens)
    assert plan.cost_per_million_tokens(output_only=True) == pytest.approx(4400 / (tokens * 250 / 1150))
    assert plan.fleet_cost_per_million_tokens(fleets[0]) == pytest.approx(2400 / (tokens * 0.6))
    no_failover = RegionPlan("a", 100.0, DesignRate(120.0, "peak +20%", 100.0), fleets, sized)
    assert no_failover.failover_margin is None


@given(
    peaks=st.lists(st.floats(1, 10_000), min_size=1, max_size=4),
    headroom=st.floats(0, 1),
    failover_headroom=st.floats(0, 1),
)
def test_a_design_rate_covers_the_peak_with_headroom_and_the_failover_load_with_its_own(
    peaks: list[float], headroom: float, failover_headroom: float
) -> None:
    named = {f"r{index}": peak for index, peak in enumerate(peaks)}
    weights = {name: 10 * (index + 1) for index, name in enumerate(named)}
    rates = design_rates(named, weights, headroom, True, failover_headroom)
    for name, design in rates.items():
        assert design.rate >= named[name] * (1 + headroom) * (1 - 1e-9)
        assert design.rate >= design.failover_load * (1 + failover_headroom) * (1 - 1e-9)
        assert design.failover_load == 0 or design.failover_load > named[name]
