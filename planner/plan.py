"""Sizing: the smallest fleet of a region whose simulated p99 time to first token meets the SLO.

A region's fleets keep the config's mix (their `max` ratio) and grow together. Large fleets are simulated
through a slice: under least outstanding requests every host of a type sees the same share of traffic, so
a few hosts with the mix kept and the rate scaled by their share of the capacity stand for thousands. A
slice pools less traffic than the whole fleet, so it errs towards more hosts (tests/planner/test_plan.py
measures it against a full simulation).

The fast path: once fleets are large enough that the slice no longer changes with the fleet's size, the
fleet meets the SLO exactly when the slice's share of the rate stays below the slice's knee (the highest
rate it serves within the SLO). The knee is found once per slice, SLO, request mix and seed by bisection
on the rate (and confirmed over the full peak hour); every region of that shape then scales it by its
own rate without another search. tests/planner/test_plan.py checks it against the direct search."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from planner.demand import Demand
from planner.inputs import PlanInputs, RegionInputs
from planner.simulate import Balancer, HostGroup, draw_requests, simulate


class PlanError(Exception):
    """The forecast cannot be met as asked (an SLO no fleet size reaches)."""


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
    fast: bool = True  # large fleets: scale the slice's knee by the rate rather than search each fleet
    # Every window holds at least this many requests (it is lengthened at low rates): a p99 is read from
    # the slowest 1%, and fewer than ~600 of them are noise. A window fixed in seconds holds fewer and
    # fewer requests as the direct search grows the fleet (its slice's share of the rate falls), until
    # no fleet passes; one-minute windows put a forecast's range at 319-7,865 hosts where the long
    # search puts the top near 2,400 (issue 23).
    window_requests: int = 60_000
    seeds: int = 3  # the seed spread: the main seed and the ones after it


@dataclass(frozen=True)
class Sized:
    scale: int  # the fleet_counts() total the search settled on
    counts: tuple[int, ...]  # hosts per group, in the order of the templates
    p99_ttft_ms: float  # over the full peak hour, at the design rate (direct) or the slice's knee (fast path)
    simulated_requests: int
    simulations: int
    slice_counts: tuple[int, ...]  # the hosts the verification simulated
    knee: float = 0.0  # requests/s at which this fleet's p99 crosses the SLO
    fast: bool = False  # sized by scaling the slice's knee rather than by searching this fleet
    slice_knee: float = 0.0  # requests/s at which the slice's p99 crosses the SLO (knee = this / share)


@dataclass(frozen=True)
class DesignRate:
    rate: float
    reason: str
    peak: float = 0.0  # the region's own peak, normal operation
    failover_load: float = 0.0  # its peak plus its share of the worst lost region's (0: not planned for)
    failover_reason: str = ""  # "<region> lost"


def design_rates(
    peaks: Mapping[str, float],
    weights: Mapping[str, int],
    headroom: float,
    survive_region_loss: bool,
    failover_headroom: float = 0.0,
) -> dict[str, DesignRate]:
    """The traffic each region is sized for: its peak plus headroom, or, when the event must survive the
    loss of a region, its peak plus its Route 53 share of the lost region's traffic, plus
    failover_headroom on top of that, if that is more. Without failover headroom a region that takes a
    lost region's traffic runs at the knee of its p99 curve, where a few percent more load breaks the SLO."""
    rates: dict[str, DesignRate] = {}
    for region, peak in peaks.items():
        normal = peak * (1 + headroom)
        failover, failover_reason = 0.0, ""
        if survive_region_loss:
            for lost, lost_peak in peaks.items():
                survivors = [name for name in peaks if name != lost]
                if lost == region or not survivors:
                    continue
                total = sum(weights.get(name, 0) for name in survivors)
                share = weights.get(region, 0) / total if total else 1 / len(survivors)
                rate = peak + lost_peak * share
                if rate > failover:
                    failover, failover_reason = rate, f"{lost} lost"
        best = DesignRate(normal, f"peak +{headroom:.0%}", peak, failover, failover_reason)
        if failover * (1 + failover_headroom) > normal:
            reason = failover_reason + (f" +{failover_headroom:.0%}" if failover_headroom else "")
            best = replace(best, rate=failover * (1 + failover_headroom), reason=reason)
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
        * group.engine.requests_per_second(
            demand.prefill_mean(group.engine), demand.output_mean, demand.full_batch_step(group.engine)
        )
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


