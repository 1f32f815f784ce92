"""The routing policy as pure functions: one run's signals and memory in, the new weights and why out.

Overload is not a fault. A region is bad only for hard faults: its drain alarm (no healthy targets, engine
errors), failed requests above `error_share` (sheds are not failures) or no healthy host. Latency and
shedding never make a region bad: they are what a loaded region does, and draining it would tip its load
onto the next. They move weight instead: healthy regions' weights move toward the split at which every
region runs at the same utilisation (demand, sheds included, over serving slots), a fixed share of the
gap per run, so the weights converge under any load, a global overload included, and stay there.

A region that stays bad drops to the floor within `drain_runs` runs of its first bad one (after
`bad_runs_to_drain` runs in a row confirm it, or `bad_runs_in_window` of the last `window_runs`, which
catches a region that fails every other minute), and must look healthy for `healthy_runs_to_recover`
runs before it gains weight back. Missing metrics hold a region where it is; when no region looks
healthy, regions without healthy hosts still drain and what they give up goes by spare capacity.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

MAX_WEIGHT = 255  # Route 53 weights are 0-255
# A weight moves when its balanced target is at least this far: a fixed rounding margin (not one that grows
# with load), so a weight does not flicker by 1 for ever around a fractional target.
DEADBAND = 1.0
# Share of the distance to the balanced weights moved per run. Requests in flight follow the weights a run
# or two late (metrics a minute or more behind, resolvers following within a TTL), and a loop with that
# delay swings when it takes the whole gap each run; half the gap converges without overshoot.
GAIN = 0.5
# Below this many requests in flight across the healthy regions, load says nothing of how requests follow
# the weights: the balanced split is by serving slots alone.
MIN_LOAD = 1.0
# How far one region's measured weight per slot of demand may stray from the median (a factor each way).
C_SPREAD = 2.0
# Share of its weight a region slow at its first token gives away per run (of the weight its slow minute
# followed, so runs that read minutes from before the last cut do not cut again): the latency term.
LATENCY_CUT = 0.25
# Runs a region slow at its first token holds its weight (gains none) after its last slow run: long, so a
# region slow only above some load probes for its lost share every quarter of an hour rather than swinging
# every few minutes. At most RECENT_MASK's bits.
SLOW_HOLD_RUNS = 15
# The latency term acts once a region's slow-first-token share passes this share of the objective's (1%:
# a p99 objective): a slow minute reaches the weights 3-4 minutes later (the metrics' delay, two runs to
# confirm, resolvers following), so waiting for the objective itself to be missed misses it for as long.
LATENCY_MARGIN = 0.5
# A region shedding more than this share of its requests at the edge is at its bound, whatever its serving
# slots say (a fleet limited by prefill sheds with slots to spare): it takes no weight from a slow region.
RECEIVER_SHED_SHARE = 0.001
# A region whose requests take this many times the typical region's time in system serves fewer requests a
# slot than its slots say (`slower_than_typical`).
SLOW_TIME_FACTOR = 1.5
# The least share of a slot's requests `slower_than_typical` credits a slow region with: as with C_SPREAD,
# a measure gone wrong (clients that read slowly, a stuck gauge) cannot take a region below half of what
# its slots say. Held there, the split does not chase the time in system, which also grows with load (a
# region given more weight takes longer per request, and a factor that followed it would swing).
SLOWEST_SPEED = 1 / C_SPREAD


@dataclass(frozen=True)
class PolicyParams:
    slow_first_token_share: float = 0.01
    error_share: float = 0.01
    floor: int = 5
    gain_step: int = 10
    bad_runs_to_drain: int = 2
    drain_runs: int = 3
    healthy_runs_to_recover: int = 3
    # M of N: a region bad in this many of the last `window_runs` runs is drained even if its bad runs are
    # never `bad_runs_to_drain` in a row (one failing every other minute).
    bad_runs_in_window: int = 3
    window_runs: int = 5

    @property
    def drop_step(self) -> int:
        """How far a degraded region's weight falls per run: enough to reach the floor from the highest
        weight in the runs left after confirmation."""
        runs = self.drain_runs - self.bad_runs_to_drain + 1
        return max(self.gain_step, math.ceil((MAX_WEIGHT - self.floor) / runs))

    @property
    def max_step(self) -> int:
        """No unpinned weight moves further than this in one run."""
        return max(self.drop_step, self.gain_step)


@dataclass(frozen=True)
class RegionSignals:
    """One region's last minute, as the orchestrator reads it (or a rehearsal scenario states it)."""

    slow_first_token_share: float
    error_share: float
    healthy_hosts: int
    min_hosts: int
    serving_slots: float  # healthy hosts x per-host concurrency
    requests_in_flight: float
    degraded: bool = False  # the region's drain alarm (named in config) is in ALARM
    shed_share: float = 0.0  # requests refused at once for overload: not failures, a measure of demand
    # Requests that reached the region per second, shed ones included (None where not published): what its
    # weight draws, unlike requests in flight, which also grow with the time each one takes.
    requests_per_second: float | None = None

    def slow(self, params: PolicyParams) -> bool:
        """First tokens late enough to act on: over LATENCY_MARGIN of the share the objective allows (its
        p99 near the objective, p99.5 over it)."""
        return self.slow_first_token_share > LATENCY_MARGIN * params.slow_first_token_share

    def problems(self, params: PolicyParams) -> list[str]:
        """Hard faults only: the slow-first-token share and the shed share rise with load, so they move
        weight (through `load`) and page, but never make a region bad."""
        found = []
        if self.degraded:
            found.append("drain alarm in ALARM")
        if self.error_share > params.error_share:
            found.append(f"errors {self.error_share:.1%}")
        if self.healthy_hosts < 1:
            found.append("no healthy hosts")
        return found

    @property
    def load(self) -> float:
        """Demand in slots: the requests in flight and those shed for want of a slot (in flight over the
        share not shed), so a region shedding half its requests counts twice its slots."""
        kept = min(max(1.0 - self.shed_share, 0.05), 1.0)
        return self.requests_in_flight / kept

    @property
    def spare_slots(self) -> float:
        return max(self.serving_slots - self.load, 0.0)


