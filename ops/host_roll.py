"""Hosts onto the launch template's AMI before a wave moves on, canary first; and the freeze before an event.

A launch-template change replaces no host by itself: only an instance refresh or new launches boot the new
AMI. So after a cell's stack is deployed and its services are stable, each fleet's hosts are compared with
the AMI of the launch template version their group launches (EC2 DescribeInstances against
DescribeLaunchTemplateVersions), and a group with hosts on another AMI is rolled with an instance refresh:
a small canary step, a pause as long as the deploy's bake while the cell's alarms are watched, then the
rest. Any alarm, a failed refresh or one that overruns cancels the refresh and stops the wave.

Decisions are pure functions; the edge takes the boto3 session and the clock and sleep it is given, so a
simulated clock can drive it.

AWS behaviour relied on (EC2 Auto Scaling API reference and user guide, ECS developer guide):
- RollbackInstanceRefresh is not supported without a desired configuration, and restores the configuration
  the group had before the refresh started: here CloudFormation has already moved the group to the new
  launch template version, so there is nothing older to restore. CancelInstanceRefresh stops the refresh
  and keeps the hosts already replaced ("Cancel an instance refresh"); the way back is to deploy the
  previous AMI, which this roll then moves the hosts to.
- ECS managed termination protection keeps every host that runs a task protected from scale-in; an
  instance refresh must be started with ScaleInProtectedInstances=Refresh ("Replace" in the console) or it
  waits on them. Managed instance draining (on in cdk_constructs/fleet/hosts.py) then drains each host
  before it terminates, so its task starts on another host first ("Safely stop Amazon ECS workloads
  running on EC2 instances").
- MinHealthyPercentage 100 with MaxHealthyPercentage above it launches replacements before terminating:
  the fleet never has fewer hosts in service than it wants, and it replaces at most the deploy surge at a
  time (the room the group's maximum already keeps above the service's, cdk_constructs/fleet/rollout.py).
- CheckpointPercentages/CheckpointDelay: the refresh pauses that long once that share is replaced.
- InstanceWarmup: how long after a new host is in service the refresh waits before the next; the model's
  cold-start budget, so a canary is judged serving, not booting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ops.preflight.assembly import AssemblyError, launch_template_images, read_template
from ops.preflight.aws import FleetGroup, fleet_groups, template_targets
from ops.preflight.checks import AmiDrift, ami_drift, ami_drifts, ami_freeze
from ops.wave import STABLE_MARGIN_SECONDS, Wave, alarms_firing, read_alarms
from settings.rollout import surge_hosts
from settings.schema import Settings

FREEZE_FLAG = "--roll-ami-in-freeze"
CANARY_PERCENT = 5  # the first checkpoint: a host or a few, judged before the rest follow
# DescribeInstanceRefreshes statuses (API reference, InstanceRefresh.Status).
RUNNING = frozenset({"Pending", "InProgress", "Baking", "Cancelling", "RollbackInProgress"})
SUCCEEDED = "Successful"


# ---- decisions (pure) --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RollPolicy:
    canary_percent: int
    checkpoint_delay_seconds: int  # the canary's task's cold start, then its bake, the cell's alarms watched
    instance_warmup_seconds: int  # a new host's boot and the model's cold start
    max_healthy_percent: int  # 100 plus the deploy surge: replacements launch before hosts terminate


def roll_policy(settings: Settings, bake_minutes: float) -> RollPolicy:
    surge = settings.serving.deployment.max_surge_percent
    return RollPolicy(
        canary_percent=CANARY_PERCENT,
        # A canary host counts as replaced once it is in service after its warm-up, but its task moves onto it
        # only as an old host drains, and then cold-starts: the pause covers that cold start, then the bake.
        # The bake alone ended before a bad AMI's canary had served long enough to trip the cell's alarms
        # (the game day's bad-ami-before-event: caught 22 minutes after the canary started serving).
        checkpoint_delay_seconds=int(settings.serving.cold_start_budget_seconds + bake_minutes * 60),
        instance_warmup_seconds=settings.serving.cold_start_budget_seconds,
        max_healthy_percent=min(200, 100 + surge),  # AWS's range is 100 to 200
    )


def refresh_request(group: str, policy: RollPolicy) -> dict[str, Any]:
    """StartInstanceRefresh's arguments for one group (no desired configuration: the group's own launch
    template version, which the deploy has just set)."""
    return {
        "AutoScalingGroupName": group,
        "Strategy": "Rolling",
        "Preferences": {
            "MinHealthyPercentage": 100,
            "MaxHealthyPercentage": policy.max_healthy_percent,
            "InstanceWarmup": policy.instance_warmup_seconds,
            "CheckpointPercentages": [policy.canary_percent, 100],
            "CheckpointDelay": policy.checkpoint_delay_seconds,
            # Hosts already on the group's launch template version (an earlier roll's canaries) stay.
            "SkipMatching": True,
            # Managed termination protection protects every host with a task; the default (Wait) would
            # wait on them for ever.
            "ScaleInProtectedInstances": "Refresh",
            # A host an operator set aside in Standby is theirs; it is reported as still on its AMI.
            "StandbyInstances": "Ignore",
        },
    }


def roll_timeout_seconds(hosts: int, policy: RollPolicy) -> float:
    """How long a group's refresh may take before it is called stuck: the canary and each batch of the
    surge one warm-up (plus launch and drain) long, and the canary's pause."""
    batch = surge_hosts(hosts, policy.max_healthy_percent - 100) if hosts else 1
    batches = 1 + math.ceil(max(hosts, 1) / batch)
    return (
        batches * (policy.instance_warmup_seconds + STABLE_MARGIN_SECONDS) + policy.checkpoint_delay_seconds
    )