class Knees:
    """The knee of each slice (highest rate within the SLO) found so far, so regions of one shape share one
    search. Keyed by everything the answer depends on; one instance serves one plan. It also hands a new
    search of the same slice and demand at another seed a start: the knee already found (scaled by the
    two slices' throughput bounds, if they differ), from which a few runs bracket the new one."""

    def __init__(self) -> None:
        self._found: dict[tuple[object, ...], tuple[float, float]] = {}
        # (slice, demand, SLO, windows) -> (the slice's throughput bound, its knee), the first one found
        self._starts: dict[tuple[object, ...], tuple[float, float]] = {}
        self.simulations = 0  # every run of the plan, the ranges' included
        self.simulated = 0

    def get(self, key: tuple[object, ...]) -> tuple[float, float] | None:
        return self._found.get(key)

    def put(self, key: tuple[object, ...], knee: float, p99_ms: float) -> None:
        self._found[key] = (knee, p99_ms)

    def start(self, shape: tuple[object, ...], bound: float) -> float | None:
        """Where a search of a slice of this shape with this throughput bound should start, if any."""
        known = self._starts.get(shape)
        return known[1] * bound / known[0] if known else None

    def remember(self, shape: tuple[object, ...], bound: float, knee: float) -> None:
        self._starts.setdefault(shape, (bound, knee))


class _Runs:
    """Runs the simulations of one sizing and counts them (and in the plan's total, if given)."""

    def __init__(
        self,
        demand: Demand,
        search: Search,
        on_simulation: Callable[[], None] | None,
        total: Knees | None = None,
    ) -> None:
        self.demand, self.search, self.on_simulation = demand, search, on_simulation
        self.total = total
        self.simulations = 0
        self.simulated = 0

    def p99(self, groups: Sequence[HostGroup], rate: float, seconds: float, seed: int) -> float:
        demand = self.demand
        if rate > 0:
            seconds = max(seconds, self.search.window_requests / rate)
        requests = draw_requests(
            rate, seconds, demand.prompt, demand.output, seed, demand.max_prompt, demand.max_output
        )
        outcome = simulate(groups, requests, self.search.balancer)
        self.simulations += 1
        self.simulated += len(requests)
        if self.total is not None:
            self.total.simulations += 1
            self.total.simulated += len(requests)
        if self.on_simulation:
            self.on_simulation()
        return outcome.p99_ttft_ms()


def _knee(
    groups: Sequence[HostGroup], runs: _Runs, seconds: float, seed: int, start: float | None = None
) -> tuple[float, float]:
    """The highest rate the groups serve within the SLO over `seconds` (to within search.precision), and
    the p99 there.

    p99 against rate is a hockey stick: flat, then a knee within a few percent. Bisection on the rate
    brackets it from the throughput bound down; common random numbers keep the curve monotone in practice.
    With a start (a knee found for another seed or profile, scaled), the bracket is searched around it in
    2% steps, which saves most of the runs."""
    search = runs.search
    bound = nominal_capacity(groups, runs.demand)
    high, low = bound, 0.0
    # Without a start: where the knee usually sits (continuous batching keeps replicas ~93% busy).
    probe = min(start, bound) if start else 0.93 * bound
    down = 0.98 if start else 0.9
    low_p99 = math.inf
    while low == 0.0:
        measured = runs.p99(groups, probe, seconds, seed)
        if measured <= search.slo_ms:
            low, low_p99 = probe, measured
        else:
            high = probe
            probe *= down
            down = max(0.5, down - (1 - down))  # widen the steps down: 2%, 4%, 8%...
            if probe < bound * 1e-3:
                raise PlanError(
                    f"no load meets a p99 TTFT of {search.slo_ms:g} ms: prefilling the longest prompts "
                    "alone takes about that long"
                )
    # A first step close above: the knee is rarely more than a few percent away.
    up = 1.02 if start else 1.03
    step = min(high, low * up)
    while high - low > search.precision * low:
        middle = step if step < high else (low + high) / 2
        measured = runs.p99(groups, middle, seconds, seed)
        if measured <= search.slo_ms:
            low, low_p99 = middle, measured
            step = low * up if start else math.inf  # from a start, keep stepping up while it passes
        else:
            high = middle
            step = math.inf
    return low, low_p99