@dataclass(frozen=True)
class RegionMemory:
    """What one run leaves for the next: how long a region has looked bad or healthy in a row."""

    bad_runs: int = 0
    good_runs: int = 0
    recent: int = 0  # one bit per run read, newest lowest: 1 where the run was bad
    slow: int = 0  # the same for first tokens over the objective (the latency term's history)

    def slow_confirmed(self, params: PolicyParams) -> bool:
        """Slow in each of the last `bad_runs_to_drain` runs read: a one-minute blip moves nothing."""
        runs = (1 << params.bad_runs_to_drain) - 1
        return self.slow & runs == runs

    def slow_lately(self) -> bool:
        """Slow in any of the last SLOW_HOLD_RUNS runs read: not yet fast long enough to gain weight back."""
        return bool(self.slow & ((1 << SLOW_HOLD_RUNS) - 1))

    def bad_in_window(self, params: PolicyParams) -> int:
        return (self.recent & ((1 << params.window_runs) - 1)).bit_count()

    def flapping(self, params: PolicyParams) -> bool:
        return self.bad_in_window(params) >= params.bad_runs_in_window


class Status(StrEnum):
    HEALTHY = "healthy"  # follows spare capacity
    RECOVERING = "recovering"  # healthy, not for long enough to gain weight
    SUSPECT = "suspect"  # bad, not for long enough to lose weight
    DEGRADED = "degraded"  # bad for long enough: on its way to the floor
    MISSING = "missing"  # no metrics: holds
    PINNED = "pinned"  # an operator's override


@dataclass(frozen=True)
class RegionDecision:
    region: str
    status: Status
    old_weight: int
    new_weight: int
    detail: str = ""


@dataclass(frozen=True)
class Decision:
    weights: dict[str, int]
    memory: dict[str, RegionMemory]
    regions: tuple[RegionDecision, ...]
    reason: str

    @property
    def changed(self) -> bool:
        return any(r.old_weight != r.new_weight for r in self.regions)


RECENT_MASK = (1 << 16) - 1  # runs kept in RegionMemory.recent


@dataclass
class _Plan:
    status: Status
    target: int
    detail: str = ""
    steps: bool = True  # bound the move by the step sizes (not for pins)
    receives: int | None = None  # rank among the regions that take what hostless ones give up (all bad)
    problems: list[str] = field(default_factory=list)


