"""`python -m ops.deploy_waves CONFIG [--dry-run] [--all-at-once]`: `make deploy`, one cell at a time.

The global stack first, then each region's stack in config order (a region of several cells: each cell's
stack in turn, so a bad change stops in one cell). After a region's deploy: wait until its
ECS services are stable, then watch its region-unfit and region-degraded alarms for `deploy.bake_minutes`.
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from ops.cdk_cli import deploy_stack, synthesize_first_create
from ops.credentials import has_credentials, no_credentials_message
from ops.preflight.assembly import AssemblyError, read_template, scheduled_starts
from ops.preflight.checks import Status, schedule_findings
from ops.release_capacity import batches, project_clusters
from ops.stack_state import NOT_CREATED, end_state, stack_alarms, stack_status
from settings.cells import Cell, region_of
from settings.rollout import surge_hosts
from settings.schema import Settings
from stacks.routing_names import degraded_alarm_name, unfit_alarm_name

DEFAULT_CDK = "npx --no-install cdk --no-notices"
ASSEMBLY_DIRECTORY = Path("build") / "deploy" / "cdk.out"
POLL_SECONDS = 60.0  # the alarms' period: polling faster sees nothing new
STABLE_TIMEOUT_SECONDS = 30 * 60.0  # only where no config says better (tests, a wave built by hand)
# Beyond the rolling deploy's own time (rounds x cold-start budget): host launch, ECS registration and the
# ALB's health checks before ECS counts a task as running.
STABLE_MARGIN_SECONDS = 15 * 60.0
DESCRIBE_SERVICES_BATCH = 10  # DescribeServices takes at most 10 services per call


@dataclass(frozen=True)
class Wave:
    stack: str
    region: str | None = None  # None: the global stack, which runs no services and has no region alarms
    alarms: tuple[str, ...] = ()
    cell: str = ""  # the cell's name (`us-east-1/2`) in a region of several cells
    # How long its services may take to settle: its slowest fleet's rolling deploy (stable_timeout_seconds).
    stable_timeout_seconds: float = STABLE_TIMEOUT_SECONDS
    home: str = ""  # the global stack's region (its alarms are read there); empty for a cell's wave

    @property
    def label(self) -> str:
        return self.cell or self.region or "global"

    @property
    def target(self) -> str:
        """What the wave's services are read for: the region, or the one cell of it the wave deploys."""
        return self.cell or self.region or ""


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
    for cell in settings.all_cells:
        alarms = (
            unfit_alarm_name(settings, cell.region, cell.index),
            degraded_alarm_name(settings, cell.region, cell.index),
        )
        name = "" if cell.count == 1 else cell.name
        timeout = stable_timeout_seconds(settings, cell)
        waves.append(Wave(names.regional[cell.name], cell.region, alarms, name, timeout))
    return waves


def describe_plan(waves: Sequence[Wave], bake_minutes: float) -> str:
    lines = [f"{len(waves)} waves, each only once the one before is deployed and quiet:"]
    for number, wave in enumerate(waves, start=1):
        if wave.region is None:
            lines.append(
                f"  {number}. {wave.stack} (global, {wave.home or 'its region'}): deploy, watch its own "
                f"alarms (the orchestrator failing, throttled, not running) for {bake_minutes:g} min"
            )
        else:
            lines.append(
                f"  {number}. {wave.stack} ({wave.label}): deploy (created: with ALB deletion protection "
                f"off, then on), wait up to {wave.stable_timeout_seconds / 60:.0f} min for stable ECS "
                f"services, watch for {bake_minutes:g} min:"
            )
            lines.append(f"       {', '.join(wave.alarms)}")
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


