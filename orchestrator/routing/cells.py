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

import math
from collections.abc import Mapping, Sequence

from .policy import (
    MAX_WEIGHT,
    Decision,
    PolicyParams,
    RegionDecision,
    RegionMemory,
    RegionSignals,
    Status,
    apportion,
    balanced_shares,
    confirmed_bad,
    decide,
    remember,
    room_in_weight,
    step_toward,
    summarize,
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
    # The region's shed share from its demand: slots' worth of load over what was kept in flight.
    in_flight = sum(s.requests_in_flight for s in chosen)
    load = sum(s.load for s in chosen)
    shed = 1.0 - in_flight / load if load > 0 else 0.0
    combined = RegionSignals(
        slow_first_token_share=slow,
        error_share=failed,
        healthy_hosts=hosts,
        min_hosts=sum(s.min_hosts for s in chosen),
        serving_slots=sum(s.serving_slots for s in chosen),
        requests_in_flight=in_flight,
        degraded=any(s.degraded for s in chosen),
        shed_share=shed,
        requests_per_second=(
            sum(s.requests_per_second for s in chosen)  # type: ignore[misc]
            if all(s.requests_per_second is not None for s in chosen)
            else None
        ),
    )
    if not kept and not combined.problems(params):
        # Every cell is bad, each for its own reason (one short of hosts, one with errors): so is the region.
        combined = RegionSignals(**{**vars(combined), "degraded": True})
    return combined


def split_region(
    params: PolicyParams,
    total: int,
    names: Sequence[str],
    current: Mapping[str, int],
    signals: Mapping[str, RegionSignals | None],
    memory: Mapping[str, RegionMemory],
    followed: Mapping[str, int] | None = None,
) -> tuple[dict[str, int], dict[str, RegionMemory], list[RegionDecision]]:
    """A region's weight `total` over its cells; the cells' new memory and what each did and why.

    A drained cell steps down to the floor, and its siblings take what it gives up only as far as their
    spare slots go (weight per slot of demand, measured, times spare slots): the rest leaves the region,
    whose total falls by the drained cell's share. A cell without metrics holds its weight. The weights
    returned may add up to less than `total`, never more."""
    start = RegionMemory(good_runs=params.healthy_runs_to_recover - 1)
    new_memory: dict[str, RegionMemory] = {}
    status: dict[str, Status] = {}
    detail: dict[str, str] = {}
    for name in names:
        new_memory[name], problems = remember(params, signals.get(name), memory.get(name, start))
        streak = new_memory[name]
        if signals.get(name) is None:
            status[name], detail[name] = Status.MISSING, "no metrics: weight holds"
        elif confirmed_bad(params, streak, problems):
            why = ", ".join(problems) or f"bad in {streak.bad_in_window(params)} of {params.window_runs} runs"
            status[name], detail[name] = Status.DEGRADED, f"{why}: drained inside its region"
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

    def stepped_down(name: str) -> int:
        weight = current.get(name, 0)
        return min(weight, max(params.floor, weight - params.drop_step))

    if not takers:
        # No cell to take weight: cells without healthy hosts still step down (their weight leaves the
        # region, whose own decision drains it whole), the others keep their proportions.
        hostless = [
            n
            for n in names
            if status[n] is Status.DEGRADED and signals[n] is not None and signals[n].healthy_hosts < 1  # type: ignore[union-attr]
        ]
        held = {n: stepped_down(n) for n in hostless}
        rest = [n for n in names if n not in hostless]
        left = max(total - sum(held.values()), 0) if rest else 0
        weights = {**held, **apportion(left, {n: float(current.get(n, 0)) for n in rest})}
    else:
        held = {}
        freed = 0
        for name in names:
            if name in takers:
                continue
            weight = current.get(name, 0)
            if status[name] is Status.DEGRADED:
                weight = stepped_down(name)
                freed += current.get(name, 0) - weight
            held[name] = weight
        if sum(held.values()) > total:
            held = apportion(total, {n: float(w) for n, w in held.items()})
        room = sum(room_in_weight(current.get(n, 0), signals[n]) for n in takers)  # type: ignore[arg-type]
        # What the siblings cannot take leaves the region with the drained cell.
        taken_total = total - sum(held.values()) - math.ceil(max(freed - room, 0.0))
        weights = {
            **held,
            **_damped_split(max(taken_total, 0), takers, current, signals, followed or current),
        }
        if freed > room:
            for name in takers:
                detail[name] = f"takes {room:.0f} of the {freed} a drained sibling gave up (its spare slots)"
        for name in takers:
            if status[name] is Status.HEALTHY and not detail[name] and weights[name] != current.get(name, 0):
                detail[name] = "toward even utilisation in the region"
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
    followed: Mapping[str, int],
) -> dict[str, int]:
    """`total` over the cells that take weight, toward the split that evens their utilisation, as regions
    move (`policy.step_toward`): a cell's requests follow its weight, so taking the whole gap every run
    swaps two cells near their cliff between all and nothing; a fixed share of it converges."""
    taking = {n: s for n in takers if (s := signals.get(n)) is not None}
    if not taking:
        return apportion(total, {n: float(current.get(n, 0)) for n in takers})
    shares = balanced_shares(taking, {n: followed.get(n, current.get(n, 0)) for n in taking})
    held = sum(current.get(n, 0) for n in takers)
    if held <= 0:
        return apportion(total, {n: shares.get(n, 0.0) for n in takers})
    wanted: dict[str, float] = {}
    balanced: dict[str, float] = {}
    for name in takers:
        scaled = current.get(name, 0) * total / held
        balanced[name] = total * shares[name] if name in shares else scaled
        wanted[name] = step_toward(scaled, balanced[name]) if name in shares else scaled
    return apportion_toward(total, wanted, balanced)


