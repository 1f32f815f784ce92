"""Sizing: the smallest fleet of a region whose simulated p99 time to first token meets the SLO.

A region's fleets keep the config's mix (their `max` ratio) and grow together. Large fleets are simulated
through a slice: under least outstanding requests every host of a type sees the same share of traffic, so
a few hosts with the mix kept and the rate scaled by their share of the capacity stand for thousands. A
slice pools less traffic than the whole fleet, so it errs towards more hosts (tests/planner/test_plan.py
measures it against a full simulation)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from planner.simulate import Balancer, HostGroup, LogNormal, draw_requests, simulate

if TYPE_CHECKING:
    from planner.inputs import PlanInputs


class PlanError(Exception):
    """The forecast cannot be met as asked (an SLO no fleet size reaches)."""


@dataclass(frozen=True)
class Demand:
    """One region's traffic as the simulation draws it."""

    prompt: LogNormal
    output: LogNormal
    prompt_mean: float
    output_mean: float
    max_prompt: int  # the engine's context limit
    max_output: int


@dataclass(frozen=True)
class Search:
    slo_ms: float
    window_seconds: float = 600.0  # each candidate fleet: ten minutes of the peak
    verify_seconds: float = 3600.0  # the chosen fleet: the full peak hour
    slice_hosts: int = 12
    seed: int = 7
    balancer: Balancer = Balancer.LEAST_OUTSTANDING
    max_growth: float = 20.0  # give up past this many times the throughput bound's fleet
    # Bisection stops within this share of the fleet (at least one host): 0.5% is a few hosts per
    # thousand, well inside what estimated profiles can tell apart, and saves a third of the runs.
    precision: float = 0.005


@dataclass(frozen=True)
class Sized:
    scale: int  # the fleet_counts() total the search settled on
    counts: tuple[int, ...]  # hosts per group, in the order of the templates
    p99_ttft_ms: float  # over the verification window
    simulated_requests: int
    simulations: int
    slice_counts: tuple[int, ...]  # the hosts the verification simulated


@dataclass(frozen=True)
class DesignRate:
    rate: float
    reason: str


def design_rates(
    peaks: Mapping[str, float], weights: Mapping[str, int], headroom: float, survive_region_loss: bool
) -> dict[str, DesignRate]:
    """The traffic each region is sized for: its peak plus headroom, or, when the event must survive the
    loss of a region, its peak plus its Route 53 share of the lost region's traffic if that is more (the
    failover case is the worst case already, so no headroom on top)."""
    rates: dict[str, DesignRate] = {}
    for region, peak in peaks.items():
        best = DesignRate(peak * (1 + headroom), f"peak +{headroom:.0%}")
        if survive_region_loss:
            for lost, lost_peak in peaks.items():
                survivors = [name for name in peaks if name != lost]
                if lost == region or not survivors:
                    continue
                total = sum(weights.get(name, 0) for name in survivors)
                share = weights.get(region, 0) / total if total else 1 / len(survivors)
                rate = peak + lost_peak * share
                if rate > best.rate:
                    best = DesignRate(rate, f"{lost} lost")
        rates[region] = best
    return rates


def fleet_counts(total: int, mix: Sequence[float]) -> tuple[int, ...]:
    """Hosts per group for a fleet of about `total` hosts; every group keeps at least one."""
    share = sum(mix)
    return tuple(max(1, round(total * weight / share)) for weight in mix)


def nominal_capacity(groups: Sequence[HostGroup], demand: Demand) -> float:
    """Requests per second the groups can finish at most: full batches, no queueing slack."""
    return sum(
        group.count
        * group.replicas
        * group.engine.requests_per_second(demand.prompt_mean, demand.output_mean)
        for group in groups
    )


def slice_of(groups: Sequence[HostGroup], limit: int, demand: Demand) -> tuple[list[HostGroup], float]:
    """A few hosts with the fleet's mix, and the share of the fleet's traffic they should take."""
    total = sum(group.count for group in groups)
    if total <= limit:
        return list(groups), 1.0
    part = [group.with_count(max(1, round(group.count * limit / total))) for group in groups]
    return part, nominal_capacity(part, demand) / nominal_capacity(groups, demand)


def _groups(templates: Sequence[HostGroup], counts: Sequence[int]) -> list[HostGroup]:
    return [template.with_count(count) for template, count in zip(templates, counts, strict=True)]


