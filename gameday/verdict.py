"""Pass or fail: what an SRE would accept as a go for the day (docs/gameday.md, "Verdict").

Nothing is excused globally. A fault excuses only the region or cell it names, for the scenario's grace
after it starts and after it ends (a region's fault excuses each of its cells; a cell's fault only that
cell); a fault without a region (the orchestrator's API errors, duplicate runs, late metrics) excuses
nothing. The rules:
- SLO (p99 time to first token, error share) per routing target: each cell of a region of several is
  judged on its own rows, a one-cell region on its own;
- goodput (requests served within the objective over min(offered, the fleets' capacity), over the day)
  per region and overall, against the scenario's threshold;
- requests lost over the day within the scenario's budget, except overload's sheds at the edge (the same
  are not SLO errors; goodput judges where they happened): demand beyond what the target could serve within
  the objective, beyond what the config's schedule on time would have had serving and beyond what its own
  scale-in took under steady demand, that no other target had room for as the control loop could know it;
  and what the target's own curve sheds at an even split of the minute's demand, give or take the unit of
  weight DNS splits by (a fleet sheds a little before its capacity: no routing spares those);
- a weight moves at most the policy's `max_step` in a minute (its documented limit: the drop step for a
  region on its way to the floor, and the freed weight handed to the best-ranked region when every region
  looks bad); a cell's weight is split inside its region by design and is not held to it;
- a region or cell still serving with at least half its targets is not drained (weight to the floor, or
  its Route 53 check failing), unless it fails over 5% of its requests on the server's side (a hard
  fault, serving_errors); minutes where every record is unhealthy are Route 53 failing open, judged as
  such (a violation of their own), never as a drain;
- a region or cell that is down, or whose front door is, leaves Route 53's answers within 5 minutes and is
  back to half its weight by the end;
- a reachable target failing more than the policy's error share on its own side has its weight at the
  floor within the policy's documented drain runs (counted from the M-of-N minute, read after the
  metrics delay), whether or not Route 53's checks took it out first: its weight is what clients get
  when Route 53 fails open;
- no minute stops more than 10% of a region's serving tasks (and more than one a fleet);
- tasks wait for hosts at most 20 minutes (outside a capacity shortage);
- each page the scenario names (a paging alarm of a target, in ALARM on a metric) comes by its minute;
- with a counterfactual, the orchestrator must have made each named measure strictly better."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gameday.loop import Minute, RegionMinute
from gameday.scenario import (
    ApiErrors,
    CapacityShortage,
    EngineDeaths,
    FrontDoorDown,
    MetricsDelay,
    RegionDown,
    Scenario,
    ServingErrors,
    Slowdown,
)
from orchestrator.routing.policy import PolicyParams
from settings.cells import region_of

DRAIN_MINUTES = 5  # a region down is out of Route 53's answers within this
TASK_DROP_SHARE = 0.1  # no minute stops more than this share of a region's serving tasks (or one a fleet)
HOST_WAIT_MINUTES = 20  # tasks waiting for hosts get some within this (steps minutes apart, not half-hours)
SERVING_SHARE_NOT_DRAINED = 0.5  # a region still serving with at least this share of its targets stays in
HARD_FAULT_ERRORS = 0.05  # server-side error share above which a target may be drained (docs/routing.md)
# Tasks that came into service in minute k are in the metrics the run of minute k + 1 + delay reads, and its
# weights reach every client a minute later (Route 53: "generally within 60 seconds").
SEEN_AFTER_DELAY = 2
# The day's demand within this of what it was is steady: a scale-in then saw the demand it acted under.
STEADY_DEMAND = 0.01


@dataclass(frozen=True)
class Rules:
    """What the verdict judges against, from the deployment and the scenario."""

    slo_ms: float
    slo_errors: float
    max_step: int  # the policy's bound on one run's move of an unpinned weight
    floor: int
    initial_weights: dict[str, int]  # per routing target
    # The routing policy as the config documents it (not as deployed: a broken deployment must not move
    # the bar it is judged against): the drain deadline's error share and runs.
    policy: PolicyParams = field(default_factory=PolicyParams)


@dataclass(frozen=True)
class Summary:
    verdict: str
    violations: tuple[str, ...]
    slo_minutes_violated: dict[str, int]
    requests_lost: int
    goodput: dict[str, float] = field(default_factory=dict)  # region -> share, and "overall"
    fail_open_minutes: int = 0
    counterfactual: dict[str, dict[str, float]] | None = None  # measure -> {"on": x, "off": y}

    def public(self) -> dict[str, object]:
        data: dict[str, object] = {
            "verdict": self.verdict,
            "violations": list(self.violations),
            "slo_minutes_violated": self.slo_minutes_violated,
            "requests_lost": self.requests_lost,
            "goodput": {name: round(share, 4) for name, share in self.goodput.items()},
            "fail_open_minutes": self.fail_open_minutes,
        }
        if self.counterfactual is not None:
            data["counterfactual"] = self.counterfactual
        return {"summary": data}

    @property
    def slo_minutes(self) -> int:
        return sum(self.slo_minutes_violated.values())


def excused(scenario: Scenario, target: str, minute: int) -> bool:
    """A routing target's minute inside the grace of a fault of its own (its own or its region's), or
    while it is down or failing requests by the fault's design (requests sent there are lost: the budget
    and the drain deadline judge those)."""
    grace = scenario.judge.grace_minutes
    for fault in scenario.faults:
        named = getattr(fault, "region", None)
        if named is None or named not in (target, region_of(target)):
            continue
        if fault.at <= minute < fault.at + grace:
            return True
        if fault.until is not None and fault.until <= minute < fault.until + grace:
            return True
        if isinstance(fault, RegionDown | FrontDoorDown | ServingErrors) and fault.active(minute):
            return True
    return False


def planned_basis_rps(row: RegionMinute) -> float:
    """What a target is held to serve before its sheds count as overload's: the larger of what its serving
    tasks could serve within the objective and what the config's schedule on time would have had serving
    (`planned_capacity_rps`, gameday/plan.py). A deployment short of its plan (a scheduled raise late or
    missing) sheds within the plan at its own cost."""
    return max(row.capacity_rps, row.planned_capacity_rps)


def _basis_for_room(
    name: str, row: RegionMinute, returning: frozenset[str], known: dict[str, float] | None
) -> float:
    """A target's basis as room for others' excess: no more than the control loop could know of
    (`known`, `known_bases`), and none of a returning target's beyond what it was offered."""
    basis = planned_basis_rps(row)
    if name in returning:
        basis = min(basis, row.offered_rps)
    if known is not None:
        basis = min(basis, known.get(name, basis))
    return basis