def _verified(
    groups: Sequence[HostGroup], runs: _Runs, knee: float, seconds: float, seed: int
) -> tuple[float, float]:
    """The knee confirmed over the longer window: 1% lower, and another 1% at a time until it agrees.

    A full hour holds rarer bursts than a window, so its knee sits a little lower: starting 1% down passes
    at the first run in most cases (a run of the hour costs six of the window)."""
    search = runs.search
    rate = knee * 0.99
    for _ in range(50):
        measured = runs.p99(groups, rate, seconds, seed)
        if measured <= search.slo_ms:
            return rate, measured
        rate *= 0.99
    raise PlanError(f"the full window never meets a p99 TTFT of {search.slo_ms:g} ms near the knee")


def knee_of(
    groups: Sequence[HostGroup],
    demand: Demand,
    search: Search,
    seconds: float | None = None,
    seed: int | None = None,
    on_simulation: Callable[[], None] | None = None,
) -> float:
    """Requests per second at which the fleet's p99 TTFT crosses search.slo_ms (slice-simulated above
    search.slice_hosts hosts): the load it holds the SLO to, for the margins the report prints. Measured
    as the plan measures it: bisected in `seconds` (default the search's window), then confirmed over
    search.verify_seconds when that is longer (and `seconds` is not given)."""
    part, share = slice_of(groups, search.slice_hosts, demand)
    runs = _Runs(demand, search, on_simulation)
    window = seconds or search.window_seconds
    seed = search.seed if seed is None else seed
    found = _knee(part, runs, window, seed)
    if seconds is None and search.verify_seconds > window:
        found = _verified(part, runs, found[0], search.verify_seconds, seed)
    return found[0] / share


def _slice_knee(part: Sequence[HostGroup], runs: _Runs, knees: Knees) -> tuple[float, float]:
    """The slice's knee and the p99 there, bisected in the search's window and confirmed over its
    verification window when that is longer: one measurement for the fast path and the direct search
    alike, found once per slice, demand, SLO and seed and shared by every region of that shape."""
    search, demand = runs.search, runs.demand
    # The window's knee and the hour's are cached apart, so a search without the hour (the ranges) at the
    # plan's own profile and seed reuses the plan's bisection.
    key = (tuple(part), demand, search.slo_ms, search.window_seconds, search.window_requests)
    key += (search.seed, search.balancer)
    found = knees.get(key)
    if found is None:
        part_bound = nominal_capacity(part, demand)
        # Other seeds start from the knee of the first: the same curve drawn again. Other profiles start
        # afresh, as the plan's own search would: on a peaky forecast p99 against rate is jagged, and a
        # search from elsewhere stops at another of its crossings.
        start_key = key[:-2]
        found = _knee(part, runs, search.window_seconds, search.seed, knees.start(start_key, part_bound))
        knees.put(key, *found)
        knees.remember(start_key, part_bound, found[0])
    if search.verify_seconds > search.window_seconds:
        hour_key = (*key, search.verify_seconds)
        verified = knees.get(hour_key)
        if verified is None:
            verified = _verified(part, runs, found[0], search.verify_seconds, search.seed)
            knees.put(hour_key, *verified)
        found = verified
    return found


def _slice_counts(total: int, mix: Sequence[float], limit: int) -> tuple[int, ...]:
    counts = fleet_counts(total, mix)
    if sum(counts) <= limit:
        return counts
    return tuple(max(1, round(count * limit / sum(counts))) for count in counts)