@dataclass(frozen=True)
class Verdict:
    done: bool  # every refresh succeeded
    problems: tuple[str, ...] = ()  # a stop: cancel what still runs
    progress: tuple[str, ...] = ()  # what is still running, for the log


def judge(
    refreshes: Mapping[str, Mapping[str, Any]], alarm_problems: Sequence[str], overdue: bool
) -> Verdict:
    """The roll after one look: any alarm, a refresh that ended other than successfully, or the time run
    out stops it; every refresh successful ends it."""
    problems = list(alarm_problems)
    progress = []
    for group, refresh in refreshes.items():
        status = refresh.get("Status", "?")
        if status == SUCCEEDED:
            continue
        if status in RUNNING:
            reason = refresh.get("StatusReason", "")
            progress.append(
                f"{group}: {status}, {refresh.get('PercentageComplete', 0)}% done, "
                f"{refresh.get('InstancesToUpdate', '?')} hosts to go" + (f" ({reason})" if reason else "")
            )
        else:
            reason = refresh.get("StatusReason", "").strip()
            problems.append(
                f"{group}: instance refresh {refresh.get('InstanceRefreshId', '?')} is {status}"
                + (f": {reason}" if reason else "")
            )
    if overdue and progress:
        problems += [f"still rolling after the time allowed: {line}" for line in progress]
    if problems:
        return Verdict(False, tuple(problems), tuple(progress))
    return Verdict(not progress, (), tuple(progress))


def cancelled_advice(groups: Sequence[str], target: str) -> str:
    return (
        f"cancelled the instance refresh of {', '.join(groups)}: hosts already replaced keep {target} "
        "(a refresh cannot be rolled back to a launch template version the deploy has replaced); to move "
        "them back, revert container.neuron_ami_release and deploy again: the roll then moves them to the "
        "AMI the template boots"
    )


def freeze_advice(label: str, changes: Sequence[str], freeze_text: str, ends: str) -> list[str]:
    return [f"{label}: {change}" for change in changes] + [
        f"{label}: an AMI change inside {freeze_text} is refused, so the event's hosts launch on an AMI "
        f"already proven: deploy it after {ends}, or roll it deliberately (canary first) with "
        f"`python -m ops.deploy_waves CONFIG {FREEZE_FLAG}`"
    ]


# ---- edge: Auto Scaling, EC2, SSM, CloudWatch ----------------------------------------------------------


def cell_filter(wave: Wave) -> str | None:
    """The `cell` tag of the wave's resources: only a region of several cells has one."""
    return wave.cell or None


def wave_groups(session: Any, project: str, wave: Wave) -> list[FleetGroup]:
    assert wave.region is not None
    autoscaling = session.client("autoscaling", region_name=wave.region)
    ec2 = session.client("ec2", region_name=wave.region)
    return fleet_groups(autoscaling, ec2, project, cell_filter(wave))


def freeze_problems(
    session: Any, settings: Settings, assembly: Path, wave: Wave, now: datetime, allowed: bool
) -> list[str]:
    """Before a cell's deploy: inside the freeze before one of its region's events, an assembly whose
    launch templates boot another AMI than the cell's hosts run (or than its deployed launch templates
    boot, for a group with no host yet) stops the wave, unless rolled deliberately."""
    if wave.region is None or allowed:
        return []
    freeze = ami_freeze(settings, wave.region, now)
    if freeze is None:
        return []
    try:
        template = read_template(assembly, wave.stack)
    except AssemblyError as error:
        return [str(error)]
    wanted = launch_template_images(template) if template is not None else {}
    if not wanted:
        return []
    groups = wave_groups(session, settings.project, wave)
    if not groups:
        return []  # a first deploy: nothing runs that could change
    ssm = session.client("ssm", region_name=wave.region)
    targets = template_targets(ssm, wanted, {})
    changes = [drift.describe() for drift in ami_drifts(groups, targets)]
    for group in groups:
        target = targets.get(group.instance_type)
        if not group.hosts and target and group.template_image not in (None, target):
            changes.append(
                f"{group.name} ({group.instance_type}) launches {group.template_image}; this deploy makes "
                f"it launch {target}"
            )
    if not changes:
        return []
    ends = freeze.ends.strftime("%Y-%m-%d %H:%M UTC")
    return freeze_advice(wave.label, changes, freeze.describe(), ends)