def unavoidable_share(
    minute: Minute, returning: frozenset[str] = frozenset(), known: dict[str, float] | None = None
) -> float:
    """Of the targets' demand beyond their planned basis, the share no routing could have placed: the
    demand beyond every target's basis together (1 in a global overload, 0 while the excess would fit
    in another target's room). A target in `returning` (back from being down or unreachable, within the
    policy's documented return: `return_minutes`) offers no room: no routing could have sent it more.
    Nor does room the control loop could not yet know of (`known`: each target's basis as the documented
    loop sees it, `known_bases`): tasks that came into service a minute ago."""
    rows = _targets(minute)
    excess = sum(max(r.offered_rps - planned_basis_rps(r), 0.0) for r in rows.values())
    room = sum(max(_basis_for_room(n, r, returning, known) - r.offered_rps, 0.0) for n, r in rows.items())
    beyond_all = max(excess - room, 0.0)
    return min(beyond_all / excess, 1.0) if excess > 0 else 0.0


def even_level(
    minute: Minute, returning: frozenset[str] = frozenset(), known: dict[str, float] | None = None
) -> float:
    """The minute's demand over every target's basis together (as room: `_basis_for_room`): the load an
    even split would have put on each target, as a share of its basis."""
    rows = _targets(minute)
    total = sum(_basis_for_room(n, r, returning, known) for n, r in rows.items())
    offered = sum(r.offered_rps for r in rows.values())
    return offered / total if total > 0 else float("inf")


def even_shed_rps(row: RegionMinute, level: float, unit_rps: float = 0.0) -> float:
    """What the target's own curve sheds at the edge at the even split's load (`even_level`), or at its
    own load where that is lower, on its planned basis: the sheds no routing could have spared it. At
    random arrivals a fleet sheds before it is offered its capacity (about 1% offered exactly it: its
    capacity is the most it serves within the objective when offered more), so an even split of demand
    at 99% of every target's capacity still sheds; those are the fleets' physics, not the routing's."""
    curve, basis = row.curve, planned_basis_rps(row)
    if curve is None or not curve.admitted_share or basis <= 0 or row.offered_rps <= 0:
        return 0.0
    load = min(level + unit_rps / basis, row.offered_rps / basis)
    share = 1.0 - curve.admitted(load * curve.servable)
    return min(row.overload_shed_rps, row.offered_rps * share)