def remember(
    params: PolicyParams, signals: RegionSignals | None, memory: RegionMemory
) -> tuple[RegionMemory, list[str]]:
    """The region's streaks after this run, and what looks bad in it. Missing signals change nothing."""
    if signals is None:
        return memory, []
    problems = signals.problems(params)
    recent = ((memory.recent << 1) | bool(problems)) & RECENT_MASK
    # Slow while otherwise healthy only: a region bad for errors is drained by the hard-fault rules, and its
    # slow minutes then must not hold it at the floor once it recovers.
    slow = ((memory.slow << 1) | (signals.slow(params) and not problems)) & RECENT_MASK
    if problems:
        return RegionMemory(memory.bad_runs + 1, 0, recent, slow), problems
    return RegionMemory(0, memory.good_runs + 1, recent, slow), problems


def confirmed_bad(params: PolicyParams, memory: RegionMemory, problems: list[str]) -> bool:
    """Bad for long enough to drain: `bad_runs_to_drain` runs in a row, or M of the last N runs."""
    # Only on a bad run: a good run after a long outage holds (recovering) rather than dropping again.
    return bool(problems) and (memory.bad_runs >= params.bad_runs_to_drain or memory.flapping(params))


def balanced_shares(signals: Mapping[str, RegionSignals], followed: Mapping[str, int]) -> dict[str, float]:
    """Each region's part (summing to 1) at which every region runs at the same utilisation.

    A region's demand follows its weight: load_i = w_i / c_i, c_i its weight per request a second (per slot
    of demand where request rates are not published: `_drawn`), measured: the weights the signals' minute
    followed, over what it drew in it (the weight now would mistake the lag for a change of c, and swing).
    Equal utilisation (load_i / slots_i the same everywhere) needs w_i in proportion to slots_i x c_i. A
    region whose c cannot be measured (no weight, no load) takes the median of the others'; with no load
    anywhere the split is by slots alone. The same split follows spare capacity at low load and equalises
    utilisation in a global overload."""
    measured = {
        r: followed.get(r, 0) / drawn
        for r, s in signals.items()
        if followed.get(r, 0) > 0
        and s.load >= MIN_LOAD / max(len(signals), 1)
        and s.serving_slots > 0
        and (drawn := _drawn(s, by_requests(signals))) > 0
    }
    if sum(s.load for s in signals.values()) < MIN_LOAD or not measured:
        raw = {r: s.serving_slots for r, s in signals.items()}
    else:
        typical = statistics.median(measured.values())
        # Within a factor of the median: load that does not follow the weight (resolvers ignoring TTLs,
        # long streams) would otherwise read as an ever smaller c and hold a region at the floor for ever.
        raw = {
            r: s.serving_slots * min(max(measured.get(r, typical), typical / C_SPREAD), typical * C_SPREAD)
            for r, s in signals.items()
        }
    for r, factor in slower_than_typical(signals).items():
        raw[r] *= factor
    total = sum(raw.values())
    if total <= 0:
        return {r: 1 / len(signals) for r in signals} if signals else {}
    return {r: value / total for r, value in raw.items()}


def slower_than_typical(signals: Mapping[str, RegionSignals]) -> dict[str, float]:
    """Regions whose requests take far longer than the typical region's, each with the typical time over
    its own: the share of a slot's requests it serves. A slot serves 1 / (time in system) requests a
    second (Little's law: requests in flight over the request rate), so engines at a third of their speed
    serve a third of the requests per slot, while their slots and the latency term see nothing until they
    reach their bound. Only past SLOW_TIME_FACTOR, so load alone (a request takes longer near the bound)
    does not move weight the balancing moves anyway; never below SLOWEST_SPEED."""
    times = {
        # Of the requests admitted: the rate counts those shed at the edge too, which hold no slot.
        r: s.requests_in_flight / (s.requests_per_second * (1.0 - s.shed_share))
        for r, s in signals.items()
        if s.requests_per_second
        and s.requests_per_second > 0
        and s.shed_share < 1.0
        and s.load >= MIN_LOAD / len(signals)
    }
    if len(times) < 2:
        return {}
    typical = statistics.median(times.values())
    return {r: max(typical / t, SLOWEST_SPEED) for r, t in times.items() if t > SLOW_TIME_FACTOR * typical}


def by_requests(signals: Mapping[str, RegionSignals]) -> bool:
    """Whether every region's request rate is known: c is then measured per request, else per slot of
    demand."""
    return bool(signals) and all(s.requests_per_second is not None for s in signals.values())


