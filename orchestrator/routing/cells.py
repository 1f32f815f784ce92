"""Cells inside regions, as pure functions around the region policy.

A region of several cells is decided in two steps. First the region, like any other, on the signals of its
cells added up (hosts, slots, requests; shares weighted by hosts), leaving out a cell bad for long enough to
be drained: while one cell serves well the region is healthy, and its share follows the spare slots of the
cells it counts on. Then the region's weight is
split over its cells: a cell bad for `bad_runs_to_drain` runs steps down to the floor and its weight goes
to its sibling cells, in proportion to their spare slots, so a bad cell is drained inside its region and
its users stay in the region. Only when every cell of a region is bad does the region look bad and drain
as a whole, as a one-cell region would.

Each cell has its own streaks in the memory (under its name, `us-east-1/2`), the region its own (under the
region's name).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .policy import (
    DEADBAND,
    Decision,
    PolicyParams,
    RegionDecision,
    RegionMemory,
    RegionSignals,
    Status,
    decide,
    remember,
    summarize,
    utilization,
)


def region_signals_of(
    params: PolicyParams, cells: Sequence[RegionSignals | None], drained: Sequence[bool] = ()
) -> RegionSignals | None:
    """The region as its cells add up, leaving out those bad for long enough to be drained (`drained`, one
    flag per cell); when every cell is drained, as its worst cells say (shares at their highest, so a
    region of bad cells never averages into a healthy one). None when no cell reported."""
    flags = list(drained) or [False] * len(cells)
    reported = [s for s in cells if s is not None]
    if not reported:
        return None
    kept = [s for s, gone in zip(cells, flags, strict=True) if s is not None and not gone]
    chosen = kept or reported
    hosts = sum(s.healthy_hosts for s in chosen)
    if kept:
        weights = [s.healthy_hosts or 1 for s in chosen]
        slow = sum(s.slow_first_token_share * w for s, w in zip(chosen, weights, strict=True)) / sum(weights)
        failed = sum(s.error_share * w for s, w in zip(chosen, weights, strict=True)) / sum(weights)
    else:
        slow = max(s.slow_first_token_share for s in chosen)
        failed = max(s.error_share for s in chosen)
    combined = RegionSignals(
        slow_first_token_share=slow,
        error_share=failed,
        healthy_hosts=hosts,
        min_hosts=sum(s.min_hosts for s in chosen),
        serving_slots=sum(s.serving_slots for s in chosen),
        requests_in_flight=sum(s.requests_in_flight for s in chosen),
        degraded=any(s.degraded for s in chosen),
    )
    if not kept and not combined.problems(params):
        # Every cell is bad, each for its own reason (one short of hosts, one with errors): so is the region.
        combined = RegionSignals(**{**vars(combined), "degraded": True})
    return combined


def apportion(total: int, shares: Mapping[str, float]) -> dict[str, int]:
    """`total` in whole weights in proportion to `shares` (equal parts when all are 0), adding up exactly:
    largest remainders first, ties to the first named."""
    if not shares:
        return {}
    amount = sum(shares.values())
    exact = {
        name: (total * share / amount if amount > 0 else total / len(shares))
        for name, share in shares.items()
    }
    result = {name: int(value) for name, value in exact.items()}
    left = total - sum(result.values())
    for name in sorted(exact, key=lambda n: -(exact[n] - result[n]))[:left]:
        result[name] += 1
    return result


def split_region(
    params: PolicyParams,
    total: int,
    names: Sequence[str],
    current: Mapping[str, int],
    signals: Mapping[str, RegionSignals | None],
    memory: Mapping[str, RegionMemory],
) -> tuple[dict[str, int], dict[str, RegionMemory], list[RegionDecision]]:
    """A region's weight `total` over its cells; the cells' new memory and what each did and why."""
    start = RegionMemory(good_runs=params.healthy_runs_to_recover - 1)
    new_memory: dict[str, RegionMemory] = {}
    status: dict[str, Status] = {}
    detail: dict[str, str] = {}
    for name in names:
        new_memory[name], problems = remember(params, signals.get(name), memory.get(name, start))
        streak = new_memory[name]
        if signals.get(name) is None:
            status[name], detail[name] = Status.MISSING, "no metrics: weight holds"
        elif problems and streak.bad_runs >= params.bad_runs_to_drain:
            status[name], detail[name] = Status.DEGRADED, f"{', '.join(problems)}: drained inside its region"
        elif problems:
            status[name] = Status.SUSPECT
            detail[name] = f"{', '.join(problems)} ({streak.bad_runs}/{params.bad_runs_to_drain} runs)"
        elif streak.good_runs < params.healthy_runs_to_recover:
            status[name] = Status.RECOVERING
            detail[name] = f"healthy {streak.good_runs}/{params.healthy_runs_to_recover} runs"
        else:
            status[name], detail[name] = Status.HEALTHY, ""

    takers = [n for n in names if status[n] is Status.HEALTHY] or [
        n for n in names if status[n] is Status.RECOVERING
    ]
    if not takers:
        # No cell to take weight: keep the cells' proportions; the region's own decision drains it whole.
        weights = apportion(total, {n: float(current.get(n, 0)) for n in names})
    else:
        held: dict[str, int] = {}
        for name in names:
            if name in takers:
                continue
            weight = current.get(name, 0)
            if status[name] is Status.DEGRADED:
                weight = min(weight, max(params.floor, weight - params.drop_step))
            held[name] = weight
        if sum(held.values()) > total:
            held = apportion(total, {n: float(w) for n, w in held.items()})
        spare = {n: signals[n].spare_slots for n in takers}  # type: ignore[union-attr]
        weights = {**held, **_damped_split(total - sum(held.values()), takers, current, signals)}
        for name in takers:
            spare_total = sum(spare.values())
            if spare_total > 0 and status[name] is Status.HEALTHY:
                detail[name] = f"spare {spare[name]:.0f} of {spare_total:.0f} slots in the region"
    decisions = [
        RegionDecision(name, status[name], current.get(name, 0), weights[name], detail[name])
        for name in names
    ]
    return {name: weights[name] for name in names}, new_memory, decisions


def _damped_split(
    total: int,
    takers: Sequence[str],
    current: Mapping[str, int],
    signals: Mapping[str, RegionSignals | None],
) -> dict[str, int]:
    """`total` over the cells that take weight: toward their spare slots, damped as regions are.

    A cell's requests follow its weight, so its spare slots follow the split: taking the whole gap every
    run swaps two cells near their cliff between all and nothing each minute (the game day's unplanned
    surge). As in the region policy (`policy._rebalance`), each run moves (1-u)/2 of the way from the
    current split to the spare-slot split (u: the cells' utilization), and a cell within DEADBAND of its
    target keeps its share."""
    taking = {n: signals[n] for n in takers if signals.get(n) is not None}
    spare = {n: s.spare_slots for n, s in taking.items()}  # type: ignore[union-attr]
    targets = apportion(total, spare)
    held = sum(current.get(n, 0) for n in takers)
    if held <= 0 or sum(spare.values()) <= 0:
        return targets
    damping = (1.0 - utilization(taking)) / 2  # type: ignore[arg-type]
    wanted: dict[str, float] = {}
    for name in takers:
        scaled = current.get(name, 0) * total / held
        target = targets.get(name, scaled)
        moved = scaled + damping * (target - scaled)
        wanted[name] = moved if abs(target - scaled) > DEADBAND and abs(moved - scaled) >= 1 else scaled
    return apportion(total, wanted)


def _drained(
    params: PolicyParams,
    name: str,
    signals: Mapping[str, RegionSignals | None],
    memory: Mapping[str, RegionMemory],
) -> bool:
    """The cell is bad this run and has been for long enough to drain: the region no longer counts on it."""
    start = RegionMemory(good_runs=params.healthy_runs_to_recover - 1)
    streak, problems = remember(params, signals.get(name), memory.get(name, start))
    return bool(problems) and streak.bad_runs >= params.bad_runs_to_drain


def decide_cells(
    params: PolicyParams,
    budget: int,
    current: Mapping[str, int],
    signals: Mapping[str, RegionSignals | None],
    memory: Mapping[str, RegionMemory],
    groups: Mapping[str, Sequence[str]],
    pins: Mapping[str, int] | None = None,
) -> Decision:
    """One orchestrator run over regions some of which have cells. `groups` maps each region to its
    targets' names (the region itself when it is one cell); `current`, `signals` and the result's weights
    are per target. Pins name targets (a cell, or a one-cell region) and hold whatever the policy says."""
    pins = dict(pins or {})
    celled = {region: tuple(names) for region, names in groups.items() if tuple(names) != (region,)}
    if not celled:
        return decide(params, budget, current, signals, memory, pins=pins)
    region_current = {region: sum(current[name] for name in names) for region, names in groups.items()}
    region_signals = {
        region: region_signals_of(
            params, [signals.get(n) for n in names], [_drained(params, n, signals, memory) for n in names]
        )
        if region in celled
        else signals.get(region)
        for region, names in groups.items()
    }
    region_pins = {name: weight for name, weight in pins.items() if name in groups and name not in celled}
    for region, names in celled.items():
        if all(name in pins for name in names):
            region_pins[region] = sum(pins[name] for name in names)
    region_memory = {region: memory[region] for region in groups if region in memory}
    by_region = decide(params, budget, region_current, region_signals, region_memory, pins=region_pins)

    weights: dict[str, int] = {}
    new_memory = dict(by_region.memory)
    decisions: list[RegionDecision] = []
    for region, names in groups.items():
        if region not in celled:
            weights[region] = by_region.weights[region]
            decisions.extend(d for d in by_region.regions if d.region == region)
            continue
        split, cell_memory, cell_decisions = split_region(
            params, by_region.weights[region], names, current, signals, memory
        )
        new_memory.update(cell_memory)
        for index, cell_decision in enumerate(cell_decisions):
            if cell_decision.region in pins:
                split[cell_decision.region] = pins[cell_decision.region]
                cell_decisions[index] = RegionDecision(
                    cell_decision.region,
                    Status.PINNED,
                    cell_decision.old_weight,
                    pins[cell_decision.region],
                    "operator override",
                )
        weights.update(split)
        decisions.extend(cell_decisions)
    regions = tuple(decisions)
    special = by_region.reason != summarize(by_region.regions)
    reason = by_region.reason if special else summarize(regions)
    return Decision(weights=weights, memory=new_memory, regions=regions, reason=reason)
