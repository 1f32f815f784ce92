"""`python -m ops.deploy_waves CONFIG [--dry-run] [--all-at-once] [--hotfix]`: `make deploy`, cell by cell.

The global stack first, then each region's stack in config order (a region of several cells: each cell's
stack in turn, so a bad change stops in one cell). After a cell's deploy: wait until its ECS services are
stable, then until its load balancer's targets are healthy (a first deploy's tasks run a cold start before
the model is ready), then watch its region-unfit and region-degraded alarms for `deploy.bake_minutes`,
allowing their evaluation window for data to arrive first. The global stack waits for the orchestrator's
first run after its deploy before its own alarms are judged. `--hotfix` (HOTFIX=1): the global stack, the
first cell as a canary, then each region's remaining cells deployed together and watched side by side,
every guard kept.
Any alarm, a failed rollout or services that do not settle stop the wave before the next region, and the
command prints what is deployed where, each stopped stack's true CloudFormation status, and how to roll back.
Every wave deploys the same cloud assembly, synthesized once at the start, so a file edited mid-deploy cannot
reach only the later regions.

Day zero in a new account: the preflight (quotas, zones, reservations, compiled artifacts) runs against the
assembly before the first wave. IAM and security-group changes are deployed without asking only with
`--approve` (APPROVE=1); otherwise each wave's security diff is printed and a broadening change stops it. The
global stack is baked on its own alarms. Before each wave the assembly's scheduled start times are checked
again (waves take hours). A stack created for the first time comes from a second assembly whose load
balancers have deletion protection off, and is then updated to turn it on: a first creation that fails after
its ALB exists rolls back cleanly instead of ending in ROLLBACK_FAILED.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from ops.cdk_cli import deploy_stack, deploy_stacks, synthesize_first_create
from ops.credentials import has_credentials, no_credentials_message
from ops.deploy_readiness import (
    TargetGroupHealth,
    breaching_window_seconds,
    cell_target_groups,
    run_metric,
    runs_since,
    stack_metric_alarms,
)
from ops.deploy_watch import (
    Step,
    WaveCheck,
    bake_step,
    first_runs_step,
    stable_step,
    targets_step,
    watch_together,
)
from ops.preflight.assembly import AssemblyError, read_template, scheduled_starts
from ops.preflight.checks import Status, schedule_findings
from ops.release_capacity import batches, project_clusters
from ops.stack_state import NOT_CREATED, end_state, stack_alarms, stack_status
from ops.wave import (
    STABLE_MARGIN_SECONDS,
    Wave,
    alarm_problems,
    read_alarms,
)
from settings.cells import Cell, region_of
from settings.rollout import surge_hosts
from settings.schema import Settings
from stacks.routing_names import degraded_alarm_name, unfit_alarm_name

DEFAULT_CDK = "npx --no-install cdk --no-notices"
ASSEMBLY_DIRECTORY = Path("build") / "deploy" / "cdk.out"
POLL_SECONDS = 60.0  # the alarms' period: polling faster sees nothing new
DESCRIBE_SERVICES_BATCH = 10  # DescribeServices takes at most 10 services per call
# How long the global wave waits for the orchestrator's first run: it runs once a minute on its schedule,
# Lambda sends its metrics in 1-minute intervals, and only runs from the next whole minute count.
FIRST_RUN_TIMEOUT_SECONDS = 10 * 60.0
# How long a watched alarm may stay in ALARM after its data began, where the stack's own alarms cannot be
# read for it (ops/deploy_readiness.py breaching_window_seconds reads them): a cell's no-healthy-targets
# alarms evaluate 3 one-minute periods, the orchestrator's NotRunning alarm 5 (cdk_constructs/), plus one
# period for the data to arrive.
CELL_ALARM_DATA_SECONDS = (3 + 1) * 60.0
GLOBAL_ALARM_DATA_SECONDS = (5 + 1) * 60.0
# `cdk deploy`'s own time in the dry run's worst case: CloudFormation's work on the stack (a cell's first
# creation, VPC, NAT gateways and ALB included, takes ~15-20 min; the global stack's Lambda and alarms a few
# minutes). Estimates for planning, not limits the deploy enforces.
CELL_DEPLOY_ESTIMATE_SECONDS = 20 * 60.0
GLOBAL_DEPLOY_ESTIMATE_SECONDS = 10 * 60.0


@dataclass(frozen=True)
class StackNames:
    """The app's stack names (stacks/props.py holds the rule; passed in so planning needs no CDK import)."""

    global_stack: str
    regional: dict[str, str]  # cell name (the region's for a one-cell region) -> stack