def _drawn(signals: RegionSignals, requests: bool) -> float:
    """What a region's weight drew in the minute: its request rate where every region's is known, else its
    demand in slots. Requests in flight are the rate times the time each takes (Little's law), and that
    time grows with load (1.9 s at a tenth of a fleet's bound, 7.5 s at it, on the game day's curves):
    measured in flight, a region given more weight seems to draw more for it than it does, is given less
    next run, and the weights swing (the unplanned-surge game day: a cell between 9 and 25 beside its
    twin, shedding at the top of each swing). The request rate grows with the weight alone."""
    if requests and signals.requests_per_second is not None:
        return signals.requests_per_second
    return signals.load


def balanced_targets(
    params: PolicyParams, budget: int, signals: Mapping[str, RegionSignals], followed: Mapping[str, int]
) -> dict[str, float]:
    """`budget` over healthy regions by `balanced_shares` (fractional): exactly their shares, except that
    no region goes below one above the floor (those at it leave the rest to share the remainder) or above
    255. The floor itself marks a drained region (Route 53 still answers with it so its recovery shows):
    a healthy region short of capacity gets little weight, but is never taken for drained."""
    shares = balanced_shares(signals, followed)
    least = params.floor + 1
    fixed: dict[str, float] = {}
    while True:
        free = {r: v for r, v in shares.items() if r not in fixed}
        left = max(budget - sum(fixed.values()), 0)
        total = sum(free.values())
        exact = {r: (left * v / total if total > 0 else left / len(free)) for r, v in free.items()}
        low = {r: float(least) for r, w in exact.items() if w < least}
        high = {r: float(MAX_WEIGHT) for r, w in exact.items() if w > MAX_WEIGHT}
        if not (low or high) or len(fixed) + len(low) + len(high) >= len(shares):
            found = {**fixed, **{r: min(max(w, least), MAX_WEIGHT) for r, w in exact.items()}}
            # In the regions' own order, whichever were fixed: rounding gives ties to the first named, and
            # an order that changed with the run gave a tied unit to each of two regions in turn for ever.
            return {r: found[r] for r in shares}
        fixed.update(low or high)


def grown_budget(params: PolicyParams, budget: int, shares: Mapping[str, float]) -> int:
    """The total the healthy regions' weights add up to: `budget`, or more where a region's balanced share
    of it is below one above the floor. The least a healthy region weighs is floor + 1 (the floor marks a
    drained one), so out of 100 it draws at least 6% of the traffic whatever its capacity: a region that
    could not get hosts for an event (the capacity-imbalance game day, its traffic 1% higher: 12 tasks,
    153 requests/s within the objective, 224 offered at weight 6) shed a third of its requests for 40
    minutes while the others ran at half their capacity. Weights are shares of their sum (Route 53
    Developer Guide, "Weighted routing": traffic to a record is its weight over the sum of the group's
    weights, each 0-255), so a larger sum gives the small region its share at floor + 1; the sum grows
    only as far as every weight stays within Route 53's 255."""
    positive = [share for share in shares.values() if share > 0]
    if budget <= 0 or not positive:
        return budget
    needed = (params.floor + 1) / (min(positive) * budget)
    room = MAX_WEIGHT / (max(positive) * budget)
    return max(budget, math.floor(budget * min(needed, room)))


def spare_capacity_targets(
    params: PolicyParams, budget: int, signals: Mapping[str, RegionSignals]
) -> dict[str, int]:
    """Split `budget` between healthy regions in proportion to their spare slots, each at least the floor
    (what freed weight follows when every region looks bad: by capacity, never by name)."""
    spare = {region: s.spare_slots for region, s in signals.items()}
    if sum(spare.values()) <= 0:
        spare = {region: s.serving_slots for region, s in signals.items()}
    total = sum(spare.values())
    above_floor = max(budget - params.floor * len(spare), 0)
    return {
        region: min(MAX_WEIGHT, params.floor + (round(above_floor * value / total) if total > 0 else 0))
        for region, value in spare.items()
    }


def step_toward(current: float, target: float) -> float:
    """One run's move from `current` toward `target`: GAIN of the gap, at least one unit once the gap is
    DEADBAND or more (a fixed margin: no dead zone that grows with load), never past the target."""
    gap = target - current
    if abs(gap) < DEADBAND:
        return current
    move = max(1.0, abs(gap) * GAIN)
    return current + math.copysign(min(move, abs(gap)), gap)