def size_region(
    templates: Sequence[HostGroup],
    mix: Sequence[float],
    demand: Demand,
    rate: float,
    search: Search,
    on_simulation: Callable[[], None] | None = None,
) -> Sized:
    """Smallest fleet (by total hosts, mix kept, to within search.precision) meeting search.slo_ms at
    `rate`: grow geometrically from the throughput bound until a short window meets the SLO, bisect, then
    confirm over the full window (stepping up if the longer run disagrees)."""
    simulations = 0
    simulated = 0

    def p99(total: int, seconds: float) -> tuple[float, tuple[int, ...]]:
        nonlocal simulations, simulated
        part, share = slice_of(_groups(templates, fleet_counts(total, mix)), search.slice_hosts, demand)
        requests = draw_requests(
            rate * share,
            seconds,
            demand.prompt,
            demand.output,
            search.seed,
            demand.max_prompt,
            demand.max_output,
        )
        outcome = simulate(part, requests, search.balancer)
        simulations += 1
        simulated += len(requests)
        if on_simulation:
            on_simulation()
        return outcome.p99_ttft_ms(), tuple(group.count for group in part)

    if rate <= 0:
        counts = tuple(0 for _ in templates)
        return Sized(0, counts, 0.0, 0, 0, counts)

    per_host = nominal_capacity(_groups(templates, fleet_counts(1000, mix)), demand) / sum(
        fleet_counts(1000, mix)
    )
    bound = max(1, math.floor(rate / per_host))
    while nominal_capacity(_groups(templates, fleet_counts(bound, mix)), demand) < rate:
        bound += 1
    failing, candidate = bound - 1, bound  # below the bound the fleet cannot keep up at all
    limit = math.ceil(bound * search.max_growth)
    growth = 0.05  # the p99 usually crosses the SLO a few percent above the bound; widen if it does not
    while p99(candidate, search.window_seconds)[0] > search.slo_ms:
        failing = candidate
        candidate = math.ceil(candidate * (1 + growth)) + 1
        growth *= 2
        if candidate > limit:
            raise PlanError(
                f"no fleet up to {limit} hosts meets a p99 TTFT of {search.slo_ms:g} ms: prefilling the "
                "longest prompts alone takes about that long"
            )
    while candidate - failing > max(1, math.floor(candidate * search.precision)):
        middle = (failing + candidate) // 2
        if p99(middle, search.window_seconds)[0] <= search.slo_ms:
            candidate = middle
        else:
            failing = middle
    while candidate <= limit:
        measured, slice_counts = p99(candidate, search.verify_seconds)
        if measured <= search.slo_ms:
            counts = fleet_counts(candidate, mix)
            return Sized(candidate, counts, measured, simulated, simulations, slice_counts)
        candidate = max(candidate + 1, math.ceil(candidate * 1.02))
    raise PlanError(
        f"no fleet up to {limit} hosts meets a p99 TTFT of {search.slo_ms:g} ms over the full window"
    )


@dataclass(frozen=True)
class FleetPlan:
    instance_type: str
    hosts: int  # the event's minimum: in service before the doors open
    max_hosts: int  # the event's maximum: room for managed scaling past the forecast
    chips: int  # Neuron devices in the minimum
    hourly_price: float  # per host

    @property
    def cost_per_hour(self) -> float:
        return self.hosts * self.hourly_price


@dataclass(frozen=True)
class RegionPlan:
    region: str
    peak: float
    design: DesignRate
    fleets: tuple[FleetPlan, ...]
    sized: Sized

    @property
    def headroom(self) -> float:
        """Traffic above the forecast peak the fleet is sized to take within the SLO."""
        return self.design.rate / self.peak - 1 if self.peak else 0.0

    @property
    def cost_per_hour(self) -> float:
        return sum(fleet.cost_per_hour for fleet in self.fleets)


def plan_event(
    inputs: PlanInputs,
    search: Search,
    headroom: float = 0.2,
    max_factor: float = 1.5,
    on_simulation: Callable[[], None] | None = None,
) -> list[RegionPlan]:
    """Per region of the forecast: design rate, smallest fleet meeting the SLO, the event's min and max
    per fleet (never below the config's own limits) and what the minimum costs per hour."""
    rates = design_rates(
        {region.name: region.peak for region in inputs.regions},
        {region.name: region.weight for region in inputs.regions},
        headroom,
        inputs.forecast.survive_region_loss,
    )
    plans = []
    for region in inputs.regions:
        design = rates[region.name]
        sized = size_region(region.templates, region.mix, region.demand, design.rate, search, on_simulation)
        fleets = []
        for fleet, count, price in zip(region.fleets, sized.counts, region.hourly_prices, strict=True):
            hosts = max(fleet.min, count)
            fleets.append(
                FleetPlan(
                    instance_type=fleet.instance_type,
                    hosts=hosts,
                    max_hosts=max(fleet.max, math.ceil(hosts * max_factor)),
                    chips=hosts * fleet.instance.neuron_devices,
                    hourly_price=price,
                )
            )
        plans.append(RegionPlan(region.name, region.peak, design, tuple(fleets), sized))
    return plans
