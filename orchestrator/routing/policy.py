"""The routing policy as pure functions: one run's signals and memory in, the new weights and why out.

Weights follow spare healthy capacity. A region that stays bad drops to the floor within `drain_runs`
runs of its first bad one (after `bad_runs_to_drain` runs confirm it, so one bad minute moves nothing),
and must look healthy for `healthy_runs_to_recover` runs before it gains weight back, a bounded step
per run, damped so that weights settle when requests in flight follow them. Missing metrics hold a
region where it is; when no region looks healthy, regions without healthy hosts still drain and the rest
hold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

MAX_WEIGHT = 255  # Route 53 weights are 0-255
# Rebalancing between healthy regions ignores differences this small, so noise does not move weights.
DEADBAND = 2


@dataclass(frozen=True)
class PolicyParams:
    slow_first_token_share: float = 0.01
    error_share: float = 0.01
    floor: int = 5
    gain_step: int = 10
    bad_runs_to_drain: int = 2
    drain_runs: int = 3
    healthy_runs_to_recover: int = 3

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

    def problems(self, params: PolicyParams) -> list[str]:
        found = []
        if self.degraded:
            found.append("drain alarm in ALARM")
        if self.slow_first_token_share > params.slow_first_token_share:
            found.append(f"slow first tokens {self.slow_first_token_share:.1%}")
        if self.error_share > params.error_share:
            found.append(f"errors {self.error_share:.1%}")
        if self.healthy_hosts < self.min_hosts:
            found.append(f"{self.healthy_hosts} healthy hosts < {self.min_hosts}")
        return found

    @property
    def spare_slots(self) -> float:
        return max(self.serving_slots - self.requests_in_flight, 0.0)


@dataclass(frozen=True)
class RegionMemory:
    """What one run leaves for the next: how long a region has looked bad or healthy in a row."""

    bad_runs: int = 0
    good_runs: int = 0


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
    if problems:
        return RegionMemory(bad_runs=memory.bad_runs + 1, good_runs=0), problems
    return RegionMemory(bad_runs=0, good_runs=memory.good_runs + 1), problems


def spare_capacity_targets(
    params: PolicyParams, budget: int, signals: Mapping[str, RegionSignals]
) -> dict[str, int]:
    """Split `budget` between healthy regions in proportion to their spare slots, each at least the floor."""
    spare = {region: s.spare_slots for region, s in signals.items()}
    total = sum(spare.values())
    above_floor = max(budget - params.floor * len(spare), 0)
    return {
        region: min(MAX_WEIGHT, params.floor + round(above_floor * value / total))
        for region, value in spare.items()
    }


def _bounded(current: int, target: int, up: int, down: int) -> int:
    return current + max(-down, min(up, target - current))


def decide(
    params: PolicyParams,
    budget: int,
    current: Mapping[str, int],
    signals: Mapping[str, RegionSignals | None],
    memory: Mapping[str, RegionMemory],
    pins: Mapping[str, int] | None = None,
) -> Decision:
    """One orchestrator run. `current` names every region with its weight now; `budget` is the sum the
    healthy regions' weights aim for (the configured initial weights' sum); `pins` are an operator's."""
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
        elif problems and streak.bad_runs >= params.bad_runs_to_drain:
            plans[region] = _Plan(Status.DEGRADED, params.floor, ", ".join(problems), problems=problems)
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
    nobody_healthy = looked_at and all(p.problems or p.status is Status.MISSING for p in looked_at)
    if nobody_healthy:
        reason = _when_nobody_is_healthy(params, current, signals, plans)
    else:
        reason = ""
        _rebalance(params, budget, current, eligible, plans)
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
        _give_freed_weight(params, current, weights, plans)

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
) -> None:
    """Healthy regions move toward their spare-capacity targets, damped.

    Requests in flight follow the weights: a region given more weight gets more requests, so less spare,
    so a lower target next run. If load is proportional to weight, the distance to the steady weights
    is multiplied each run by -u/(1-u) (u: utilization), which swings for ever above u = 0.5 when the
    whole gap is taken. Moving (1-u)/2 of the way to the target halves the distance every run instead,
    at any load. The healthy regions' total is not damped (load does not follow it: shares are relative),
    so it never creeps toward the budget. A target within DEADBAND moves nothing."""
    spare_total = sum(s.spare_slots for s in eligible.values())
    if not eligible or spare_total <= 0:
        return
    others = sum(p.target for r, p in plans.items() if r not in eligible)
    share_budget = max(budget - others, 0)
    targets = spare_capacity_targets(params, share_budget, eligible)
    damping = (1.0 - utilization(eligible)) / 2
    held = sum(current[region] for region in eligible)
    for region, target in targets.items():
        # Only the split is damped: the healthy regions' total goes straight to what they share.
        scaled = current[region] * share_budget / held if held > 0 else target
        wanted = scaled + damping * (target - scaled)
        # A move under one whole unit is rounding noise: it would flicker a weight by 1 for ever.
        if abs(target - current[region]) > DEADBAND and abs(wanted - current[region]) >= 1:
            plans[region].target = round(wanted)
            spare = eligible[region].spare_slots
            plans[region].detail = f"spare {spare:.0f} of {spare_total:.0f} slots -> {target}"


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
            f"hosts drain to the floor" + (f", {receivers[0]} first takes their weight" if receivers else "")
        )
    return f"every region looks bad or is missing; ranked {order}: last weights kept rather than guess"


def _give_freed_weight(
    params: PolicyParams, current: Mapping[str, int], weights: dict[str, int], plans: dict[str, _Plan]
) -> None:
    """The weight regions without hosts gave up this run goes to the receivers, best first, each at most
    max_step, so their share falls as fast as their weight."""
    freed = sum(
        current[r] - weights[r]
        for r, p in plans.items()
        if p.status is Status.DEGRADED and weights[r] < current[r] and p.receives is None
    )
    for region, plan in sorted(
        ((r, p) for r, p in plans.items() if p.receives is not None), key=lambda item: item[1].receives or 0
    ):
        gain = min(freed, params.max_step, MAX_WEIGHT - weights[region])
        if gain > 0:
            weights[region] += gain
            freed -= gain
            plan.detail = f"best-ranked of the bad regions: +{gain}"


def summarize(regions: tuple[RegionDecision, ...]) -> str:
    """One line: what moved and why, or that nothing did."""
    parts = []
    for r in regions:
        if r.status is Status.HEALTHY and r.old_weight == r.new_weight:
            continue
        move = f"{r.old_weight}->{r.new_weight}" if r.old_weight != r.new_weight else f"holds {r.new_weight}"
        parts.append(f"{r.region} {r.status}: {move}" + (f" ({r.detail})" if r.detail else ""))
    return "; ".join(parts) if parts else "all healthy: weights steady"