def weight_unit_rps(minute: Minute, weight_sum: int) -> float:
    """The demand one unit of weight carries: Route 53 answers a record by its weight over the group's
    sum, and weights are whole numbers, so an even split of the minute's demand is within one unit of
    each record's share and no finer (rounding shares to integers that keep their sum can miss each by up
    to a unit). `weight_sum`: the configured weights' (the policy may grow it, never below)."""
    offered = sum(r.offered_rps for r in _targets(minute).values())
    return offered / weight_sum if weight_sum > 0 else 0.0


def known_bases(minutes: Sequence[Minute], lags: Sequence[int]) -> list[dict[str, float]]:
    """Per minute, each target's basis as the documented control loop can know it: the least of its
    basis over the last `lags[m]` minutes (tasks that came into service are seen after the metrics'
    delay, by the next run, and carried by DNS a minute on; tasks gone are gone at once)."""
    known: list[dict[str, float]] = []
    for index, m in enumerate(minutes):
        window = minutes[max(0, index - lags[index]) : index + 1]
        known.append(
            {
                name: min(planned_basis_rps(_targets(w).get(name, row)) for w in window)
                for name, row in _targets(m).items()
            }
        )
    return known


def return_minutes(scenario: Scenario, policy: PolicyParams) -> int:
    """Minutes from the end of a target's outage (down, or its front door) until the policy's documented
    return can have it taking traffic: its first healthy minute readable after the metrics delay, the
    `healthy_runs_to_recover` runs the policy trusts it again after, and a minute for DNS to carry the
    weights (docs/routing.md). The mirror of the drain's `DRAIN_MINUTES`."""
    return scenario.metrics.delay_minutes + policy.healthy_runs_to_recover + 1


def returning_targets(
    scenario: Scenario, targets: Sequence[str], minute: int, policy: PolicyParams
) -> frozenset[str]:
    """The routing targets back from an outage of their own less than `return_minutes` ago."""
    span = return_minutes(scenario, policy)
    ended = [
        fault
        for fault in scenario.faults
        if isinstance(fault, RegionDown | FrontDoorDown)
        and fault.until is not None
        and fault.until <= minute < fault.until + span
    ]
    return frozenset(t for t in targets for f in ended if f.region in (t, region_of(t)))


def excused_shed_rps(
    row: RegionMinute, unavoidable: float, level: float | None = None, unit_rps: float = 0.0
) -> float:
    """The sheds at the edge that overload excuses: of the demand beyond the target's planned basis (the
    larger of its capacity and the plan's), the `unavoidable` share, and never more than it shed at the
    edge. Sheds of demand the plan would have served are the system's loss: a raise an hour late sheds
    what the raise on time would have served, and that is judged.

    In a minute no target had room (`unavoidable` 1) a target offered past its basis is saturated, and
    every shed at its edge is overload's but the plan's shortfall (what the plan would have had serving
    beyond its tasks): `capacity_rps` is the most its tasks serve within the objective when offered more
    than that, so offered a little past it they serve a little less (at random arrivals a fleet offered
    1.5% past it sheds 2.7%, not 1.5%: the curve's own figures). No routing, plan or scaling could have
    served that difference; goodput still judges what a saturated target served.

    With the even split's `level` (and the demand a unit of weight carries, `unit_rps`), never less than
    what the target's own curve sheds there (`even_shed_rps`): what no routing could have spared it."""
    basis = planned_basis_rps(row)
    even = 0.0 if level is None else even_shed_rps(row, level, unit_rps)
    # 1 up to the float sums' rounding: every target past its basis gives excess / excess
    if unavoidable >= 1.0 - 1e-9 and row.offered_rps > basis:
        shortfall = max(row.planned_capacity_rps - row.capacity_rps, 0.0)
        return max(row.overload_shed_rps - shortfall, even, 0.0)
    excess = max(row.offered_rps - basis, 0.0) * unavoidable
    return max(min(row.overload_shed_rps, excess), even)


def judged_lost_rps(
    row: RegionMinute, unavoidable: float, level: float | None = None, unit_rps: float = 0.0
) -> float:
    """The failed requests the SLO and the lost-request budget judge: every one, except those shed at the
    edge for demand that neither the target's serving tasks nor its plan could serve within the objective
    and no other target had room for (`excused_shed_rps`). Shedding that is the designed answer to
    overload (docs/routing.md, "Overload is not a fault"). Sheds while another target had room or within
    the plan, engines' errors and requests sent to a target that is down are all judged."""
    return max(row.shed_rps - excused_shed_rps(row, unavoidable, level, unit_rps), 0.0)


def judged_errors(
    row: RegionMinute, unavoidable: float, level: float | None = None, unit_rps: float = 0.0
) -> float:
    return judged_lost_rps(row, unavoidable, level, unit_rps) / row.offered_rps if row.offered_rps else 0.0