def _bounded(current: int, target: int, up: int, down: int) -> int:
    return current + max(-down, min(up, target - current))


def decide(
    params: PolicyParams,
    budget: int,
    current: Mapping[str, int],
    signals: Mapping[str, RegionSignals | None],
    memory: Mapping[str, RegionMemory],
    pins: Mapping[str, int] | None = None,
    followed: Mapping[str, int] | None = None,
) -> Decision:
    """One orchestrator run. `current` names every region with its weight now; `budget` is the sum the
    healthy regions' weights aim for (the configured initial weights' sum); `pins` are an operator's;
    `followed` the weights in force in the minute the signals are from (default: `current`)."""
    pins = {region: weight for region, weight in (pins or {}).items() if region in current}
    new_memory: dict[str, RegionMemory] = {}
    plans: dict[str, _Plan] = {}
    eligible: dict[str, RegionSignals] = {}
    for region, weight in current.items():
        region_signals = signals.get(region)
        # A region the orchestrator has no memory of (its first run) is trusted: it needs one healthy run.
        start = RegionMemory(good_runs=params.healthy_runs_to_recover - 1)
        new_memory[region], problems = remember(params, region_signals, memory.get(region, start))
        streak = new_memory[region]
        if region in pins:
            plans[region] = _Plan(Status.PINNED, pins[region], "operator override", steps=False)
        elif region_signals is None:
            plans[region] = _Plan(Status.MISSING, weight, "no metrics: weight holds")
        elif confirmed_bad(params, streak, problems):
            detail = ", ".join(problems) or (
                f"bad in {streak.bad_in_window(params)} of the last {params.window_runs} runs"
            )
            plans[region] = _Plan(Status.DEGRADED, params.floor, detail, problems=problems)
        elif problems:
            detail = f"{', '.join(problems)} ({streak.bad_runs}/{params.bad_runs_to_drain} runs)"
            plans[region] = _Plan(Status.SUSPECT, weight, detail, problems=problems)
        elif streak.good_runs < params.healthy_runs_to_recover:
            detail = f"healthy {streak.good_runs}/{params.healthy_runs_to_recover} runs"
            plans[region] = _Plan(Status.RECOVERING, weight, detail)
        else:
            eligible[region] = region_signals
            plans[region] = _Plan(Status.HEALTHY, weight)

    looked_at = [p for p in plans.values() if p.status is not Status.PINNED]
    bad = (Status.DEGRADED, Status.SUSPECT, Status.MISSING)
    nobody_healthy = looked_at and all(p.problems or p.status in bad for p in looked_at)
    if nobody_healthy:
        reason = _when_nobody_is_healthy(params, current, signals, plans)
    else:
        reason = ""
        _rebalance(params, budget, current, eligible, plans, followed or current, new_memory)
    weights: dict[str, int] = {}
    for region, plan in plans.items():
        weight = current[region]
        if not plan.steps:
            weights[region] = plan.target
        elif plan.status is Status.DEGRADED:
            weights[region] = _bounded(weight, plan.target, params.gain_step, params.drop_step)
        else:
            weights[region] = _bounded(weight, plan.target, params.gain_step, params.gain_step)
        weights[region] = max(0, min(MAX_WEIGHT, weights[region]))

    if nobody_healthy:
        _give_freed_weight(params, current, weights, plans, signals)

    if sum(weights.values()) == 0:
        reason = "every weight would be 0: every region set to the floor so DNS still answers"
        weights = {region: params.floor for region in current}
        for plan in plans.values():
            plan.steps = False

    regions = tuple(
        RegionDecision(region, plan.status, current[region], weights[region], plan.detail)
        for region, plan in plans.items()
    )
    if not reason:
        reason = summarize(regions)
    return Decision(weights=weights, memory=new_memory, regions=regions, reason=reason)


def utilization(eligible: Mapping[str, RegionSignals]) -> float:
    """Requests in flight over serving slots across the healthy regions, 0-1."""
    slots = sum(s.serving_slots for s in eligible.values())
    if slots <= 0:
        return 1.0
    return min(sum(s.requests_in_flight for s in eligible.values()) / slots, 1.0)


