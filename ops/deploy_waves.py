"""`python -m ops.deploy_waves CONFIG [--dry-run] [--all-at-once]`: `make deploy`, one cell at a time.

The global stack first, then each region's stack in config order (a region of several cells: each cell's
stack in turn, so a bad change stops in one cell). After a region's deploy: wait until its
ECS services are stable, then watch its region-unfit and region-degraded alarms for `deploy.bake_minutes`.
Any alarm, a failed rollout or services that do not settle stop the wave before the next region, and the
command prints what is deployed where and how to roll back. Every wave deploys the same cloud assembly,
synthesized once at the start, so a file edited mid-deploy cannot reach only the later regions.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ops.credentials import has_credentials, no_credentials_message
from ops.release_capacity import batches, project_clusters
from settings.cells import region_of
from settings.schema import Settings
from stacks.routing_names import degraded_alarm_name, unfit_alarm_name

DEFAULT_CDK = "npx --no-install cdk --no-notices"
ASSEMBLY_DIRECTORY = Path("build") / "deploy" / "cdk.out"
POLL_SECONDS = 60.0  # the alarms' period: polling faster sees nothing new
STABLE_TIMEOUT_SECONDS = 30 * 60.0
DESCRIBE_SERVICES_BATCH = 10  # DescribeServices takes at most 10 services per call


@dataclass(frozen=True)
class Wave:
    stack: str
    region: str | None = None  # None: the global stack, which runs no services and has no region alarms
    alarms: tuple[str, ...] = ()
    cell: str = ""  # the cell's name (`us-east-1/2`) in a region of several cells

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


def plan_waves(settings: Settings, names: StackNames) -> list[Wave]:
    """The global stack, then one wave per cell in config order (a region's cells one after another), each
    watching that cell's alarms: a bad change stops in one cell, before the rest of its region."""
    waves = [Wave(names.global_stack)]
    for cell in settings.all_cells:
        alarms = (
            unfit_alarm_name(settings, cell.region, cell.index),
            degraded_alarm_name(settings, cell.region, cell.index),
        )
        name = "" if cell.count == 1 else cell.name
        waves.append(Wave(names.regional[cell.name], cell.region, alarms, name))
    return waves


def describe_plan(waves: Sequence[Wave], bake_minutes: float) -> str:
    lines = [f"{len(waves)} waves, each only once the one before is deployed and quiet:"]
    for number, wave in enumerate(waves, start=1):
        if wave.region is None:
            lines.append(f"  {number}. {wave.stack} (global): deploy")
        else:
            lines.append(
                f"  {number}. {wave.stack} ({wave.label}): deploy, wait for stable ECS services, "
                f"watch for {bake_minutes:g} min:"
            )
            lines.append(f"       {', '.join(wave.alarms)}")
    return "\n".join(lines)


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
        lines.append(f"  {stopped.label}: {stopped.stack} (its deploy failed; CloudFormation rolled it back)")
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


def deploy_stack(cdk: Sequence[str], assembly: Path, stack: str) -> None:
    # --exclusively: no stack drags another along (they share no values: docs/architecture.md, "What it
    # deploys").
    subprocess.run([*cdk, "deploy", "--app", str(assembly), "--exclusively", stack], check=True)


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
    stable_timeout_seconds: float = STABLE_TIMEOUT_SECONDS,
    poll_seconds: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = print,
    read_errors: tuple[type[Exception], ...] = (),
) -> Outcome:
    """Deploy wave after wave until one is not quiet. `read_errors`: what the ECS and CloudWatch reads may
    raise; one of them stops the wave too, since a region nobody can watch is not known to be fine."""
    outcome = Outcome()
    for wave in waves:
        log(f"deploying {wave.stack} ({wave.label})")
        try:
            deploy(wave)
        except subprocess.CalledProcessError as error:
            outcome.stopped_at = wave
            outcome.problems = [
                f"cdk deploy {wave.stack} failed (exit {error.returncode}); CloudFormation "
                "rolls a failed stack update back by itself"
            ]
            return outcome
        outcome.deployed.append(wave)
        if wave.region is None:
            continue
        region = wave.label
        log(f"{region}: waiting for its ECS services to be stable")
        try:
            problems = wait_until_stable(
                partial(services, wave.target), stable_timeout_seconds, poll_seconds, sleep, clock, log
            )
            if not problems:
                log(f"{region}: stable; watching {', '.join(wave.alarms)} for {bake_minutes:g} min")
                problems = bake(
                    partial(alarms, wave.region, wave.alarms),
                    wave.alarms,
                    bake_minutes,
                    poll_seconds,
                    sleep,
                    clock,
                )
        except read_errors as error:
            problems = [f"cannot read {region}'s services or alarms: {error}"]
        if problems:
            outcome.stopped_at = wave
            outcome.problems = problems
            return outcome
        log(f"{region}: quiet for {bake_minutes:g} min")
    return outcome