def confirmed_bad_minutes(bad: Sequence[bool], policy: PolicyParams) -> list[bool]:
    """Per minute of data, whether it confirms a target bad by the slower of the policy's two paths: bad,
    and bad in `bad_runs_in_window` of the last `window_runs` minutes (the M of N the drain alarm's error
    shares use too; `bad_runs_to_drain` in a row is never slower)."""
    return [
        flag and sum(bad[max(0, k - policy.window_runs + 1) : k + 1]) >= policy.bad_runs_in_window
        for k, flag in enumerate(bad)
    ]


def drain_deadline_misses(
    bad: Sequence[bool],
    weights: Sequence[int],
    delays: Sequence[int],
    policy: PolicyParams,
    skip: Sequence[bool] | None = None,
) -> list[int]:
    """The minutes in which a target's weight is above the floor though the policy's documented drain
    says it should be at it (docs/routing.md: a region that stays bad drops to the floor within
    `drain_runs` runs of its first bad one). `bad[k]`: the target's server-side error share in minute k
    was past the policy's; `delays[m]`: how many minutes after its end a minute's data is readable in
    minute m (the run of minute m reads minute m - 1 - delay).

    Required in minute m: the minute its run reads confirms the target bad (`confirmed_bad_minutes`),
    and at least `drain_runs - bad_runs_to_drain + 1` minutes before it in the same bad stretch did too:
    the runs the policy gives itself to reach the floor after confirming. The judge counts from the M-of-N
    minute, the later of the policy's two ways to confirm, so it asks no more than the slower path: the
    drain alarm seen a run after its minute."""
    skip = skip or [False] * len(bad)
    confirmed = confirmed_bad_minutes(bad, policy)
    runs = policy.drain_runs - policy.bad_runs_to_drain + 1

    def in_stretch(minute: int) -> bool:
        return any(bad[max(0, minute - policy.window_runs + 1) : minute + 1])

    misses = []
    for m in range(len(bad)):
        k = m - 1 - delays[m]
        if k < 0 or skip[m] or not confirmed[k] or weights[m] <= policy.floor:
            continue
        before, j = 0, k - 1
        while j >= 0 and in_stretch(j):
            before += confirmed[j]
            j -= 1
        if before >= runs:
            misses.append(m)
    return misses


def server_error_share(row: RegionMinute) -> float:
    """What a reachable target failed on its own side: every request lost but those shed at its edge."""
    return max(row.shed_rps - row.overload_shed_rps, 0.0) / row.offered_rps if row.offered_rps else 0.0


def metrics_delays(scenario: Scenario, minutes: Sequence[Minute]) -> list[int]:
    """Per minute, how many minutes after its end a minute's data is readable (the scenario's delay and
    any `metrics_delay` fault's)."""
    return [
        scenario.metrics.delay_minutes
        + sum(f.minutes for f in scenario.faults if isinstance(f, MetricsDelay) and f.active(m.minute))
        for m in minutes
    ]


def _fault_end(fault: ServingErrors | EngineDeaths, minute: int) -> int:
    """Engine deaths happen in their minute; serving errors last until `until`, or the whole day."""
    if fault.until is not None:
        return fault.until
    return fault.at + 1 if isinstance(fault, EngineDeaths) else minute + 1


def failing(scenario: Scenario, target: str, minute: int) -> bool:
    """Inside a serving-errors fault of its own (or its region's) above the hard-fault threshold, or an
    engine-deaths one (least outstanding requests feeds dead engines far more than their share), or its
    grace after: a target that fails that many requests may leave DNS, whether or not it serves."""
    grace = scenario.judge.grace_minutes
    if any(
        isinstance(f, FrontDoorDown) and f.region in (target, region_of(target)) and f.active(minute)
        for f in scenario.faults
    ):
        return True  # clients cannot reach it: its check fails as a region down's does
    return any(
        isinstance(f, ServingErrors | EngineDeaths)
        and f.region in (target, region_of(target))
        and f.share > (HARD_FAULT_ERRORS if isinstance(f, ServingErrors) else 0)
        and f.at <= minute < _fault_end(f, minute) + grace
        for f in scenario.faults
    )


def _targets(minute: Minute) -> dict[str, RegionMinute]:
    """The routing targets' rows: each cell of a region of several, and each one-cell region."""
    return minute.cells or minute.regions