def _rebalance(
    params: PolicyParams,
    budget: int,
    current: Mapping[str, int],
    eligible: Mapping[str, RegionSignals],
    plans: dict[str, _Plan],
    followed: Mapping[str, int],
    memory: Mapping[str, RegionMemory] | None = None,
) -> None:
    """Healthy regions move toward the weights that equalise their utilisation (`balanced_targets`), GAIN
    of the way per run, within the latency term's caps (`latency_caps`: what a slow region gives up goes
    to the fast regions with room). The healthy regions' total is not damped (load does not follow it:
    shares are relative), so it never creeps toward the budget."""
    if not eligible:
        return
    others = sum(p.target for r, p in plans.items() if r not in eligible)
    share_budget = max(budget - others, 0)
    seen = {r: followed.get(r, current[r]) for r in current}
    held = sum(current[region] for region in eligible)
    grown = share_budget
    if others == 0:
        # Every weight is the healthy regions' to set: their sum may grow so that a region with little
        # capacity is not held above its share by the least weight a healthy region keeps (a region that
        # holds, recovers or is pinned keeps its weight, so then the sum stays, and with it their shares).
        grown = grown_budget(params, share_budget, balanced_shares(eligible, seen))
        if share_budget < grown and share_budget < held and abs(grown - held) <= 1:
            # The grown sum is a whole number from shares measured on the weights themselves, so it can
            # flip by one between runs (474, 475, 474...) and the unit with it between two regions for
            # ever: within one of the sum in force, that sum stays.
            grown = held
    targets = balanced_targets(params, grown, eligible, seen)
    wanted = {
        region: step_toward(current[region] * grown / held, target) if held > 0 else target
        for region, target in targets.items()
    }
    total = grown
    if grown > share_budget and held > 0:
        # The sum grows only as fast as the gain step lets the regions that gain follow: grown at once, the
        # gainers' steps would be cut short while the small region's share is not, and its share would
        # rise for a few runs before it fell (a third more, on test_overload's region short of capacity).
        asked = sum(wanted.values())
        reach = min((current[r] + params.gain_step) * asked / w for r, w in wanted.items() if w > 0)
        step_up = math.floor(reach)
        if grown > held:
            # While it may grow the sum never falls back, and gains at least a unit a run where the gainers
            # can follow: with a small gain step beside a large weight the reach is under a unit past the
            # sum in force, and its floor held the sum there, or took it back a unit, for ever (a region of
            # no capacity flipping between the floor and one above it: the steady-inputs property).
            step_up = max(step_up, held + 1 if reach > held else held)
        total = max(share_budget, min(grown, step_up))
    # Whole weights adding up to the healthy regions' budget exactly, so no total creeps run to run.
    whole = apportion(min(total, MAX_WEIGHT * len(wanted)), wanted)
    if total != grown:
        # A sum still growing is smaller than the one the targets were shared from: a region at its least
        # weight keeps it, the others share the rest.
        least = params.floor + 1
        low = {r for r, w in whole.items() if w < least}
        if low and len(low) < len(whole):
            rest = {r: w for r, w in wanted.items() if r not in low}
            whole = {**dict.fromkeys(low, least), **apportion(max(total - least * len(low), 0), rest)}
    caps, receivers = latency_caps(params, current, eligible, memory or {}, followed)
    whole = give_to_receivers(whole, caps, receivers, eligible, followed)
    slower = slower_than_typical(eligible)
    for region, weight in whole.items():
        plans[region].target = min(weight, MAX_WEIGHT)
        signals = eligible[region]
        if region in caps and caps[region] < current[region]:
            plans[region].detail = (
                f"first tokens slow ({signals.slow_first_token_share:.1%} over the objective) while "
                f"{', '.join(sorted(receivers))} have room: gives weight away"
            )
        elif region in caps and weight == caps[region] and weight < wanted[region]:
            plans[region].detail = "slow lately: holds until fast for a while"
        elif weight != current[region]:
            utilisation = signals.load / signals.serving_slots if signals.serving_slots else 0.0
            plans[region].detail = f"utilisation {utilisation:.0%} -> {targets[region]:.0f}"
            if region in slower:
                plans[
                    region
                ].detail += (
                    f" (requests take far longer than elsewhere: {slower[region]:.0%} of its slots counted)"
                )