def group_drifts(groups: Sequence[FleetGroup]) -> list[AmiDrift]:
    """After the deploy: each group's hosts against its own launch template version, which is what
    CloudFormation resolved (a public parameter may have moved since the assembly was checked)."""
    found = []
    for group in groups:
        drift = ami_drift(group, group.template_image) if group.template_image else None
        if drift is not None:
            found.append(drift)
    return found


def start_refreshes(
    autoscaling: Any, drifts: Sequence[AmiDrift], policy: RollPolicy
) -> tuple[dict[str, str], list[str]]:
    """Group -> the refresh started for it, and the problems of the ones that could not start (one already
    running from an earlier deploy: InstanceRefreshInProgress)."""
    started, problems = {}, []
    for drift in drifts:
        try:
            answer = autoscaling.start_instance_refresh(**refresh_request(drift.group, policy))
        except ClientError as error:
            detail = error.response.get("Error", {})
            reason = f"{detail.get('Code')}: {detail.get('Message')}"
            problems.append(f"{drift.group}: cannot start an instance refresh: {reason}")
            continue
        started[drift.group] = answer["InstanceRefreshId"]
    return started, problems


def read_refreshes(autoscaling: Any, started: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    found = {}
    for group, refresh_id in started.items():
        answer = autoscaling.describe_instance_refreshes(
            AutoScalingGroupName=group, InstanceRefreshIds=[refresh_id]
        )
        refreshes = answer.get("InstanceRefreshes", [])
        found[group] = refreshes[0] if refreshes else {"InstanceRefreshId": refresh_id, "Status": "missing"}
    return found


def cancel_refreshes(autoscaling: Any, groups: Sequence[str]) -> list[str]:
    """Cancel each group's refresh; the ones that could not be cancelled, said so (a refresh that has just
    ended answers ActiveInstanceRefreshNotFound: nothing left to cancel)."""
    problems = []
    for group in groups:
        try:
            autoscaling.cancel_instance_refresh(AutoScalingGroupName=group)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code != "ActiveInstanceRefreshNotFound":
                problems.append(
                    f"{group}: could not cancel its instance refresh ({code}); cancel it: aws autoscaling "
                    f"cancel-instance-refresh --auto-scaling-group-name {group}"
                )
    return problems


def roll_wave(
    session: Any,
    settings: Settings,
    wave: Wave,
    policy: RollPolicy,
    *,
    poll_seconds: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    log: Callable[[str], None] = print,
) -> list[str]:
    """The cell's hosts onto their launch template's AMI, watched on the cell's alarms. Problems that stop
    the wave; empty when no host needed it or every refresh succeeded."""
    if wave.region is None:
        return []
    drifts = group_drifts(wave_groups(session, settings.project, wave))
    if not drifts:
        log(f"{wave.label}: every host runs its launch template's AMI")
        return []
    autoscaling = session.client("autoscaling", region_name=wave.region)
    cloudwatch = session.client("cloudwatch", region_name=wave.region)
    for drift in drifts:
        log(f"{wave.label}: {drift.describe()}: rolling them, {policy.canary_percent}% first")
    started, problems = start_refreshes(autoscaling, drifts, policy)
    if problems:
        return problems + cancel_refreshes(autoscaling, list(started))
    log(
        f"{wave.label}: instance refreshes started ({', '.join(started)}); if this command is stopped they "
        "go on: aws autoscaling cancel-instance-refresh --auto-scaling-group-name <group>"
    )
    timeout = max(roll_timeout_seconds(drift.hosts, policy) for drift in drifts)
    deadline = clock() + timeout
    while True:
        try:
            refreshes = read_refreshes(autoscaling, started)
            alarm_problems = alarms_firing(read_alarms(cloudwatch, wave.alarms), wave.alarms)
        except (BotoCoreError, ClientError) as error:
            # A roll nobody can watch is not known to be fine: stop it rather than leave it unwatched.
            verdict = Verdict(False, (f"cannot read {wave.label}'s instance refreshes or alarms: {error}",))
        else:
            verdict = judge(refreshes, alarm_problems, clock() >= deadline)
        if verdict.problems:
            # A refresh that has already ended answers the cancel with ActiveInstanceRefreshNotFound.
            targets = ", ".join(sorted({drift.target for drift in drifts}))
            return [
                *verdict.problems,
                *cancel_refreshes(autoscaling, list(started)),
                cancelled_advice(list(started), targets),
            ]
        if verdict.done:
            log(f"{wave.label}: every host replaced ({', '.join(started)})")
            return []
        log(f"{wave.label}: rolling hosts: {'; '.join(verdict.progress)}")
        sleep(poll_seconds)


def after_stable(
    session: Any,
    settings: Settings,
    bake_minutes: float,
    *,
    poll_seconds: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    log: Callable[[str], None] = print,
) -> Callable[[Wave], list[str]]:
    """run_waves's `after_stable`: roll each cell's hosts once its services are stable."""
    policy = roll_policy(settings, bake_minutes)

    def roll(wave: Wave) -> list[str]:
        return roll_wave(
            session, settings, wave, policy, poll_seconds=poll_seconds, sleep=sleep, clock=clock, log=log
        )

    return roll