def stable_timeout_seconds(settings: Settings, cell: Cell) -> float:
    """How long a cell's services may take to settle after a deploy: a rolling deploy at a fleet's highest
    maximum (an event's included) starts `surge` new tasks at a time, each batch one cold start long
    (cdk_constructs/fleet/rollout.py), so the slowest fleet's batches times the cold-start budget, plus a
    margin. Waiting only the cold-start budget stopped waves falsely during a ramp or a scale-out."""
    percent = settings.serving.deployment.max_surge_percent
    events = [None, *(e for e in settings.events if cell.region in e.regions)]
    rounds = 1
    for fleet in settings.regions[cell.region].fleets:
        high = max(settings.cell_bounds(cell, fleet, event)[1] for event in events)
        rounds = max(rounds, math.ceil(high / surge_hosts(high, percent)))
    return rounds * settings.serving.cold_start_budget_seconds + STABLE_MARGIN_SECONDS


def plan_waves(settings: Settings, names: StackNames) -> list[Wave]:
    """The global stack, then one wave per cell in config order (a region's cells one after another), each
    watching that cell's alarms: a bad change stops in one cell, before the rest of its region."""
    waves = [Wave(names.global_stack, home=settings.orchestrator_region)]
    cold_start = float(settings.serving.cold_start_budget_seconds)
    for cell in settings.all_cells:
        alarms = (
            unfit_alarm_name(settings, cell.region, cell.index),
            degraded_alarm_name(settings, cell.region, cell.index),
        )
        name = "" if cell.count == 1 else cell.name
        timeout = stable_timeout_seconds(settings, cell)
        waves.append(
            Wave(names.regional[cell.name], cell.region, alarms, name, timeout, cold_start_seconds=cold_start)
        )
    return waves


def plan_hotfix(settings: Settings, names: StackNames) -> list[Wave]:
    """For a fix during an event: the global stack, the first region's first cell alone as a canary (fully
    baked), then one group per region in config order holding all its remaining cells, deployed together
    and watched side by side. The same waves as `plan_waves`, grouped: every guard of a wave is kept."""
    waves = plan_waves(settings, names)
    grouped = [replace(waves[0], group=0)]
    if len(waves) > 1:
        grouped.append(replace(waves[1], group=1))
    regions = list(dict.fromkeys(w.region for w in waves[2:]))
    for number, region in enumerate(regions, start=2):
        grouped += [replace(w, group=number) for w in waves[2:] if w.region == region]
    return grouped


def wave_groups(waves: Sequence[Wave]) -> list[list[Wave]]:
    """Consecutive waves of one group together; a wave without a group alone."""
    groups: list[list[Wave]] = []
    for wave in waves:
        if groups and wave.group is not None and groups[-1][-1].group == wave.group:
            groups[-1].append(wave)
        else:
            groups.append([wave])
    return groups


def describe_plan(waves: Sequence[Wave], bake_minutes: float) -> str:
    groups = wave_groups(waves)
    lines = [f"{len(groups)} waves, each only once the one before is deployed and quiet:"]
    for number, group in enumerate(groups, start=1):
        if len(group) > 1:
            lines.append(
                f"  {number}. {', '.join(w.label for w in group)} together: deployed in one cdk deploy, side "
                "by side, then all watched side by side; any cell's problem stops the path"
            )
        for wave in group:
            lead = f"  {number}." if len(group) == 1 else "     -"
            if wave.region is None:
                lines.append(
                    f"{lead} {wave.stack} (global, {wave.home or 'its region'}): deploy, wait up to "
                    f"{FIRST_RUN_TIMEOUT_SECONDS / 60:.0f} min for the orchestrator's first run, watch its "
                    f"own alarms (the orchestrator failing, throttled, not running) for {bake_minutes:g} min"
                )
            else:
                lines.append(
                    f"{lead} {wave.stack} ({wave.label}): deploy (created: with ALB deletion protection "
                    f"off, then on), wait up to {wave.stable_timeout_seconds / 60:.0f} min for stable ECS "
                    f"services, up to {wave.cold_start_seconds / 60:.0f} min (the cold start) and the health "
                    f"checks for healthy targets, watch for {bake_minutes:g} min:"
                )
                lines.append(f"       {', '.join(wave.alarms)}")
    return "\n".join(lines)


# ---- the dry run's worst-case times ---------------------------------------------------------------------


@dataclass(frozen=True)
class WaveTime:
    """A wave's worst case in seconds: each wait at its limit."""

    label: str
    deploy: float
    stable: float  # the global stack: the wait for the orchestrator's first run
    targets: float  # healthy targets: cold start + health checks (0 for the global stack)
    alarm_data: float  # the alarms' evaluation window once their data begins
    bake: float

    @property
    def total(self) -> float:
        return self.deploy + self.stable + self.targets + self.alarm_data + self.bake


def wave_time(wave: Wave, bake_minutes: float, health_check_seconds: float) -> WaveTime:
    if wave.region is None:
        return WaveTime(
            wave.label,
            GLOBAL_DEPLOY_ESTIMATE_SECONDS,
            FIRST_RUN_TIMEOUT_SECONDS,
            0.0,
            GLOBAL_ALARM_DATA_SECONDS,
            bake_minutes * 60,
        )
    return WaveTime(
        wave.label,
        CELL_DEPLOY_ESTIMATE_SECONDS,
        wave.stable_timeout_seconds,
        wave.cold_start_seconds + health_check_seconds,
        CELL_ALARM_DATA_SECONDS,
        bake_minutes * 60,
    )