def size_region(
    templates: Sequence[HostGroup],
    mix: Sequence[float],
    demand: Demand,
    rate: float,
    search: Search,
    on_simulation: Callable[[], None] | None = None,
    knees: Knees | None = None,
    measure: bool = True,
) -> Sized:
    """Smallest fleet (by total hosts, mix kept, to within search.precision) meeting search.slo_ms at
    `rate`. Large fleets (search.fast): scale the slice's knee by the rate. Otherwise, the direct search:
    grow geometrically from the throughput bound until a short window meets the SLO, bisect, then confirm
    over the full window (stepping up if the longer run disagrees). Either way the fleet's knee comes too."""
    if rate <= 0:
        counts = tuple(0 for _ in templates)
        return Sized(0, counts, 0.0, 0, 0, counts)
    per_host = nominal_capacity(_groups(templates, fleet_counts(1000, mix)), demand) / sum(
        fleet_counts(1000, mix)
    )
    bound = max(1, math.floor(rate / per_host))
    while nominal_capacity(_groups(templates, fleet_counts(bound, mix)), demand) < rate:
        bound += 1
    knees = knees if knees is not None else Knees()
    runs = _Runs(demand, search, on_simulation, knees)
    if search.fast:
        sized = _scaled(templates, mix, demand, rate, search, bound, runs, knees, measure)
        if sized is not None:
            return sized
    return _direct(templates, mix, demand, rate, search, bound, runs, knees, measure)


def _scaled(
    templates: Sequence[HostGroup],
    mix: Sequence[float],
    demand: Demand,
    rate: float,
    search: Search,
    bound: int,
    runs: _Runs,
    knees: Knees,
    measure: bool,
) -> Sized | None:
    """The fast path, or None when the slice still changes with the fleet's size (small fleets)."""
    shape = _slice_counts(bound, mix, search.slice_hosts)
    if sum(fleet_counts(bound, mix)) <= search.slice_hosts or shape != _slice_counts(
        math.ceil(bound * search.max_growth), mix, search.slice_hosts
    ):
        return None
    part = _groups(templates, shape)
    found = _slice_knee(part, runs, knees)
    knee = found[0]
    # The fleet meets the SLO while rate x share <= knee, share = capacity(part) / capacity(fleet).
    needed = rate * nominal_capacity(part, demand) / knee
    total = bound
    while nominal_capacity(_groups(templates, fleet_counts(total, mix)), demand) < needed:
        total = max(
            total + 1,
            math.floor(
                total * needed / nominal_capacity(_groups(templates, fleet_counts(total, mix)), demand)
            ),
        )
    while total > 1 and nominal_capacity(_groups(templates, fleet_counts(total - 1, mix)), demand) >= needed:
        total -= 1
    counts = fleet_counts(total, mix)
    fleet = _groups(templates, counts)
    share = nominal_capacity(part, demand) / nominal_capacity(fleet, demand)
    # The knee's own p99 (over the peak hour when verified) bounds this fleet's: its slice runs at or
    # just below the knee's rate.
    p99 = found[1] if measure else 0.0
    return Sized(total, counts, p99, runs.simulated, runs.simulations, shape, knee / share, True, knee)


def _direct(
    templates: Sequence[HostGroup],
    mix: Sequence[float],
    demand: Demand,
    rate: float,
    search: Search,
    bound: int,
    runs: _Runs,
    knees: Knees,
    measure: bool = True,
) -> Sized:
    def p99(total: int, seconds: float) -> tuple[float, tuple[int, ...]]:
        part, share = slice_of(_groups(templates, fleet_counts(total, mix)), search.slice_hosts, demand)
        return runs.p99(part, rate * share, seconds, search.seed), tuple(group.count for group in part)

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
            if not measure:  # the ranges need the hosts only
                return Sized(candidate, counts, measured, runs.simulated, runs.simulations, slice_counts)
            fleet = _groups(templates, counts)
            part, share = slice_of(fleet, search.slice_hosts, demand)
            # "SLO crossed at" as the fast path measures it (confirmed over the verification window),
            # so the two modes print the same margin for the same fleet.
            knee, _ = _slice_knee(part, runs, knees)
            return Sized(
                candidate,
                counts,
                measured,
                runs.simulated,
                runs.simulations,
                slice_counts,
                knee / share,
                False,
                knee,
            )
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
    hosts_low: int = 0  # the minimum if the profile's throughput is at its high end (0: not planned)
    hosts_high: int = 0  # ... at its low end
    traffic_share: float = 0.0  # the region's requests it serves (its share of the capacity, under LOR)
    derived_profile: bool = False  # its profile was scaled per chip from another type or TP degree
    decode_speedup: float = 1.0  # from speculative decoding in its profile, at its full batch
    decode_speedup_single: float = 1.0  # ... at batch 1
    speed_source: str = ""  # where its profile's speed comes from: published (document, SDK, URL) or estimate
    speed_range: tuple[float, float] = (1.0, 1.0)  # the profile's low and high throughput factors

    @property
    def cost_per_hour(self) -> float:
        return self.hosts * self.hourly_price

    @property
    def hosts_range(self) -> tuple[int, int]:
        return (self.hosts_low or self.hosts, self.hosts_high or self.hosts)