def _goodput(minutes: Sequence[Minute]) -> dict[str, float]:
    """Per region, what its routing targets served within the objective over what each could have
    (a cell that is down could serve nothing: its requests are judged by the budget); overall, what all
    served over min(all offered, all capacity), so requests lost to a region that is down count."""
    good: dict[str, float] = {}
    basis: dict[str, float] = {}
    for m in minutes:
        for target, row in _targets(m).items():
            region = region_of(target)
            good[region] = good.get(region, 0.0) + row.good_rps
            basis[region] = basis.get(region, 0.0) + min(row.offered_rps, row.capacity_rps)
        good["overall"] = good.get("overall", 0.0) + sum(r.good_rps for r in m.regions.values())
        basis["overall"] = basis.get("overall", 0.0) + min(
            sum(r.offered_rps for r in m.regions.values()), sum(r.capacity_rps for r in m.regions.values())
        )
    return {name: min(good[name] / basis[name], 1.0) for name in good if basis[name] > 0}


def held_to_their_scale_in(minutes: Sequence[Minute], delays: Sequence[int]) -> list[Minute]:
    """The minutes with each target's `planned_capacity_rps` raised to the capacity its own scaling took
    away under demand it could see: a target that stops serving tasks in a minute it is offered more than
    it can then serve, while the day's demand is no higher than in the newest minute its metrics showed
    (`delays`: the metrics delay, a minute more for the scaling to act on it), scaled itself into overload
    with nothing hidden from it. Until its capacity is back to what it had before, or the day's demand
    grows past what it was then, sheds within that capacity are the system's loss, not overload's (the
    same as a raise late: what it had would have served them). A scale-in that leaves room for the
    minute's demand is the scaling's ordinary work; one that meets a surge its metrics could not show yet
    is the surge's, judged as any overload."""
    held: dict[str, tuple[float, float]] = {}  # target -> (capacity before, the day's demand then)
    adjusted = []
    previous: dict[str, RegionMinute] = {}
    totals = [sum(r.offered_rps for r in _targets(m).values()) for m in minutes]
    for index, m in enumerate(minutes):
        total = totals[index]
        seen = totals[max(0, index - delays[index] - 1)]
        cells = {}
        for name, row in _targets(m).items():
            before = previous.get(name)
            if (
                before is not None
                and row.stopped > 0
                and not row.down
                and row.offered_rps > row.capacity_rps
                and total <= seen * (1 + STEADY_DEMAND)
            ):
                kept, demand = held.get(name, (0.0, 0.0))
                held[name] = (max(kept, before.capacity_rps), max(demand, total))
            kept, demand = held.get(name, (0.0, 0.0))
            if kept <= row.capacity_rps or row.down or total > demand * (1 + STEADY_DEMAND):
                held.pop(name, None)
                kept = 0.0
            cells[name] = (
                replace(row, planned_capacity_rps=max(row.planned_capacity_rps, kept)) if kept else row
            )
        previous = _targets(m)
        adjusted.append(replace(m, cells=cells) if m.cells else replace(m, regions=cells))
    return adjusted


def overload_terms(
    scenario: Scenario,
    minutes: Sequence[Minute],
    policy: PolicyParams,
    weight_sum: int,
    delays: Sequence[int],
) -> list[tuple[float, float, float]]:
    """Per minute, what the overload rules weigh each target's sheds against: the share of the excess no
    routing could have placed (`unavoidable_share`), the even split's load (`even_level`) and the demand a
    unit of weight carries (`weight_unit_rps`), with room counted as the control loop could know it
    (`known_bases`) and returning targets offering none (`returning_targets`). `delays`: the day's
    `metrics_delays`."""
    known = known_bases(minutes, [delay + SEEN_AFTER_DELAY for delay in delays])
    terms = []
    for m, known_now in zip(minutes, known, strict=True):
        returning = returning_targets(scenario, list(_targets(m)), m.minute, policy)
        terms.append(
            (
                unavoidable_share(m, returning, known_now),
                even_level(m, returning, known_now),
                weight_unit_rps(m, weight_sum),
            )
        )
    return terms