def _stack_names(settings: Settings) -> StackNames:
    from stacks.props import global_stack_name, stack_name  # imports aws-cdk-lib: only when deploying

    return StackNames(
        global_stack_name(settings),
        {cell.name: stack_name(settings, cell.region, cell.index) for cell in settings.all_cells},
    )


def main(argv: Sequence[str] | None = None, session_factory: Callable[[], Any] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.deploy_waves", description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="the config file to deploy")
    parser.add_argument("--dry-run", action="store_true", help="print the plan of waves and stop")
    parser.add_argument("--all-at-once", action="store_true", help="cdk deploy --all, no waves (WAVES=0)")
    parser.add_argument("--cdk", default=DEFAULT_CDK, help=f"the CDK CLI command (default {DEFAULT_CDK!r})")
    parser.add_argument("--assembly", type=Path, default=ASSEMBLY_DIRECTORY, help="where to synthesize")
    parser.add_argument("--bake-minutes", type=float, help="override the config's deploy.bake_minutes")
    parser.add_argument("--stable-timeout", type=float, default=STABLE_TIMEOUT_SECONDS, help="seconds")
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
        command = [*cdk, "deploy", "--all", "-c", f"config={args.config}"]
        if args.dry_run:
            print(f"one wave, every stack at once: {shlex.join(command)}")
            return 0
    bake_minutes = settings.deploy.bake_minutes if args.bake_minutes is None else args.bake_minutes
    waves = [] if args.all_at_once else plan_waves(settings, _stack_names(settings))
    if args.dry_run:
        print(describe_plan(waves, bake_minutes))
        return 0

    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

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
    try:
        synthesize(cdk, args.config, args.assembly)
    except subprocess.CalledProcessError as error:
        print(f"cdk synth failed (exit {error.returncode}); nothing deployed", file=sys.stderr)
        return 1
    missing = [w.stack for w in waves if w.stack not in assembly_stacks(args.assembly)]
    if missing:
        print(f"{args.assembly} has no stack {', '.join(missing)}; nothing deployed", file=sys.stderr)
        return 1

    def alarms(region: str, names: Sequence[str]) -> dict[str, Any]:
        cloudwatch = session.client("cloudwatch", region_name=region)
        # Without AlarmTypes DescribeAlarms answers metric alarms only, and region-degraded is composite.
        return cloudwatch.describe_alarms(
            AlarmNames=list(names), AlarmTypes=["CompositeAlarm", "MetricAlarm"]
        )

    outcome = run_waves(
        waves,
        deploy=lambda wave: deploy_stack(cdk, args.assembly, wave.stack),
        services=lambda region: region_services(session, settings.project, region),
        alarms=alarms,
        bake_minutes=bake_minutes,
        stable_timeout_seconds=args.stable_timeout,
        poll_seconds=args.poll,
        read_errors=(BotoCoreError, ClientError),
    )
    if outcome.stopped_at is not None:
        print(stop_report(outcome, waves, args.config), file=sys.stderr)
        return 1
    print(f"deployed {len(waves)} waves: {', '.join(w.label for w in waves)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