def alarms_firing(described: dict[str, Any], watched: Iterable[str]) -> list[str]:
    """Problems in a DescribeAlarms answer (metric and composite alarms): each watched alarm in ALARM, and
    each one missing, since an alarm that is not there watches nothing."""
    found = {
        alarm["AlarmName"]: alarm
        for kind in ("MetricAlarms", "CompositeAlarms")
        for alarm in described.get(kind, [])
    }
    problems = []
    for name in watched:
        alarm = found.get(name)
        if alarm is None:
            problems.append(f"{name} does not exist, so the region cannot be watched")
        elif alarm.get("StateValue") == "ALARM":
            reason = alarm.get("StateReason", "").strip()
            problems.append(f"{name} is in ALARM" + (f": {reason}" if reason else ""))
    return problems


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
    after = list(waves)[list(waves).index(stopped) + 1 :]
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


def read_alarms(cloudwatch: Any, names: Sequence[str]) -> dict[str, Any]:
    """The watched alarms as DescribeAlarms answers them. Without AlarmTypes it answers metric alarms only,
    and region-degraded is composite."""
    return cloudwatch.describe_alarms(AlarmNames=list(names), AlarmTypes=["CompositeAlarm", "MetricAlarm"])


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


def wait_until_stable(
    read: Callable[[], list[dict[str, Any]]],
    timeout_seconds: float,
    poll_seconds: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    log: Callable[[str], None],
) -> list[str]:
    """Problems that stop the wave (empty when every service settled)."""
    deadline = clock() + timeout_seconds
    while True:
        described = read()
        if not described:
            log("  no ECS services of this project found here (clusters are found by their project tag)")
        stability = service_stability(described)
        if stability.failed:
            return list(stability.failed)
        if stability.settled:
            return []
        if clock() >= deadline:
            return [f"not stable after {timeout_seconds:.0f} s: {w}" for w in stability.waiting]
        log(f"  waiting for {len(stability.waiting)} services: {'; '.join(stability.waiting)}")
        sleep(poll_seconds)


def bake(
    read: Callable[[], dict[str, Any]],
    alarms: Sequence[str],
    minutes: float,
    poll_seconds: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> list[str]:
    """Watch the alarms for `minutes`, from the first look to one look at the end."""
    deadline = clock() + minutes * 60
    while True:
        problems = alarms_firing(read(), alarms)
        if problems or clock() >= deadline:
            return problems
        sleep(min(poll_seconds, max(deadline - clock(), 0)))


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
    log: Callable[[str], None] = print,
    read_errors: tuple[type[Exception], ...] = (),
    before: Callable[[Wave], list[str]] = lambda wave: [],
    stack_state: Callable[[Wave], str] = lambda wave: "",
    global_alarms: Callable[[Wave], tuple[str, ...]] | None = None,
    after_stable: Callable[[Wave], list[str]] = lambda wave: [],
) -> Outcome:
    """Deploy wave after wave until one is not quiet. `read_errors`: what the ECS and CloudWatch reads may
    raise; one of them stops the wave too, since a region nobody can watch is not known to be fine.
    `before`: problems that stop a wave before its deploy (start times passed, a security change nobody
    approved). `stack_state`: the stack's true CloudFormation status after a failed deploy. `global_alarms`:
    the global stack's alarms, read once it is deployed, baked like a region's. `stable_timeout_seconds`
    overrides each wave's own. `after_stable`: problems that stop a cell's wave once its services are
    stable, before its bake (ops/host_roll.py rolls its hosts onto the launch template's AMI there)."""
    outcome = Outcome()
    for wave in waves:
        try:
            problems = before(wave)
        except read_errors as error:
            problems = [f"cannot check {wave.stack} before its deploy: {error}"]
        if problems:
            outcome.stopped_at, outcome.problems = wave, problems
            return outcome
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
        label = wave.label
        try:
            if wave.region is None:
                problems = _bake_global(
                    wave, alarms, global_alarms, bake_minutes, poll_seconds, sleep, clock, log
                )
            else:
                timeout = (
                    wave.stable_timeout_seconds if stable_timeout_seconds is None else stable_timeout_seconds
                )
                log(f"{label}: waiting up to {timeout / 60:.0f} min for its ECS services to be stable")
                problems = wait_until_stable(
                    partial(services, wave.target), timeout, poll_seconds, sleep, clock, log
                )
                if not problems:
                    problems = after_stable(wave)
                if not problems:
                    log(f"{label}: stable; watching {', '.join(wave.alarms)} for {bake_minutes:g} min")
                    problems = bake(
                        partial(alarms, wave.region, wave.alarms),
                        wave.alarms,
                        bake_minutes,
                        poll_seconds,
                        sleep,
                        clock,
                    )
        except read_errors as error:
            problems = [f"cannot read {label}'s services or alarms: {error}"]
        if problems:
            outcome.stopped_at = wave
            outcome.problems = problems
            return outcome
        log(f"{label}: quiet for {bake_minutes:g} min")
    return outcome