def group_seconds(times: Sequence[WaveTime]) -> float:
    """A group deploys its waves in one call, side by side (ops/cdk_cli.py `deploy_stacks`), then watches
    them side by side: the deploys overlap, and so do the waits."""
    return max(t.deploy for t in times) + max(t.total - t.deploy for t in times)


def worst_case_seconds(waves: Sequence[Wave], bake_minutes: float, health_check_seconds: float) -> float:
    return sum(
        group_seconds([wave_time(w, bake_minutes, health_check_seconds) for w in group])
        for group in wave_groups(waves)
    )


def hours_minutes(seconds: float) -> str:
    minutes = math.ceil(seconds / 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def describe_times(
    normal: Sequence[Wave], hotfix: Sequence[Wave], bake_minutes: float, health_check_seconds: float
) -> str:
    """Each wave's worst case (every wait at its limit) and the total, for the normal and hotfix paths."""
    lines = []
    for title, waves in (("normal", normal), ("hotfix (HOTFIX=1)", hotfix)):
        lines.append(f"worst case, {title}, minutes (deploy: an estimate; the rest: the limits enforced):")
        lines.append(
            f"  {'wave':<26}{'deploy':>8}{'stable':>8}{'targets':>9}{'alarm data':>12}{'bake':>6}{'total':>7}"
        )
        for number, group in enumerate(wave_groups(waves), start=1):
            times = [wave_time(w, bake_minutes, health_check_seconds) for w in group]
            for t in times:
                lines.append(
                    f"  {f'{number}. {t.label}':<26}{t.deploy / 60:>8.0f}{t.stable / 60:>8.0f}"
                    f"{t.targets / 60:>9.1f}{t.alarm_data / 60:>12.0f}{t.bake / 60:>6.0f}{t.total / 60:>7.0f}"
                )
            if len(group) > 1:
                lines.append(
                    f"     together (deploys and waits side by side): {group_seconds(times) / 60:.0f}"
                )
    lines.append("  (the global stack's 'stable' column: the wait for the orchestrator's first run)")
    summary = [
        f"{title}: {len(wave_groups(waves))} waves, worst case "
        f"{hours_minutes(worst_case_seconds(waves, bake_minutes, health_check_seconds))}"
        for title, waves in (("normal", normal), ("hotfix (HOTFIX=1)", hotfix))
    ]
    lines.append("; ".join(summary))
    return "\n".join(lines)


def describe_day_zero(config: str, approve: bool, preflight: bool) -> str:
    """What `make deploy` does before and around the waves, in order."""
    steps = [
        f"make validate CONFIG={config} --strict (done by make deploy): refuses warnings and a config that "
        "pages no one",
        "cdk synth twice: the assembly every wave deploys, and one with the load balancers' deletion "
        "protection off for stacks created now",
    ]
    if preflight:
        steps.append(
            "preflight against the account and the assembly: quotas (vCPUs, Elastic IPs, VPCs, NAT gateways, "
            "internet gateways, Lambda concurrency), zones, reservations, the AMI and Powertools parameters, "
            "and the compiled artifacts every fleet needs (`make compile` builds missing ones)"
        )
    steps.append(
        "before each wave: the assembly's scheduled start times checked again, then "
        + (
            "cdk deploy --require-approval never (APPROVE=1)"
            if approve
            else "the wave's security diff (cdk diff --security-only); a broadening change stops the wave "
            "until it is reviewed and deployed with APPROVE=1"
        )
    )
    return "day zero, in order:\n" + "\n".join(f"  - {step}" for step in steps)


# ---- decisions (pure) --------------------------------------------------------------------------------


def running_tasks(services: Iterable[dict[str, Any]]) -> int:
    """The tasks a cell's target groups must hold: every service registers each task in both groups."""
    return sum(service.get("runningCount", 0) for service in services)


@dataclass(frozen=True)
class Stability:
    settled: bool
    failed: tuple[str, ...] = ()  # problems that waiting will not fix
    waiting: tuple[str, ...] = ()  # services still rolling


def service_stability(services: Iterable[dict[str, Any]]) -> Stability:
    """ECS's own notion of stable (botocore's services_stable waiter): one deployment, as many tasks running
    as desired; a rollout the circuit breaker or a deployment alarm failed is a stop, not a wait."""
    failed, waiting = [], []
    for service in services:
        name = service.get("serviceName", "?")
        deployments = service.get("deployments", [])
        primary = next((d for d in deployments if d.get("status") == "PRIMARY"), None)
        if service.get("status") != "ACTIVE":
            failed.append(f"{name} is {service.get('status')}")
        elif primary is not None and primary.get("rolloutState") == "FAILED":
            reason = primary.get("rolloutStateReason", "")
            failed.append(f"{name}: rollout failed and was rolled back ({reason})")
        elif len(deployments) != 1 or service.get("runningCount") != service.get("desiredCount"):
            waiting.append(
                f"{name}: {service.get('runningCount')} of {service.get('desiredCount')} tasks running, "
                f"{len(deployments)} deployments"
            )
    return Stability(not failed and not waiting, tuple(failed), tuple(waiting))


@dataclass
class Outcome:
    deployed: list[Wave] = field(default_factory=list)
    stopped_at: Wave | None = None
    problems: list[str] = field(default_factory=list)
    # The stopped stack's CloudFormation status after a failed deploy, read from AWS (ops/stack_state.py).
    stack_state: str = ""


def stop_report(outcome: Outcome, waves: Sequence[Wave], config: str) -> str:
    """What is deployed where and how to roll back, for an operator reading it mid-incident."""
    assert outcome.stopped_at is not None
    stopped = outcome.stopped_at
    after = [w for w in waves if w not in outcome.deployed and w != stopped]
    lines = [f"wave stopped at {stopped.label} ({stopped.stack}):"]
    lines += [f"  {problem}" for problem in outcome.problems]
    lines.append("deployed with this change:")
    lines += [f"  {w.label}: {w.stack}" for w in outcome.deployed] or ["  nothing"]
    lines.append("not deployed, still on the version before:")
    if stopped not in outcome.deployed:
        state = outcome.stack_state or "its deploy did not start"
        lines.append(f"  {stopped.label}: {stopped.stack} ({state})")
    lines += [f"  {w.label}: {w.stack}" for w in after]
    if stopped in outcome.deployed and not after:
        lines.append("  nothing")
    changed = [w.label for w in outcome.deployed if w.region is not None]
    lines.append("to roll back:")
    if not outcome.deployed:
        lines.append("  nothing to roll back")
        return "\n".join(lines)
    if changed:
        pins = " ".join(f"{region}=0" for region in changed)
        lines.append(
            f'  take traffic away first if the orchestrator has not: make traffic CONFIG={config} ARGS="pin '
            f'{pins} --for 2h --reason rollback"'
        )
    stacks = " ".join(w.stack for w in outcome.deployed)
    lines.append(
        f"  check out the previous version of the code and {config}, then redeploy what changed: "
        f"npx --no-install cdk deploy --exclusively {stacks} -c config={config}"
    )
    if changed:
        lines.append(f"  when the region is healthy again: make traffic CONFIG={config} ARGS=clear")
    return "\n".join(lines)


# ---- edges: the CDK CLI, ECS and CloudWatch ------------------------------------------------------------


def synthesize(cdk: Sequence[str], config: str, assembly: Path) -> None:
    shutil.rmtree(assembly, ignore_errors=True)  # only this config's stacks in it
    subprocess.run([*cdk, "synth", "--quiet", "-c", f"config={config}", "-o", str(assembly)], check=True)


def assembly_stacks(assembly: Path) -> set[str]:
    manifest = json.loads((assembly / "manifest.json").read_text(encoding="utf-8"))
    return {
        name
        for name, artifact in manifest.get("artifacts", {}).items()
        if artifact.get("type") == "aws:cloudformation:stack"
    }


def security_diff(cdk: Sequence[str], assembly: Path, stack: str) -> list[str]:
    """Problems that stop the wave: a change that broadens IAM or security groups (printed by the CLI above
    this), or a diff that could not be made. `--fail-on broadening` exits 1 for such a change."""
    result = subprocess.run(
        [*cdk, "diff", "--app", str(assembly), "--security-only", "--fail-on", "broadening", stack]
    )
    if result.returncode == 0:
        return []
    return [
        f"{stack}: its IAM or security-group changes (the security diff above) need approval, or cdk diff "
        f"failed (exit {result.returncode}); review them and run again with APPROVE=1 to deploy them"
    ]


def schedule_problems(assembly: Path, wave: Wave, now: datetime) -> list[str]:
    """The wave's scheduled start times against the clock now, not at the preflight: waves take hours, and
    Auto Scaling refuses a start time that has passed."""
    if wave.region is None:
        return []
    try:
        template = read_template(assembly, wave.stack)
    except AssemblyError as error:
        return [str(error)]
    if template is None:
        return [f"{assembly} has no template for {wave.stack}"]
    findings = schedule_findings(wave.region, wave.stack, scheduled_starts(template), now)
    return [f.advice for f in findings if f.status is Status.SHORTFALL]


def region_services(session: Any, project: str, target: str) -> list[dict[str, Any]]:
    """The services of the project's clusters in a region, or of one cell's cluster (`us-east-1/2`: the
    cell stacks tag their resources `cell`)."""
    region = region_of(target)
    ecs = session.client("ecs", region_name=region)
    services = []
    cell = target if target != region else None
    for cluster in project_clusters(ecs, project, cell=cell):
        arns = [
            arn
            for page in ecs.get_paginator("list_services").paginate(cluster=cluster)
            for arn in page["serviceArns"]
        ]
        for chunk in batches(arns, DESCRIBE_SERVICES_BATCH):
            services += ecs.describe_services(cluster=cluster, services=list(chunk))["services"]
    return services


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Readers:
    """What the checks read, each a callable (main builds them on its boto3 session; tests on moto or
    fakes). `target_groups` None: no healthy-targets wait; `runs` None: no wait for the orchestrator's first
    run; `alarm_window` None: the windows known from the constructs (CELL_/GLOBAL_ALARM_DATA_SECONDS)."""

    services: Callable[[str], list[dict[str, Any]]]
    alarms: Callable[[str, Sequence[str]], dict[str, Any]]
    global_alarms: Callable[[Wave], tuple[str, ...]] | None = None
    target_groups: Callable[[Wave], list[TargetGroupHealth]] | None = None
    alarm_window: Callable[[Wave], float | None] | None = None
    runs: Callable[[Wave, datetime], float] | None = None


@dataclass(frozen=True)
class Timing:
    bake_minutes: float
    poll_seconds: float = POLL_SECONDS
    stable_timeout_seconds: float | None = None  # overrides each wave's own
    first_run_timeout_seconds: float = FIRST_RUN_TIMEOUT_SECONDS
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    now: Callable[[], datetime] = _utc_now  # wall time, for CloudWatch queries "since the deploy"


def with_hosts_step(
    wave: Wave, steps: list[WaveCheck], after_stable: Callable[[Wave], list[str]] | None
) -> list[WaveCheck]:
    """A cell's steps with `hosts` (the AMI roll) right after `stable`. The roll waits on its own clock, so a
    hotfix wave's other cells are not looked at meanwhile; the freeze keeps AMI rolls out of an event, where
    the hotfix path runs."""
    if after_stable is None or wave.region is None:
        return steps

    def hosts() -> Step:
        return after_stable(wave)
        yield 0.0  # a generator that returns at once: the roll polls by itself

    at = next((i + 1 for i, step in enumerate(steps) if step.name == "stable"), 0)
    return [*steps[:at], WaveCheck("hosts", hosts), *steps[at:]]


def wave_checks(wave: Wave, read: Readers, timing: Timing, log: Callable[[str], None]) -> list[WaveCheck]:
    """A deployed wave's steps, in order. A cell: stable services, healthy targets, then its alarms (after
    their data window) for the bake; the global stack: the orchestrator's first run, then its own alarms."""
    poll, clock = timing.poll_seconds, timing.clock
    if wave.region is None:
        if read.global_alarms is None:
            return []
        checks = []
        if read.runs is not None:
            runs = partial(read.runs, wave)
            checks.append(
                WaveCheck(
                    "first run",
                    lambda: first_runs_step(
                        wave.label, runs, timing.first_run_timeout_seconds, poll, timing.now, clock, log
                    ),
                )
            )
        checks.append(WaveCheck("bake", lambda: _global_bake(wave, read, timing, log)))
        return checks
    timeout = (
        wave.stable_timeout_seconds
        if timing.stable_timeout_seconds is None
        else timing.stable_timeout_seconds
    )
    services = partial(read.services, wave.target)

    def stable() -> Step:
        log(f"{wave.label}: waiting up to {timeout / 60:.0f} min for its ECS services to be stable")
        return stable_step(services, service_stability, timeout, poll, clock, log)

    checks = [WaveCheck("stable", stable)]
    if read.target_groups is not None:
        groups = partial(read.target_groups, wave)

        def targets() -> Step:
            log(
                f"{wave.label}: stable; waiting for healthy targets (cold start "
                f"{wave.cold_start_seconds / 60:.0f} min)"
            )
            return targets_step(
                wave.label,
                groups,
                lambda: running_tasks(services()),
                wave.cold_start_seconds,
                poll,
                clock,
                log,
            )

        checks.append(WaveCheck("targets", targets))
    checks.append(WaveCheck("bake", lambda: _cell_bake(wave, read, timing, log)))
    return checks


def _cell_bake(wave: Wave, read: Readers, timing: Timing, log: Callable[[str], None]) -> Step:
    window = _window(wave, read, CELL_ALARM_DATA_SECONDS)
    log(f"{wave.label}: watching {', '.join(wave.alarms)} for {timing.bake_minutes:g} min")
    return (
        yield from bake_step(
            partial(read.alarms, wave.region, wave.alarms),
            wave.alarms,
            alarm_problems,
            timing.bake_minutes,
            window,
            timing.poll_seconds,
            timing.clock,
            log,
        )
    )


def _global_bake(wave: Wave, read: Readers, timing: Timing, log: Callable[[str], None]) -> Step:
    """The global stack runs no services; its own alarms (the orchestrator failing, throttled, not running)
    say whether the new orchestrator works before any region's weights depend on it."""
    assert read.global_alarms is not None
    names = read.global_alarms(wave)
    if not names:
        return [f"{wave.stack} has no alarms to watch: the orchestrator cannot be judged"]
    window = _window(wave, read, GLOBAL_ALARM_DATA_SECONDS) if read.runs is not None else 0.0
    log(f"global: watching {', '.join(names)} for {timing.bake_minutes:g} min")
    return (
        yield from bake_step(
            partial(read.alarms, wave.home, names),
            names,
            alarm_problems,
            timing.bake_minutes,
            window,
            timing.poll_seconds,
            timing.clock,
            log,
        )
    )


def _window(wave: Wave, read: Readers, known: float) -> float:
    if read.alarm_window is None:
        return known
    window = read.alarm_window(wave)
    return known if window is None else window


def run_waves(
    waves: Sequence[Wave],
    *,
    deploy: Callable[[Wave], None],
    services: Callable[[str], list[dict[str, Any]]],
    alarms: Callable[[str, Sequence[str]], dict[str, Any]],
    bake_minutes: float,
    stable_timeout_seconds: float | None = None,
    poll_seconds: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], datetime] = _utc_now,
    log: Callable[[str], None] = print,
    read_errors: tuple[type[Exception], ...] = (),
    before: Callable[[Wave], list[str]] = lambda wave: [],
    stack_state: Callable[[Wave], str] = lambda wave: "",
    global_alarms: Callable[[Wave], tuple[str, ...]] | None = None,
    target_groups: Callable[[Wave], list[TargetGroupHealth]] | None = None,
    alarm_window: Callable[[Wave], float | None] | None = None,
    runs: Callable[[Wave, datetime], float] | None = None,
    first_run_timeout_seconds: float = FIRST_RUN_TIMEOUT_SECONDS,
    checks: Callable[[Wave, list[WaveCheck]], list[WaveCheck]] = lambda wave, checks: checks,
    after_stable: Callable[[Wave], list[str]] | None = None,
    deploy_together: Callable[[Sequence[Wave]], None] | None = None,
) -> Outcome:
    """Deploy wave after wave until one is not quiet; a group's waves (the hotfix path) deploy in turn and
    are then watched side by side. `read_errors`: what the ECS, ELB and CloudWatch reads may raise; one of
    them stops the wave too, since a cell nobody can watch is not known to be fine. `before`: problems that
    stop a wave before its deploy (start times passed, a security change nobody approved). `stack_state`: the
    stack's true CloudFormation status after a failed deploy. `global_alarms`: the global stack's alarms,
    read once it is deployed, baked like a cell's. `target_groups`: a cell's load balancer target groups
    (None: no healthy-targets wait). `alarm_window`: how long a wave's alarms may stay in ALARM once their
    data begins. `runs(wave, since)`: the orchestrator's runs since a moment (None: no first-run wait).
    `checks`: amends a wave's list of steps (ops.deploy_watch.WaveCheck, by name). `stable_timeout_seconds`
    overrides each wave's own. `after_stable`: problems that stop a cell's wave once its services are
    stable, before its targets and bake are judged (ops/host_roll.py rolls its hosts onto the launch
    template's AMI there: a step named `hosts`). `deploy_together`: deploys a group of several waves (the
    hotfix path's cells of a region) in one call, side by side; without it they deploy one by one."""
    read = Readers(services, alarms, global_alarms, target_groups, alarm_window, runs)
    timing = Timing(
        bake_minutes, poll_seconds, stable_timeout_seconds, first_run_timeout_seconds, sleep, clock, now
    )
    outcome = Outcome()
    for group in wave_groups(waves):
        for wave in group:
            try:
                problems = before(wave)
            except read_errors as error:
                problems = [f"cannot check {wave.stack} before its deploy: {error}"]
            if problems:
                outcome.stopped_at, outcome.problems = wave, problems
                return outcome
        if len(group) > 1 and deploy_together is not None:
            stacks = [wave.stack for wave in group]
            log(f"deploying {', '.join(stacks)} side by side")
            try:
                deploy_together(group)
            except subprocess.CalledProcessError as error:
                # Some stacks of the call may have completed: each one's own status says which.
                outcome.stopped_at = group[0]
                outcome.problems = [f"cdk deploy {' '.join(stacks)} failed (exit {error.returncode})"]
                for wave in group:
                    try:
                        state = stack_state(wave)
                    except read_errors as read_error:
                        state = f"its CloudFormation status could not be read: {read_error}"
                    outcome.problems.append(f"{wave.label}: {state}")
                return outcome
            outcome.deployed += group
        else:
            for wave in group:
                log(f"deploying {wave.stack} ({wave.label})")
                try:
                    deploy(wave)
                except subprocess.CalledProcessError as error:
                    outcome.stopped_at = wave
                    outcome.problems = [f"cdk deploy {wave.stack} failed (exit {error.returncode})"]
                    try:
                        outcome.stack_state = stack_state(wave)
                    except read_errors as read_error:
                        outcome.stack_state = f"its CloudFormation status could not be read: {read_error}"
                    return outcome
                outcome.deployed.append(wave)
        stopped = watch_together(
            group,
            lambda wave: checks(
                wave, with_hosts_step(wave, wave_checks(wave, read, timing, log), after_stable)
            ),
            sleep,
            clock,
            read_errors,
            lambda wave, error: f"cannot read {wave.label}'s services, targets or alarms: {error}",
        )
        if stopped:
            first = next(wave for wave in group if wave in stopped)
            outcome.stopped_at = first
            outcome.problems = (
                stopped[first]
                if len(group) == 1
                else [f"{wave.label}: {problem}" for wave in group for problem in stopped.get(wave, [])]
            )
            return outcome
        for wave in group:
            log(f"{wave.label}: quiet for {bake_minutes:g} min")
    return outcome