def judge(scenario: Scenario, minutes: Sequence[Minute], rules: Rules) -> Summary:
    violations: list[str] = []
    regions = list(minutes[0].regions) if minutes else []
    slo_minutes = dict.fromkeys(regions, 0)
    lost = 0.0
    outside: dict[str, list[int]] = {}
    avoidable = 0.0  # lost beyond the demand no target could serve: what the budget judges
    delays = metrics_delays(scenario, minutes)
    # What each target is held to: its plan, and what its own scaling took below its demand.
    held = held_to_their_scale_in(minutes, delays)
    terms = overload_terms(scenario, held, rules.policy, sum(rules.initial_weights.values()), delays)
    for m, (unavoidable, level, unit) in zip(held, terms, strict=True):
        lost += sum(row.shed_rps for row in m.regions.values()) * 60
        avoidable += sum(judged_lost_rps(row, unavoidable, level, unit) for row in _targets(m).values()) * 60
        missed_regions: set[str] = set()
        for target, row in _targets(m).items():
            if row.offered_rps > 0 and (
                row.ttft_p99_ms > rules.slo_ms
                or judged_errors(row, unavoidable, level, unit) > rules.slo_errors
            ):
                missed_regions.add(region_of(target))
                if not excused(scenario, target, m.minute):
                    outside.setdefault(target, []).append(m.minute)
        for region in missed_regions:
            slo_minutes[region] += 1
    for target, missed in outside.items():
        violations.append(
            f"{target}: SLO missed in {len(missed)} minutes outside its own faults' grace "
            f"(first at minute {missed[0]})"
        )

    goodput = _goodput(minutes)
    threshold = scenario.judge.goodput
    for name, share in goodput.items():
        if share < threshold:
            violations.append(f"{name}: goodput {share:.2%} below {threshold:.2%}")
    # Whole requests: the twin's rates leave fractions of one.
    if round(avoidable) > scenario.judge.lost_requests:
        budget = scenario.judge.lost_requests
        violations.append(
            f"{round(avoidable):,} requests lost (of {round(lost):,}; the rest shed for demand beyond what "
            f"the fleets could serve), over the budget of {budget:,}"
        )

    fail_open = [m.minute for m in minutes if m.fail_open]
    if fail_open:
        violations.append(
            f"Route 53 failed open (every record unhealthy) in {len(fail_open)} minutes "
            f"(first at minute {fail_open[0]})"
        )

    def drained(before: RegionMinute, row: RegionMinute) -> bool:
        return row.weight <= rules.floor < before.weight or (before.healthy and not row.healthy)

    def serving_share(minute: Minute, region: str, row: RegionMinute) -> float:
        """Of the targets of the region's cells that are up, the share serving (a cell that is down has
        none: its own rules judge it)."""
        cells = [r for name, r in minute.cells.items() if region_of(name) == region and not r.down]
        if len(cells) > 1 or (cells and cells[0] is not row):
            tasks, targets = sum(c.tasks for c in cells), sum(c.targets for c in cells)
        else:
            tasks, targets = row.tasks, row.targets
        return tasks / targets if targets else 0.0

    for previous, current in itertools.pairwise(minutes):
        reported: set[str] = set()
        for region, row in current.regions.items():
            before = previous.regions[region]
            if abs(row.weight - before.weight) > rules.max_step:
                violations.append(
                    f"{region}: weight moved {before.weight} -> {row.weight} in minute {current.minute}, "
                    f"more than the policy's step {rules.max_step}"
                )
            share = serving_share(current, region, row)
            if (
                not current.fail_open
                and drained(before, row)
                and not row.down
                and share >= SERVING_SHARE_NOT_DRAINED
                and not failing(scenario, region, current.minute)
            ):
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
            if (
                not current.fail_open
                and drained(before, row)
                and not row.down
                and share >= SERVING_SHARE_NOT_DRAINED
                and not failing(scenario, name, current.minute)
            ):
                violations.append(
                    f"{name}: drained in minute {current.minute} while {share:.0%} of its targets served"
                )

    api_faults = [
        any(isinstance(f, ApiErrors) and f.active(m.minute) for f in scenario.faults) for m in minutes
    ]
    policy = rules.policy
    for target in _targets(minutes[0]) if minutes else {}:
        rows = [_targets(m)[target] for m in minutes]
        # A target down or unreachable is judged by the out-of-DNS rule; its requests are not its errors.
        reachable = [not r.down and r.capacity_rps > 0 for r in rows]
        bad = [
            ok and server_error_share(r) > policy.error_share for ok, r in zip(reachable, rows, strict=True)
        ]
        # While the orchestrator's own AWS calls fail it cannot act: those minutes ask nothing of it.
        skip = [any(api_faults[max(0, m - 1 - delays[m] - 1) : m + 1]) for m in range(len(minutes))]
        late = drain_deadline_misses(bad, [r.weight for r in rows], delays, policy, skip)
        if late:
            violations.append(
                f"{target}: weight above the floor {len(late)} minutes past the policy's drain deadline "
                f"(server errors over {policy.error_share:.0%}; first at minute {minutes[late[0]].minute})"
            )

    def row_of(minute: Minute, name: str) -> RegionMinute:
        """A routing target's row, or a region's (its cells added up)."""
        return minute.cells[name] if name in minute.cells else minute.regions[name]

    initial = dict(rules.initial_weights)
    for name, weight in rules.initial_weights.items():
        if region_of(name) != name:
            initial[region_of(name)] = initial.get(region_of(name), 0) + weight
    for fault in scenario.faults:
        if isinstance(fault, RegionDown | FrontDoorDown):
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
                    f"{DRAIN_MINUTES}-minute deadline (minute {late[0]}, {fault.kind})"
                )
            back_by = None if fault.until is None else fault.until + return_minutes(scenario, policy)
            if back_by is not None and back_by < len(minutes):
                # The other side of the allowance above: back within the policy's return, or its room was
                # withheld from the others' judgement for nothing.
                share = row_of(minutes[back_by], fault.region).answer_share
                if share <= 0.01:
                    violations.append(
                        f"{fault.region}: not back in Route 53's answers by minute {back_by}, "
                        f"{return_minutes(scenario, policy)} minutes after its {fault.kind} ended "
                        f"({share:.1%} of them)"
                    )
            if fault.until is not None and minutes:
                last = row_of(minutes[-1], fault.region).weight
                if last < initial.get(fault.region, 0) / 2:
                    violations.append(f"{fault.region}: not back after the outage (weight {last} at the end)")

    for page in scenario.judge.pages:
        raised = [
            m.minute
            for m in minutes
            if m.minute <= page.by
            and any(
                target in (page.target,) or region_of(target) == page.target
                for target, metrics in m.pages.items()
                if page.metric in metrics
            )
        ]
        if not raised:
            violations.append(f"{page.target}: no page on {page.metric} by minute {page.by}")

    shortages = [f for f in scenario.faults if isinstance(f, CapacityShortage)]
    waits: dict[tuple[str, str], int] = {}
    reported_waits: set[tuple[str, str]] = set()
    for m in minutes:
        for region, row in _targets(m).items():  # per cell: each cell's fleets wait on their own
            for instance_type, waiting in row.waiting.items():
                key = (region, instance_type)
                short = any(
                    f.region in (region, region_of(region))
                    and f.instance_type == instance_type
                    and f.active(m.minute)
                    for f in shortages
                )
                waits[key] = waits.get(key, 0) + 1 if waiting and not short else 0
                if waits[key] > HOST_WAIT_MINUTES and key not in reported_waits:
                    reported_waits.add(key)
                    violations.append(
                        f"{region} {instance_type}: tasks waited for hosts over {HOST_WAIT_MINUTES} minutes "
                        f"(from minute {m.minute - waits[key] + 1})"
                    )
    return Summary(
        "fail" if violations else "pass",
        tuple(violations),
        slo_minutes,
        round(lost),
        goodput,
        len(fail_open),
    )