@dataclass(frozen=True)
class RegionPlan:
    region: str
    peak: float
    design: DesignRate
    fleets: tuple[FleetPlan, ...]
    sized: Sized
    prompt_tokens: float = 0.0  # mean per request
    output_tokens: float = 0.0
    hosts_without_failover: int = 0  # total, if sized for its own peak plus headroom only
    cost_without_failover: float = 0.0  # per hour
    seed_hosts: tuple[int, ...] = ()  # the region's hosts at each seed of the spread (the search's windows)
    hosts_without_speculative: int = 0  # total, if the fleets' profiles had no speculative decoding

    @property
    def headroom(self) -> float:
        """Traffic above the forecast peak the fleet is sized for (the design rate over the peak)."""
        return self.design.rate / self.peak - 1 if self.peak else 0.0

    @property
    def normal_margin(self) -> float:
        """Load above the region's own peak before its p99 crosses the SLO."""
        return self.sized.knee / self.peak - 1 if self.peak and self.sized.knee else 0.0

    @property
    def failover_margin(self) -> float | None:
        """Load above what the region carries when the worst other region is lost, before its p99
        crosses the SLO; None when the forecast does not plan for a region's loss."""
        if not self.design.failover_load or not self.sized.knee:
            return None
        return self.sized.knee / self.design.failover_load - 1

    @property
    def hosts(self) -> int:
        return sum(fleet.hosts for fleet in self.fleets)

    @property
    def cost_per_hour(self) -> float:
        return sum(fleet.cost_per_hour for fleet in self.fleets)

    @property
    def cost_range(self) -> tuple[float, float]:
        low = sum(f.hosts_range[0] * f.hourly_price for f in self.fleets)
        return low, sum(f.hosts_range[1] * f.hourly_price for f in self.fleets)

    def million_tokens_per_hour(self, output_only: bool = False) -> float:
        """Tokens the region serves per hour at its peak, normal operation, in millions."""
        tokens = self.output_tokens if output_only else self.prompt_tokens + self.output_tokens
        return self.peak * 3600 * tokens / 1e6

    def cost_per_million_tokens(self, output_only: bool = False) -> float:
        served = self.million_tokens_per_hour(output_only)
        return self.cost_per_hour / served if served else 0.0

    def fleet_cost_per_million_tokens(self, fleet: FleetPlan, output_only: bool = False) -> float:
        served = self.million_tokens_per_hour(output_only) * fleet.traffic_share
        return fleet.cost_per_hour / served if served else 0.0


def plan_event(
    inputs: PlanInputs,
    search: Search,
    headroom: float = 0.2,
    max_factor: float = 1.5,
    on_simulation: Callable[[], None] | None = None,
    knees: Knees | None = None,
) -> list[RegionPlan]:
    """Per region of the forecast: design rate, smallest fleet meeting the SLO, the event's min and max
    per fleet (never below the config's own limits) and what the minimum costs per hour; beside it the
    hosts at the profiles' low and high throughput, at other seeds, without planning for a region's loss
    and without speculative decoding."""
    rates = design_rates(
        {region.name: region.peak for region in inputs.regions},
        {region.name: region.weight for region in inputs.regions},
        headroom,
        inputs.forecast.survive_region_loss,
        inputs.forecast.failover_headroom,
    )
    knees = knees if knees is not None else Knees()  # also counts every run of the plan
    return [
        _plan_region(region, rates[region.name], search, headroom, max_factor, on_simulation, knees)
        for region in inputs.regions
    ]