def _stack_names(settings: Settings) -> StackNames:
    from stacks.props import global_stack_name, stack_name  # imports aws-cdk-lib: only when deploying

    return StackNames(
        global_stack_name(settings),
        {cell.name: stack_name(settings, cell.region, cell.index) for cell in settings.all_cells},
    )


def main(
    argv: Sequence[str] | None = None,
    session_factory: Callable[[], Any] | None = None,
    preflight: Callable[[str, Path, Any], int] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], datetime] = _utc_now,
) -> int:
    """`sleep`, `clock` and `now` (wall time: schedule checks, CloudWatch queries) are the waits' time, so a
    simulated clock can drive the whole command."""
    parser = argparse.ArgumentParser(prog="python -m ops.deploy_waves", description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="the config file to deploy")
    parser.add_argument("--dry-run", action="store_true", help="print the plan of waves and stop")
    parser.add_argument("--all-at-once", action="store_true", help="cdk deploy --all, no waves (WAVES=0)")
    parser.add_argument("--cdk", default=DEFAULT_CDK, help=f"the CDK CLI command (default {DEFAULT_CDK!r})")
    parser.add_argument("--assembly", type=Path, default=ASSEMBLY_DIRECTORY, help="where to synthesize")
    parser.add_argument("--bake-minutes", type=float, help="override the config's deploy.bake_minutes")
    parser.add_argument(
        "--stable-timeout", type=float, help="seconds (default: each cell's rolling deploy plus a margin)"
    )
    parser.add_argument(
        "--approve",
        action="store_true",
        help="deploy IAM and security-group changes without asking (APPROVE=1); otherwise each wave's "
        "security diff is printed and a broadening change stops it",
    )
    parser.add_argument("--skip-preflight", action="store_true", help="do not run the preflight first")
    parser.add_argument(
        "--roll-ami-in-freeze",
        action="store_true",
        help="roll a change of the hosts' AMI inside the freeze before an event "
        "(deploy.freeze_hours_before_event), deliberately",
    )
    parser.add_argument(
        "--hotfix",
        action="store_true",
        help="HOTFIX=1: the global stack, the first cell as a canary, then each region's remaining cells "
        "deployed together and watched side by side, every guard kept",
    )
    parser.add_argument("--poll", type=float, default=POLL_SECONDS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    from settings.loader import ConfigError, load_settings

    try:
        settings = load_settings(args.config)
    except ConfigError as error:
        print(f"config error:\n{error}", file=sys.stderr)
        return 1
    cdk = shlex.split(args.cdk)
    if args.all_at_once and args.hotfix:
        print("WAVES=0 and HOTFIX=1 contradict: a hotfix keeps every guard of the waves", file=sys.stderr)
        return 2
    if args.all_at_once:
        approval = ["--require-approval", "never"] if args.approve else []
        command = [*cdk, "deploy", "--all", *approval, "-c", f"config={args.config}"]
        if args.dry_run:
            print(f"one wave, every stack at once: {shlex.join(command)}")
            return 0
    bake_minutes = settings.deploy.bake_minutes if args.bake_minutes is None else args.bake_minutes
    names = None if args.all_at_once else _stack_names(settings)
    waves = [] if names is None else (plan_hotfix if args.hotfix else plan_waves)(settings, names)
    if args.dry_run:
        from ops.day_zero import checklist

        assert names is not None
        print(checklist(args.config, "deploy"))
        print(describe_day_zero(args.config, args.approve, not args.skip_preflight))
        print(describe_plan(waves, bake_minutes))
        print(
            describe_times(
                plan_waves(settings, names),
                plan_hotfix(settings, names),
                bake_minutes,
                _health_check_seconds(),
            )
        )
        return 0

    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from ops import host_roll  # imports this module: only when deploying

    session = (session_factory or boto3.Session)()
    if not has_credentials(session):
        print(
            no_credentials_message("make deploy", "it deploys stacks and watches alarms in your account"),
            file=sys.stderr,
        )
        return 2
    if args.all_at_once:
        return subprocess.run(command).returncode

    print(describe_plan(waves, bake_minutes))
    first_create = args.assembly.with_name(args.assembly.name + "-first-create")
    try:
        synthesize(cdk, args.config, args.assembly)
        synthesize_first_create(cdk, args.config, first_create)
    except subprocess.CalledProcessError as error:
        print(f"cdk synth failed (exit {error.returncode}); nothing deployed", file=sys.stderr)
        return 1
    for assembly in (args.assembly, first_create):
        missing = [w.stack for w in waves if w.stack not in assembly_stacks(assembly)]
        if missing:
            print(f"{assembly} has no stack {', '.join(missing)}; nothing deployed", file=sys.stderr)
            return 1
    if not args.skip_preflight:
        run_preflight = preflight or partial(_run_preflight, roll_ami_in_freeze=args.roll_ami_in_freeze)
        status = run_preflight(args.config, args.assembly, session)
        if status != 0:
            print(
                "preflight: the account cannot take this config yet (above); nothing deployed",
                file=sys.stderr,
            )
            return status

    def alarms(region: str, names: Sequence[str]) -> dict[str, Any]:
        return read_alarms(session.client("cloudwatch", region_name=region), names)

    def cloudformation(wave: Wave) -> Any:
        return session.client("cloudformation", region_name=wave.region or wave.home)

    def before(wave: Wave) -> list[str]:
        problems = schedule_problems(args.assembly, wave, now())
        if not problems:
            problems = host_roll.freeze_problems(
                session, settings, args.assembly, wave, now(), args.roll_ami_in_freeze
            )
        if not problems and not args.approve:
            problems = security_diff(cdk, args.assembly, wave.stack)
        return problems

    def deploy(wave: Wave) -> None:
        created_now = (
            wave.region is not None and stack_status(cloudformation(wave), wave.stack)[0] == NOT_CREATED
        )
        if created_now:
            print(f"{wave.stack}: created with its load balancer's deletion protection off")
            deploy_stack(cdk, first_create, wave.stack, approve=args.approve)
            print(f"{wave.stack}: created; turning deletion protection on")
        deploy_stack(cdk, args.assembly, wave.stack, approve=args.approve)

    def deploy_together(group: Sequence[Wave]) -> None:
        for wave in group:  # a cell created now goes in first, unprotected (rare during an event)
            if stack_status(cloudformation(wave), wave.stack)[0] == NOT_CREATED:
                print(f"{wave.stack}: created with its load balancer's deletion protection off")
                deploy_stack(cdk, first_create, wave.stack, approve=args.approve)
        deploy_stacks(cdk, args.assembly, [wave.stack for wave in group], approve=args.approve)

    def cloudwatch(wave: Wave) -> Any:
        return session.client("cloudwatch", region_name=wave.region or wave.home)

    def target_groups(wave: Wave) -> list[TargetGroupHealth]:
        elbv2 = session.client("elbv2", region_name=wave.region)
        return cell_target_groups(elbv2, settings.project, wave.cell or None)

    def runs(wave: Wave, since: datetime) -> float:
        metric = run_metric(stack_metric_alarms(cloudwatch(wave), wave.stack))
        if metric is None:
            raise NoRunSignal(
                f"{wave.stack} has no alarm on {RUN_SIGNAL}: the orchestrator's first run cannot be seen"
            )
        return runs_since(cloudwatch(wave), metric, since, now())

    outcome = run_waves(
        waves,
        deploy=deploy,
        services=lambda target: region_services(session, settings.project, target),
        alarms=alarms,
        bake_minutes=bake_minutes,
        stable_timeout_seconds=args.stable_timeout,
        poll_seconds=args.poll,
        sleep=sleep,
        clock=clock,
        now=now,
        read_errors=(BotoCoreError, ClientError, NoRunSignal),
        before=before,
        stack_state=lambda wave: end_state(wave.stack, *stack_status(cloudformation(wave), wave.stack)),
        global_alarms=lambda wave: stack_alarms(cloudwatch(wave), wave.stack),
        target_groups=target_groups,
        alarm_window=lambda wave: breaching_window_seconds(stack_metric_alarms(cloudwatch(wave), wave.stack)),
        runs=runs,
        deploy_together=deploy_together,
        after_stable=host_roll.after_stable(
            session, settings, bake_minutes, poll_seconds=args.poll, sleep=sleep, clock=clock
        ),
    )
    if outcome.stopped_at is not None:
        print(stop_report(outcome, waves, args.config), file=sys.stderr)
        return 1
    print(f"deployed {len(wave_groups(waves))} waves: {', '.join(w.label for w in waves)}")
    return 0


class NoRunSignal(Exception):
    """The global stack has no alarm on the orchestrator's invocations, so its runs cannot be read."""


RUN_SIGNAL = "AWS/Lambda Invocations"


def _health_check_seconds() -> float:
    """What the target groups' health checks add to the cold start, as the load balancer construct writes
    them into every cell's template (the deploy reads each group's own settings from ELB)."""
    from cdk_constructs.load_balancer import DEFAULT_HEALTH_CHECK  # imports aws-cdk-lib: dry run only

    timing = DEFAULT_HEALTH_CHECK
    return TargetGroupHealth(
        "", (), timing.interval_seconds, timing.timeout_seconds, timing.healthy_threshold
    ).health_check_seconds


def _run_preflight(config: str, assembly: Path, session: Any, roll_ami_in_freeze: bool = False) -> int:
    from ops.preflight.__main__ import main as preflight_main

    flags = ["--roll-ami-in-freeze"] if roll_ami_in_freeze else []
    return preflight_main([config, "--assembly", str(assembly), *flags], session_factory=lambda: session)


if __name__ == "__main__":
    sys.exit(main())