def latency_caps(
    params: PolicyParams,
    current: Mapping[str, int],
    eligible: Mapping[str, RegionSignals],
    memory: Mapping[str, RegionMemory],
    followed: Mapping[str, int],
) -> tuple[dict[str, int], set[str]]:
    """The latency term: the most each slow healthy region may weigh this run, and the regions that take
    what they give up.

    Equal utilisation gives a region whose engines lost speed its full share, and it misses the first-token
    objective at that share. Weight leaves it only while another region can take it: fast (not slow in the
    last SLOW_HOLD_RUNS runs) with spare slots. When none can (every region slow: a global overload), no
    region is capped and weight follows spare slots alone: overload is not degradation. A region slow in
    each of the last `bad_runs_to_drain` runs gives LATENCY_CUT of the weight its minute followed; one slow
    in any of the last SLOW_HOLD_RUNS runs holds its weight (gains none): the hysteresis that keeps a region
    whose slowness comes and goes with its load from swinging. Never below one above the floor: latency
    moves weight, it never drains a region (the floor marks drained)."""
    receivers = {
        r
        for r, s in eligible.items()
        if not memory.get(r, RegionMemory()).slow_lately()
        and not s.slow(params)
        and s.spare_slots > 0
        and s.shed_share <= RECEIVER_SHED_SHARE
    }
    caps: dict[str, int] = {}
    if not receivers:
        return caps, receivers
    least = params.floor + 1
    for region, signals in eligible.items():
        streak = memory.get(region, RegionMemory())
        if region in receivers or not streak.slow_lately():
            continue
        if signals.slow(params) and streak.slow_confirmed(params):
            cut = math.floor(followed.get(region, current[region]) * (1 - LATENCY_CUT))
            caps[region] = max(min(cut, current[region]), min(least, current[region]))
        else:
            caps[region] = current[region]
    return caps, receivers


