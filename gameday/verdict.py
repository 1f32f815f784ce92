"""Pass or fail: the SLO outside the grace the faults allow, and the properties the whole system owes
whatever happens (docs/gameday.md, "Verdict"). The SLO, weight steps and task drops are judged per region
(its cells added up); a drain, a down target's way out of DNS and the wait for hosts per routing target too,
so a cell drained while it serves fails like a region would."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from gameday.loop import Minute
from gameday.scenario import CapacityShortage, RegionDown, Scenario
from settings.cells import region_of

GRACE_MINUTES = 15  # after a fault starts or ends: the survivors hold the SLO within this
DRAIN_MINUTES = 5  # a region down is out of Route 53's answers within this
TASK_DROP_SHARE = 0.1  # no minute stops more than this share of a region's serving tasks (or one a fleet)
HOST_WAIT_MINUTES = 20  # tasks waiting for hosts get some within this (steps minutes apart, not half-hours)
SERVING_SHARE_NOT_DRAINED = 0.5  # a region still serving with at least this share of its targets stays in


@dataclass(frozen=True)
class Summary:
    verdict: str
    violations: tuple[str, ...]
    slo_minutes_violated: dict[str, int]
    requests_lost: int

    def public(self) -> dict[str, object]:
        return {
            "summary": {
                "verdict": self.verdict,
                "violations": list(self.violations),
                "slo_minutes_violated": self.slo_minutes_violated,
                "requests_lost": self.requests_lost,
            }
        }


def _excused(scenario: Scenario, region: str, minute: int) -> bool:
    for fault in scenario.faults:
        if fault.at <= minute < fault.at + GRACE_MINUTES:
            return True
        if fault.until is not None and fault.until <= minute < fault.until + GRACE_MINUTES:
            return True
        # A region is excused while it, or one of its cells, is down: requests sent there are lost.
        if isinstance(fault, RegionDown) and region_of(fault.region) == region and fault.active(minute):
            return True
    return False


def judge(
    scenario: Scenario,
    minutes: Sequence[Minute],
    slo_ms: float,
    slo_errors: float,
    gain_step: int,
    drop_step: int,
    floor: int,
    initial_weights: dict[str, int],
) -> Summary:
    violations: list[str] = []
    regions = list(minutes[0].regions) if minutes else []
    slo_minutes = dict.fromkeys(regions, 0)
    lost = 0.0
    outside: dict[str, list[int]] = {r: [] for r in regions}
    for m in minutes:
        for region, row in m.regions.items():
            lost += row.shed_rps * 60
            if row.offered_rps > 0 and (row.ttft_p99_ms > slo_ms or row.error_share > slo_errors):
                slo_minutes[region] += 1
                if not _excused(scenario, region, m.minute):
                    outside[region].append(m.minute)
    for region, missed in outside.items():
        if missed:
            violations.append(
                f"{region}: SLO missed in {len(missed)} minutes outside fault grace "
                f"(first at minute {missed[0]})"
            )

    def drained(before, row) -> bool:
        return row.weight <= floor < before.weight or (before.healthy and not row.healthy)

    for previous, current in itertools.pairwise(minutes):
        reported: set[str] = set()
        for region, row in current.regions.items():
            before = previous.regions[region]
            step = gain_step if row.weight > before.weight else drop_step
            if abs(row.weight - before.weight) > step:
                violations.append(
                    f"{region}: weight moved {before.weight} -> {row.weight} in minute {current.minute}, "
                    f"more than its step {step}"
                )
            share = row.tasks / row.targets if row.targets else 0.0
            if drained(before, row) and not row.down and share >= SERVING_SHARE_NOT_DRAINED:
                reported.add(region)
                violations.append(
                    f"{region}: drained in minute {current.minute} while {share:.0%} of its targets served"
                )
            # One task a fleet is the smallest step there is (each cell's fleets scale on their own).
            fleets = row.fleets or len(row.waiting) or 1
            if row.stopped_share > TASK_DROP_SHARE and row.stopped > fleets and not row.down:
                violations.append(
                    f"{region}: minute {current.minute} stopped {row.stopped_share:.0%} of its serving tasks"
                )
        for name, row in current.cells.items():  # the cells of regions of several, drained inside them
            before = previous.cells.get(name)
            if before is None or name in current.regions or region_of(name) in reported:
                continue
            share = row.tasks / row.targets if row.targets else 0.0
            if drained(before, row) and not row.down and share >= SERVING_SHARE_NOT_DRAINED:
                violations.append(
                    f"{name}: drained in minute {current.minute} while {share:.0%} of its targets served"
                )

    def row_of(minute: Minute, name: str):
        """A routing target's row, or a region's (its cells added up)."""
        return minute.cells[name] if name in minute.cells else minute.regions[name]

    initial = dict(initial_weights)
    for name, weight in initial_weights.items():
        if region_of(name) != name:
            initial[region_of(name)] = initial.get(region_of(name), 0) + weight
    for fault in scenario.faults:
        if isinstance(fault, RegionDown):
            end = fault.until if fault.until is not None else len(minutes)
            deadline = fault.at + DRAIN_MINUTES
            late = [
                m.minute
                for m in minutes
                if deadline <= m.minute < end and row_of(m, fault.region).answer_share > 0.01
            ]
            if late:
                violations.append(
                    f"{fault.region}: still in Route 53's answers {len(late)} minutes after the "
                    f"{DRAIN_MINUTES}-minute deadline (minute {late[0]})"
                )
            if fault.until is not None and minutes:
                last = row_of(minutes[-1], fault.region).weight
                if last < initial.get(fault.region, 0) / 2:
                    violations.append(f"{fault.region}: not back after the outage (weight {last} at the end)")

    shortages = [f for f in scenario.faults if isinstance(f, CapacityShortage)]
    waits: dict[tuple[str, str], int] = {}
    reported: set[tuple[str, str]] = set()
    for m in minutes:
        for region, row in (m.cells or m.regions).items():  # per cell: each cell's fleets wait on their own
            for instance_type, waiting in row.waiting.items():
                key = (region, instance_type)
                short = any(
                    f.region in (region, region_of(region))
                    and f.instance_type == instance_type
                    and f.active(m.minute)
                    for f in shortages
                )
                waits[key] = waits.get(key, 0) + 1 if waiting and not short else 0
                if waits[key] > HOST_WAIT_MINUTES and key not in reported:
                    reported.add(key)
                    violations.append(
                        f"{region} {instance_type}: tasks waited for hosts over {HOST_WAIT_MINUTES} minutes "
                        f"(from minute {m.minute - waits[key] + 1})"
                    )
    return Summary("fail" if violations else "pass", tuple(violations), slo_minutes, round(lost))