def apportion_toward(
    total: int, wanted: Mapping[str, float], balanced: Mapping[str, float]
) -> dict[str, int]:
    """`total` in whole weights close to `wanted` (scaled to add up to `total`), the units rounding leaves
    going to the cells furthest below their `balanced` weight. By largest remainder (`apportion`) they went
    by the cells' current proportions, so to the heavier of two equal cells, and the deadband kept the gap:
    a region whose weight grew a unit at a time ratcheted it onto one cell (the unplanned-surge game day,
    18/17 to 20/17 between two cells of 11 tasks each, the heavier one shedding beside its twin's room)."""
    return apportion(total, wanted, toward=balanced)


def _drained(
    params: PolicyParams,
    name: str,
    signals: Mapping[str, RegionSignals | None],
    memory: Mapping[str, RegionMemory],
) -> bool:
    """The cell is bad this run and has been for long enough to drain: the region no longer counts on it."""
    start = RegionMemory(good_runs=params.healthy_runs_to_recover - 1)
    streak, problems = remember(params, signals.get(name), memory.get(name, start))
    return signals.get(name) is not None and confirmed_bad(params, streak, problems)


def decide_cells(
    params: PolicyParams,
    budget: int,
    current: Mapping[str, int],
    signals: Mapping[str, RegionSignals | None],
    memory: Mapping[str, RegionMemory],
    groups: Mapping[str, Sequence[str]],
    pins: Mapping[str, int] | None = None,
    followed: Mapping[str, int] | None = None,
) -> Decision:
    """One orchestrator run over regions some of which have cells. `groups` maps each region to its
    targets' names (the region itself when it is one cell); `current`, `signals` and the result's weights
    are per target. Pins name targets (a cell, or a one-cell region) and hold whatever the policy says.
    `followed`: per target, the weights in force in the minute the signals are from."""
    pins = dict(pins or {})
    followed = {name: (followed or {}).get(name, weight) for name, weight in current.items()}
    celled = {region: tuple(names) for region, names in groups.items() if tuple(names) != (region,)}
    if not celled:
        return decide(params, budget, current, signals, memory, pins=pins, followed=followed)
    # A cell without metrics holds its weight outside the region's decision: the region is decided on the
    # cells that reported, with their weight, so the silent cell neither squeezes nor inflates them.
    silent = {
        region: [n for n in names if signals.get(n) is None and n not in pins]
        for region, names in celled.items()
    }
    silent = {r: names for r, names in silent.items() if names and len(names) < len(celled[r])}
    held_silent = {r: sum(current[n] for n in names) for r, names in silent.items()}
    region_current = {
        region: sum(current[name] for name in names) - held_silent.get(region, 0)
        for region, names in groups.items()
    }
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
    by_region = decide(
        params,
        max(budget - sum(held_silent.values()), 0),
        region_current,
        region_signals,
        region_memory,
        pins=region_pins,
        followed={
            region: sum(followed[n] for n in names if n not in silent.get(region, ()))
            for region, names in groups.items()
        },
    )

    weights: dict[str, int] = {}
    new_memory = dict(by_region.memory)
    decisions: list[RegionDecision] = []
    for region, names in groups.items():
        if region not in celled:
            weights[region] = by_region.weights[region]
            decisions.extend(d for d in by_region.regions if d.region == region)
            continue
        split, cell_memory, cell_decisions = split_region(
            params,
            by_region.weights[region] + held_silent.get(region, 0),
            names,
            current,
            signals,
            memory,
            followed,
        )
        new_memory.update(cell_memory)
        if sum(split.values()) > MAX_WEIGHT:
            # A region's record set is read as one weight by the fleet dashboard and the game day: keep
            # it within Route 53's range, the silent cells holding theirs.
            kept = {n: w for n, w in split.items() if n not in silent.get(region, ())}
            room = MAX_WEIGHT - (sum(split.values()) - sum(kept.values()))
            split.update(apportion(max(room, 0), {n: float(w) for n, w in kept.items()}))
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