def compare(scenario: Scenario, on: Summary, off: Summary) -> Summary:
    """The day with the orchestrator on, judged also against the same day with it off: each measure the
    scenario names must be strictly smaller with it on."""
    figures = {
        "slo_minutes": {"on": on.slo_minutes, "off": off.slo_minutes},
        "requests_lost": {"on": on.requests_lost, "off": off.requests_lost},
    }
    violations = list(on.violations)
    wanted = scenario.counterfactual.must_improve if scenario.counterfactual else []
    for measure in wanted:
        if not figures[measure]["on"] < figures[measure]["off"]:
            violations.append(
                f"the orchestrator did not make {measure} better: {figures[measure]['on']:,} with it, "
                f"{figures[measure]['off']:,} without"
            )
    return Summary(
        "fail" if violations else "pass",
        tuple(violations),
        on.slo_minutes_violated,
        on.requests_lost,
        on.goodput,
        on.fail_open_minutes,
        figures,
    )


# ---- deploy days ---------------------------------------------------------------------------------------


def with_revision_faults(scenario: Scenario, minutes: Sequence[Minute]) -> Scenario:
    """The scenario as the verdict judges a deploy day: each stretch of minutes in which a bad revision's
    tasks served in a target is a fault of that target's (a serving_errors fault at the share of its
    requests they failed, or a slowdown at their speed), so the rules that excuse and judge a fault's
    minutes judge them the same way, and the lost-request budget counts every request they lost."""
    revisions = {deploy.revision.name: deploy.revision for deploy in scenario.deploys}
    added: list[ServingErrors | Slowdown] = []
    targets = list(minutes[0].cells) if minutes else []
    for target in targets:
        for name, revision in revisions.items():
            shares = [m.cells[target].bad_revisions.get(name, 0.0) for m in minutes]
            for start, end in _stretches(shares):
                at, until = minutes[start].minute, minutes[end - 1].minute + 1
                top = max(shares[start:end])
                if revision.errors:
                    added.append(
                        ServingErrors(
                            kind="serving_errors",
                            region=target,
                            share=revision.errors * top,
                            at=at,
                            until=until,
                        )
                    )
                elif revision.slower:
                    factor = 1 - top + top * revision.speed
                    added.append(Slowdown(kind="slowdown", region=target, factor=factor, at=at, until=until))
    if not added:
        return scenario
    return scenario.model_copy(update={"faults": [*scenario.faults, *added]})


