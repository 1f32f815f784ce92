"""Where a game day's judged losses come from: the minutes in which some routing target loses requests
the verdict judges, with what each target was offered, could serve, had serving and weighed
(bench/gameday_judged.py prints them). The verdict excuses as overload's the sheds no routing could have
spared: demand beyond every target's room together (room counted once the control loop can know it) and
what a target's own curve sheds at an even split of the minute's demand, within a unit of weight. A minute
it judges is one in which a target shed past that while another had known room, or shed within what its
plan or its own scale-in had it hold, and the row says which. The figures are the verdict's own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gameday.loop import Minute
from gameday.scenario import Metrics, Scenario
from gameday.verdict import (
    _targets,
    even_level,
    held_to_their_scale_in,
    judged_errors,
    judged_lost_rps,
    metrics_delays,
    overload_terms,
    unavoidable_share,
    weight_unit_rps,
)
from orchestrator.routing.policy import PolicyParams


@dataclass(frozen=True)
class TargetFigures:
    offered_rps: float
    capacity_rps: float  # what its serving tasks serve within the objective
    planned_capacity_rps: float  # what the config's schedule on time would have serving
    shed_rps: float
    weight: int
    tasks: int
    judged_error_share: float  # the share of its requests the SLO rule counts as lost


@dataclass(frozen=True)
class JudgedMinute:
    minute: int
    unavoidable: float  # the share of the targets' excess no routing could have placed (verdict)
    judged_lost: float  # requests the lost-request budget counts in the minute, every target together
    targets: dict[str, TargetFigures]


def judged_minutes(
    minutes: Sequence[Minute],
    scenario: Scenario | None = None,
    policy: PolicyParams | None = None,
    weight_sum: int = 100,
) -> list[JudgedMinute]:
    """The minutes with requests the verdict judges lost (before any fault's grace: a fault's own target
    is excused by the SLO rule, not by the budget), each target's figures beside them, weighed as the
    verdict weighs them (each held to what its own scale-in took, `held_to_their_scale_in`;
    `overload_terms`: room as the control loop could know it, none at targets back
    from an outage within the policy's return, an even split's sheds within a unit of weight). Without
    the scenario, every target's room counts from its own minute."""
    found = []
    if scenario is None:
        minutes = held_to_their_scale_in(minutes, [Metrics().delay_minutes] * len(minutes))
        terms = [(unavoidable_share(m), even_level(m), weight_unit_rps(m, weight_sum)) for m in minutes]
    else:
        delays = metrics_delays(scenario, minutes)
        minutes = held_to_their_scale_in(minutes, delays)
        terms = overload_terms(scenario, minutes, policy or PolicyParams(), weight_sum, delays)
    for m, (unavoidable, level, unit) in zip(minutes, terms, strict=True):
        rows = _targets(m)
        lost = sum(judged_lost_rps(row, unavoidable, level, unit) for row in rows.values()) * 60
        if round(lost) <= 0:
            continue
        figures = {
            name: TargetFigures(
                row.offered_rps,
                row.capacity_rps,
                row.planned_capacity_rps,
                row.shed_rps,
                row.weight,
                row.tasks,
                judged_errors(row, unavoidable, level, unit),
            )
            for name, row in rows.items()
        }
        found.append(JudgedMinute(m.minute, unavoidable, lost, figures))
    return found


def render(found: Sequence[JudgedMinute], slo_errors: float) -> list[str]:
    """One line per minute: the minute, the unavoidable share, the requests judged lost, then per target
    offered/capacity requests/s, sheds, weight, serving tasks and judged error share (`*` past the SLO's)."""
    lines = []
    for judged in found:
        parts = []
        for name, t in judged.targets.items():
            mark = "*" if t.judged_error_share > slo_errors else " "
            parts.append(
                f"{name} {t.offered_rps:.0f}/{t.capacity_rps:.0f} shed {t.shed_rps:.0f} w {t.weight} "
                f"tasks {t.tasks} judged {t.judged_error_share:.1%}{mark}"
            )
        lines.append(
            f"{judged.minute:4d}  unavoidable {judged.unavoidable:.2f}  lost {judged.judged_lost:,.0f}  "
            + " | ".join(parts)
        )
    return lines