def _bake_global(
    wave: Wave,
    alarms: Callable[[str, Sequence[str]], dict[str, Any]],
    global_alarms: Callable[[Wave], tuple[str, ...]] | None,
    bake_minutes: float,
    poll_seconds: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    log: Callable[[str], None],
) -> list[str]:
    """The global stack runs no services; its own alarms (the orchestrator failing, throttled, not running)
    say whether the new orchestrator works before any region's weights depend on it."""
    if global_alarms is None:
        return []
    names = global_alarms(wave)
    if not names:
        return [f"{wave.stack} has no alarms to watch: the orchestrator cannot be judged"]
    log(f"global: watching {', '.join(names)} for {bake_minutes:g} min")
    return bake(partial(alarms, wave.home, names), names, bake_minutes, poll_seconds, sleep, clock)


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
) -> int:
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
    parser.add_argument("--poll", type=float, default=POLL_SECONDS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    from settings.loader import ConfigError, load_settings

    try:
        settings = load_settings(args.config)
    except ConfigError as error:
        print(f"config error:\n{error}", file=sys.stderr)
        return 1
    cdk = shlex.split(args.cdk)
    if args.all_at_once:
        approval = ["--require-approval", "never"] if args.approve else []
        command = [*cdk, "deploy", "--all", *approval, "-c", f"config={args.config}"]
        if args.dry_run:
            print(f"one wave, every stack at once: {shlex.join(command)}")
            return 0
    bake_minutes = settings.deploy.bake_minutes if args.bake_minutes is None else args.bake_minutes
    waves = [] if args.all_at_once else plan_waves(settings, _stack_names(settings))
    if args.dry_run:
        from ops.day_zero import checklist

        print(checklist(args.config, "deploy"))
        print(describe_day_zero(args.config, args.approve, not args.skip_preflight))
        print(describe_plan(waves, bake_minutes))
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
        problems = schedule_problems(args.assembly, wave, datetime.now(UTC))
        if not problems:
            problems = host_roll.freeze_problems(
                session, settings, args.assembly, wave, datetime.now(UTC), args.roll_ami_in_freeze
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

    outcome = run_waves(
        waves,
        deploy=deploy,
        services=lambda region: region_services(session, settings.project, region),
        alarms=alarms,
        bake_minutes=bake_minutes,
        stable_timeout_seconds=args.stable_timeout,
        poll_seconds=args.poll,
        read_errors=(BotoCoreError, ClientError),
        before=before,
        stack_state=lambda wave: end_state(wave.stack, *stack_status(cloudformation(wave), wave.stack)),
        global_alarms=lambda wave: stack_alarms(
            session.client("cloudwatch", region_name=wave.home), wave.stack
        ),
        after_stable=host_roll.after_stable(
            session, settings, bake_minutes, poll_seconds=args.poll, sleep=time.sleep, clock=time.monotonic
        ),
    )
    if outcome.stopped_at is not None:
        print(stop_report(outcome, waves, args.config), file=sys.stderr)
        return 1
    print(f"deployed {len(waves)} waves: {', '.join(w.label for w in waves)}")
    return 0


def _run_preflight(config: str, assembly: Path, session: Any, roll_ami_in_freeze: bool = False) -> int:
    from ops.preflight.__main__ import main as preflight_main

    flags = ["--roll-ami-in-freeze"] if roll_ami_in_freeze else []
    return preflight_main([config, "--assembly", str(assembly), *flags], session_factory=lambda: session)


if __name__ == "__main__":
    sys.exit(main())