def _plan_region(
    region: RegionInputs,
    design: DesignRate,
    search: Search,
    headroom: float,
    max_factor: float,
    on_simulation: Callable[[], None] | None,
    knees: Knees,
) -> RegionPlan:
    # The profiles' low and high figures are sized as the plan is (windows of at least
    # search.window_requests requests, then the full hour). The other seeds are searched in the same
    # windows but not confirmed over the hour: each is scaled to the plan's fleet by the same search at the
    # plan's own seed, which the hour moved by its own step (the fast path reuses that bisection).
    window = replace(search, verify_seconds=search.window_seconds)

    def total(templates: Sequence[HostGroup], rate: float, how: Search) -> int:
        return size_region(
            templates, region.mix, region.demand, rate, how, on_simulation, knees, measure=False
        ).scale

    def hosts_of(scale: int) -> tuple[int, ...]:
        """Hosts per fleet for a fleet_counts() total, never below the config's minimum."""
        counts = fleet_counts(scale, region.mix) if scale else tuple(0 for _ in region.fleets)
        return tuple(max(fleet.min, count) for fleet, count in zip(region.fleets, counts, strict=True))

    sized = size_region(
        region.templates, region.mix, region.demand, design.rate, search, on_simulation, knees
    )
    at_seed = [
        total(region.templates, design.rate, replace(window, seed=search.seed + offset))
        for offset in range(search.seeds)
    ]

    def scaled(hosts: int) -> int:
        return round(sized.scale * hosts / at_seed[0]) if at_seed[0] else 0

    seeds = tuple(sum(hosts_of(scaled(hosts))) for hosts in at_seed)
    low = hosts_of(total(region.templates_high, design.rate, search))
    high = hosts_of(total(region.templates_low, design.rate, search))
    normal_rate = design.peak * (1 + headroom)
    without_failover = total(region.templates, normal_rate, search) if design.rate > normal_rate else 0
    without_speculative = (
        sum(hosts_of(total(region.templates_plain, design.rate, search)))
        if region.templates_plain != region.templates
        else 0
    )
    hosts = hosts_of(sized.scale)
    capacity = nominal_capacity(_groups(region.templates, hosts), region.demand) or 1.0
    fleets = tuple(
        FleetPlan(
            instance_type=fleet.instance_type,
            hosts=count,
            max_hosts=max(fleet.max, math.ceil(count * max_factor)),
            chips=count * fleet.instance.neuron_devices,
            hourly_price=price,
            hosts_low=low[index],
            hosts_high=high[index],
            traffic_share=nominal_capacity([template.with_count(count)], region.demand) / capacity,
            derived_profile=region.derived[index],
            decode_speedup=region.decode_speedups[index],
            decode_speedup_single=region.decode_speedups_single[index],
            speed_source=region.profiles[index].speed_source if region.profiles else "",
            speed_range=(
                (
                    region.profiles[index].throughput_range.low,
                    region.profiles[index].throughput_range.high,
                )
                if region.profiles
                else (1.0, 1.0)
            ),
        )
        for index, (fleet, count, price, template) in enumerate(
            zip(region.fleets, hosts, region.hourly_prices, region.templates, strict=True)
        )
    )
    cost_without_failover = (
        sum(p * n for p, n in zip(region.hourly_prices, hosts_of(without_failover), strict=True))
        if without_failover
        else 0.0
    )
    return RegionPlan(
        region.name,
        region.peak,
        design,
        fleets,
        sized,
        region.demand.prompt_mean,
        region.demand.output_mean,
        sum(hosts_of(without_failover)) if without_failover else 0,
        cost_without_failover,
        seeds,
        without_speculative,
    )