def _stretches(shares: Sequence[float]) -> list[tuple[int, int]]:
    """[start, end) index ranges where the share is above 0."""
    found, start = [], None
    for index, share in enumerate([*shares, 0.0]):
        if share > 0 and start is None:
            start = index
        elif share <= 0 and start is not None:
            found.append((start, index))
            start = None
    return found


def deploy_violations(records: Sequence[Any], minutes: Sequence[Minute] = ()) -> list[str]:
    """The deploy rules (docs/gameday.md, "Deploy days"), for each deploy the day ran (gameday/deploy_day.py
    `DeployRecord`):
    - a bad revision (errors, slower, crashes) reaches the first cell the waves deploy and no other, and is
      rolled back there (every fleet's last deployment a completed rollback) before the deploy ends;
    - a good one (and a new cell's first creation) completes unattended (exit 0) within the time the dry
      run states (`planned_minutes`);
    - a bad AMI is caught by the deploy on hosts booted from it (the deploy stops, in the first cell) before
      any host the day boots for itself (the event's raise, a scale-out) serves from it.
    The lost-request budget judges what either lost, with the day's other requests."""
    violations: list[str] = []
    for record in records:
        deploy = record.deploy
        revision = deploy.revision
        label = f"deploy at minute {deploy.at} ({deploy.change} {revision.name})"
        cells = _cells_by_stack(record)
        if deploy.change == "image" and not revision.good:
            reached = [
                cell
                for cell, fleets in record.rollouts.items()
                if any(r.revision == revision.name for rollouts in fleets.values() for r in rollouts)
            ]
            regional = [s for s in record.stacks if s.stack in cells]
            if not regional:
                violations.append(f"{label}: never reached a cell, so nothing caught it")
                continue
            first = cells[regional[0].stack]
            others = [cell for cell in reached if cell not in first]
            if others:
                violations.append(
                    f"{label}: the bad revision reached {', '.join(others)} beyond the first cell "
                    f"{', '.join(first)}"
                )
            for cell in first:
                for instance_type, rollouts in record.rollouts.get(cell, {}).items():
                    last = rollouts[-1] if rollouts else None
                    if last is not None and not (last.rolling_back and last.state == "COMPLETED"):
                        violations.append(
                            f"{label}: {cell} {instance_type} not rolled back (its last deployment: "
                            f"{last.revision} {last.state}{', ' + last.reason if last.reason else ''}); "
                            f"{_stop(record)}"
                        )
        elif deploy.change == "ami" and not revision.good:
            served = [
                (m.minute, name)
                for m in minutes
                for name, row in m.cells.items()
                if row.bad_revisions.get(revision.name, 0.0) > 0
            ]
            first_served = (
                f"; its first tasks served at minute {served[0][0]} in {served[0][1]}" if served else ""
            )
            if record.status == 0:
                violations.append(
                    f"{label}: not caught: `make deploy` completed with no host booted from it{first_served}"
                )
            elif record.status is None:
                violations.append(f"{label}: still running when the day ended{first_served}")
        elif deploy.change in ("image", "config", "new_cell"):
            if record.status != 0 or record.ended is None:
                violations.append(f"{label}: did not complete unattended ({_stop(record)})")
            elif record.ended - record.started > record.planned_minutes:
                violations.append(
                    f"{label}: took {record.ended - record.started} minutes, more than the "
                    f"{record.planned_minutes:.0f} the dry run states"
                )
    return violations


def _cells_by_stack(record: Any) -> dict[str, list[str]]:
    """Stack -> the routing targets it deploys (from the rollouts' record of the cells)."""
    return dict(record.cells_by_stack)


def _stop(record: Any) -> str:
    if record.status is None:
        return "still running when the day ended"
    lines = [line.strip() for line in record.output.splitlines() if line.strip()]
    stopped = next((i for i, line in enumerate(lines) if line.startswith("wave stopped at")), None)
    if stopped is None:
        return f"exit {record.status}"
    return f"exit {record.status}: " + "; ".join(lines[stopped : stopped + 3])


def with_deploy_violations(summary: Summary, violations: Sequence[str]) -> Summary:
    if not violations:
        return summary
    return replace(summary, verdict="fail", violations=(*summary.violations, *violations))
