"""The waits and watches of a deployed wave, as steps that several cells can run side by side on one clock.

A step is a generator: it reads, then yields how many seconds it wants to sleep before its next look, and
returns the problems that stop the wave (none: it passed). `watch_together` runs each wave's steps in order
and the waves' step lists in parallel: one sleep for all, each wave looked at when its own poll is due, the
first problem stopping every wave. Reads, `sleep` and `clock` come from the caller, so a simulated clock and
moto drive it as they drive `run_waves`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ops.deploy_readiness import (
    TargetGroupHealth,
    first_whole_minute_after,
    judge_targets,
    targets_budget_seconds,
)

Step = Generator[float, None, list[str]]


@dataclass(frozen=True)
class WaveCheck:
    """One named step of a wave after its deploy (`stable`, `targets`, `alarm data`, `bake`, ...): a list
    of them per wave, so a new step goes in by name."""

    name: str
    start: Callable[[], Step]


def watch_together(
    waves: Sequence[Any],
    checks: Callable[[Any], Sequence[WaveCheck]],
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    read_errors: tuple[type[Exception], ...] = (),
    describe_error: Callable[[Any, Exception], str] = lambda wave, error: str(error),
) -> dict[Any, list[str]]:
    """Run each wave's checks in order, the waves side by side. Returns the problems of the first wave(s)
    that failed (empty: every wave passed every check). A read error stops its wave like a problem: a cell
    nobody can watch is not known to be fine."""
    running: dict[Any, Step] = {wave: _in_order(checks(wave)) for wave in waves}
    due = {wave: clock() for wave in waves}
    while running:
        problems: dict[Any, list[str]] = {}
        for wave in list(running):
            if due[wave] > clock():
                continue
            try:
                wait = next(running[wave])
            except StopIteration as done:
                del running[wave]
                if done.value:
                    problems[wave] = list(done.value)
                continue
            except read_errors as error:
                del running[wave]
                problems[wave] = [describe_error(wave, error)]
                continue
            due[wave] = clock() + wait
        if problems:
            for step in running.values():
                step.close()
            return problems
        if running:
            pause = min(due[wave] for wave in running) - clock()
            if pause > 0:
                sleep(pause)
    return {}


def _in_order(checks: Iterable[WaveCheck]) -> Step:
    for check in checks:
        problems = yield from check.start()
        if problems:
            return problems
    return []


# ---- the steps ------------------------------------------------------------------------------------------


def stable_step(
    read: Callable[[], list[dict[str, Any]]],
    judge: Callable[[list[dict[str, Any]]], Any],
    timeout_seconds: float,
    poll_seconds: float,
    clock: Callable[[], float],
    log: Callable[[str], None],
) -> Step:
    """Until the services are stable (`judge`: ops.deploy_waves.service_stability), at most the timeout."""
    deadline = clock() + timeout_seconds
    while True:
        described = read()
        if not described:
            log("  no ECS services of this project found here (clusters are found by their project tag)")
        stability = judge(described)
        if stability.failed:
            return list(stability.failed)
        if stability.settled:
            return []
        if clock() >= deadline:
            return [f"not stable after {timeout_seconds:.0f} s: {w}" for w in stability.waiting]
        log(f"  waiting for {len(stability.waiting)} services: {'; '.join(stability.waiting)}")
        yield poll_seconds


def targets_step(
    label: str,
    read: Callable[[], list[TargetGroupHealth]],
    tasks: Callable[[], int],
    cold_start_seconds: float,
    poll_seconds: float,
    clock: Callable[[], float],
    log: Callable[[str], None],
) -> Step:
    """Until every target group of the cell's load balancer has a healthy target per running task, within
    the cold-start budget plus what the groups' health checks need (read from the groups themselves)."""
    start = clock()
    expected = tasks()
    while True:
        groups = read()
        verdict = judge_targets(groups, expected)
        if verdict.failed:
            return [f"{label}: {problem}" for problem in verdict.failed]
        if verdict.settled:
            log(f"{label}: every target group has {expected} healthy targets")
            return []
        budget = targets_budget_seconds(cold_start_seconds, groups)
        if clock() - start >= budget:
            return [
                f"{w}, not healthy {budget / 60:.1f} min after its tasks ran (cold-start budget "
                f"{cold_start_seconds:.0f} s plus the health checks' {budget - cold_start_seconds:.0f} s)"
                for w in verdict.waiting
            ]
        log(f"  waiting for healthy targets: {'; '.join(verdict.waiting)}")
        yield min(poll_seconds, max(start + budget - clock(), 1.0))


def first_runs_step(
    label: str,
    read: Callable[[datetime], float],
    timeout_seconds: float,
    poll_seconds: float,
    now: Callable[[], datetime],
    clock: Callable[[], float],
    log: Callable[[str], None],
) -> Step:
    """Until the orchestrator has run after the deploy (`read(since)`: its runs since a moment), at most the
    timeout: its NotRunning alarm counts a minute with no run as breaching, so it is judged only after."""
    since = first_whole_minute_after(now())
    deadline = clock() + timeout_seconds
    while True:
        runs = read(since)
        if runs > 0:
            log(f"{label}: the orchestrator ran {runs:g} times since {since:%H:%M} UTC")
            return []
        if clock() >= deadline:
            return [
                f"{label}: no orchestrator run seen since {since:%H:%M} UTC, {timeout_seconds / 60:.0f} min "
                "after the deploy (AWS/Lambda Invocations of its function): its schedule may be disabled, "
                "the function throttled or failing to start; read its log before any region's deploy"
            ]
        log(f"  waiting for the orchestrator's first run since {since:%H:%M} UTC")
        yield poll_seconds


def bake_step(
    read: Callable[[], dict[str, Any]],
    names: Sequence[str],
    problems_of: Callable[[dict[str, Any], Sequence[str]], tuple[list[str], list[str]]],
    minutes: float,
    window_seconds: float,
    poll_seconds: float,
    clock: Callable[[], float],
    log: Callable[[str], None],
) -> Step:
    """Watch the alarms for `minutes`, from the first look at which none is in ALARM to one look at the end.
    Until that first look, an alarm in ALARM is allowed for `window_seconds`: one that treats missing data
    as breaching leaves ALARM only once data comes (CloudWatch User Guide, "Configuring how CloudWatch
    alarms treat missing data": missing data points are treated as breaching), up to its evaluation window
    after the targets turned healthy or the orchestrator first ran. Once quiet, any ALARM stops the wave;
    a missing alarm (`problems_of` answers missing, firing) stops it at once."""
    start = clock()
    quiet_since: float | None = None
    while True:
        missing, firing = problems_of(read(), names)
        if missing:
            return missing + firing
        now = clock()
        if quiet_since is None and not firing:
            quiet_since = now
        if quiet_since is None:
            if now - start >= window_seconds:
                return [
                    f"{problem} ({window_seconds / 60:g} min after its data could begin: the alarms' "
                    "evaluation window)"
                    if window_seconds
                    else problem
                    for problem in firing
                ]
            log(f"  waiting for the alarms' data: {'; '.join(firing)}")
            yield min(poll_seconds, max(start + window_seconds - now, 1.0))
            continue
        if firing:
            return firing
        if now >= quiet_since + minutes * 60:
            return []
        yield min(poll_seconds, max(quiet_since + minutes * 60 - now, 0))