def give_to_receivers(
    weights: Mapping[str, int],
    caps: Mapping[str, int],
    receivers: set[str],
    eligible: Mapping[str, RegionSignals],
    followed: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """`weights` with each capped region at its cap at most, what that frees split over the receivers in
    proportion to their spare slots, each taking no more than its room (`room_in_weight`: the weight it can
    take without running past its slots) and 255; what they cannot take stays where it was. Sized by spare
    slots alone, a receiver with a few slots to spare took the whole cut: the surge-2.5x-event game day
    moved 10 of us-east-1's weight to us-east-2 at 98% of its bound, which then shed a fifth of its
    requests."""
    result = dict(weights)
    freed = 0
    for region, cap in caps.items():
        if result[region] > cap:
            freed += result[region] - cap
            result[region] = cap
    if freed <= 0 or not receivers:
        return result
    spare = {r: eligible[r].spare_slots for r in sorted(receivers)}
    # Room is measured at the weight the receiver's minute followed; what this run already gave it counts.
    drew = {r: (followed or weights).get(r, weights[r]) for r in spare}
    limit = {
        r: max(math.floor(room_in_weight(drew[r], eligible[r]) - max(result[r] - drew[r], 0)), 0)
        for r in spare
    }
    for region, extra in apportion(min(freed, sum(limit.values())), spare).items():
        taken = min(extra, limit[region], MAX_WEIGHT - result[region])
        result[region] += taken
        freed -= taken
    if freed > 0:  # no receiver has room for more (or all are at 255): the capped regions keep the rest
        for region in caps:
            back = min(freed, weights[region] - result[region])
            result[region] += back
            freed -= back
    return result


def room_in_weight(weight: float, signals: RegionSignals) -> float:
    """The weight a region (or cell) could take on without running past its slots: its spare slots, at the
    weight per slot of demand it shows now (its slots' share of its weight when it has no load to measure
    by)."""
    if signals.serving_slots <= 0:
        return 0.0
    if signals.load >= 1.0 and weight > 0:
        return signals.spare_slots * weight / signals.load
    return float(weight) * signals.spare_slots / signals.serving_slots


def apportion(
    total: int, shares: Mapping[str, float], toward: Mapping[str, float] | None = None
) -> dict[str, int]:
    """`total` in whole weights in proportion to `shares` (equal parts when all are 0), adding up exactly:
    largest remainders first, ties to the first named. With `toward`, the units rounding leaves go first to
    the names furthest below their weight there (a name it lacks: its exact share), then by remainder."""
    if not shares:
        return {}
    amount = sum(shares.values())
    exact = {
        name: (total * share / amount if amount > 0 else total / len(shares))
        for name, share in shares.items()
    }
    result = {name: int(value) for name, value in exact.items()}
    left = total - sum(result.values())
    target = toward or {}
    order = sorted(exact, key=lambda n: (-(target.get(n, exact[n]) - result[n]), -(exact[n] - result[n])))
    for name in order[:left]:
        result[name] += 1
    return result


def rank(signals: RegionSignals) -> tuple[int, int, int, float, float]:
    """Smaller is better: hosts at all, enough hosts, fewer problems, fewer errors, fewer slow streams."""
    return (
        signals.healthy_hosts == 0,
        signals.healthy_hosts < signals.min_hosts,
        int(signals.degraded),
        signals.error_share,
        signals.slow_first_token_share,
    )


def _when_nobody_is_healthy(
    params: PolicyParams,
    current: Mapping[str, int],
    signals: Mapping[str, RegionSignals | None],
    plans: dict[str, _Plan],
) -> str:
    """Every region looks bad or is missing. Holding the last weights could keep most traffic on a region
    with no healthy host at all, so: regions with no healthy hosts (confirmed bad) still drain to the floor
    within drain_runs; what they give up goes to the best-ranked region that has hosts; the rest hold."""
    if all(p.status is Status.MISSING for p in plans.values() if p.status is not Status.PINNED):
        for region, plan in plans.items():
            if plan.status is not Status.PINNED:
                plan.target = current[region]
        return "no region reported metrics: last weights kept"
    read = {r: s for r, s in signals.items() if s is not None and r in plans}
    ranked = sorted(
        (r for r, p in plans.items() if p.status in (Status.DEGRADED, Status.SUSPECT) and r in read),
        key=lambda r: (rank(read[r]), r),
    )
    hostless = [r for r in ranked if read[r].healthy_hosts == 0 and plans[r].status is Status.DEGRADED]
    for region, plan in plans.items():
        if plan.status is Status.PINNED or region in hostless:
            continue
        plan.target = current[region]
    receivers = [r for r in ranked if r not in hostless]
    for position, region in enumerate(receivers):
        plans[region].receives = position
    order = " > ".join(ranked)
    if hostless:
        return (
            f"every region looks bad or is missing; ranked {order}: {', '.join(hostless)} without healthy "
            f"hosts drain to the floor" + (", their weight goes by spare slots" if receivers else "")
        )
    return f"every region looks bad or is missing; ranked {order}: last weights kept rather than guess"


def _give_freed_weight(
    params: PolicyParams,
    current: Mapping[str, int],
    weights: dict[str, int],
    plans: dict[str, _Plan],
    signals: Mapping[str, RegionSignals | None],
) -> None:
    """The weight regions without hosts gave up this run goes to the receivers in proportion to their spare
    slots (their slots when none has spare), never by rank or name, each at most max_step, so the hostless
    regions' share falls as fast as their weight."""
    freed = sum(
        current[r] - weights[r]
        for r, p in plans.items()
        if p.status is Status.DEGRADED and weights[r] < current[r] and p.receives is None
    )
    receivers = {r: signals[r] for r, p in plans.items() if p.receives is not None and signals.get(r)}
    if freed <= 0 or not receivers:
        return
    spare = {r: s.spare_slots for r, s in receivers.items()}  # type: ignore[union-attr]
    if sum(spare.values()) <= 0:
        spare = {r: s.serving_slots for r, s in receivers.items()}  # type: ignore[union-attr]
    if sum(spare.values()) <= 0:
        spare = dict.fromkeys(receivers, 1.0)
    total = sum(spare.values())
    for region, value in spare.items():
        gain = min(round(freed * value / total), params.max_step, MAX_WEIGHT - weights[region])
        if gain > 0:
            weights[region] += gain
            plans[region].detail = f"takes +{gain} of the freed weight by spare slots"


def summarize(regions: tuple[RegionDecision, ...]) -> str:
    """One line: what moved and why, or that nothing did."""
    parts = []
    for r in regions:
        if r.status is Status.HEALTHY and r.old_weight == r.new_weight:
            continue
        move = f"{r.old_weight}->{r.new_weight}" if r.old_weight != r.new_weight else f"holds {r.new_weight}"
        parts.append(f"{r.region} {r.status}: {move}" + (f" ({r.detail})" if r.detail else ""))
    return "; ".join(parts) if parts else "all healthy: weights steady"
