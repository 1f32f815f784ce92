"""`python -m ops.release_capacity CONFIG`: let `cdk destroy` finish.

Capacity providers with managed termination protection keep every host that runs a task protected from
scale-in, and service auto scaling keeps the task count at its configured minimum, so CloudFormation
can wait a long time on the ASGs and capacity providers when it deletes a stack. Run before
`cdk destroy` (the Makefile's destroy target does): per region, pin every serving service's scaling
bounds and desired count to zero, lift scale-in protection, set the host groups to zero and wait until
their hosts are gone. Resources are found by the stack's `project` tag, so nothing else is touched.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ops.credentials import has_credentials, no_credentials_message

PROJECT_TAG = "project"
CELL_TAG = "cell"  # on every resource of a cell's stack, in a region of several cells
PROTECTION_BATCH = 50  # SetInstanceProtection takes at most 50 instance ids per call


@dataclass
class RegionRelease:
    region: str
    services: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    unprotected_instances: int = 0
    remaining_instances: int = 0

    @property
    def done(self) -> bool:
        return self.remaining_instances == 0


def protected_instance_ids(group: dict[str, Any]) -> list[str]:
    """Instances of a group (describe_auto_scaling_groups item) still protected from scale-in."""
    return [i["InstanceId"] for i in group.get("Instances", []) if i.get("ProtectedFromScaleIn")]


def batches(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def has_tag(tags: Iterable[dict[str, str]], key: str, value: str) -> bool:
    return any(
        tag.get("key", tag.get("Key")) == key and tag.get("value", tag.get("Value")) == value for tag in tags
    )


def project_clusters(ecs: Any, project: str, cell: str | None = None) -> list[str]:
    """The project's clusters in the client's region; with `cell`, only that cell's (tagged `cell`)."""
    arns = [arn for page in ecs.get_paginator("list_clusters").paginate() for arn in page["clusterArns"]]
    clusters = []
    for chunk in batches(arns, 100):
        for cluster in ecs.describe_clusters(clusters=list(chunk), include=["TAGS"])["clusters"]:
            tags = cluster.get("tags", [])
            if has_tag(tags, PROJECT_TAG, project) and (cell is None or has_tag(tags, CELL_TAG, cell)):
                clusters.append(cluster["clusterName"])
    return clusters


def _stop_services(ecs: Any, scaling: Any, cluster: str) -> list[str]:
    services = []
    for page in ecs.get_paginator("list_services").paginate(cluster=cluster):
        for arn in page["serviceArns"]:
            name = arn.rsplit("/", 1)[-1]
            resource_id = f"service/{cluster}/{name}"
            targets = scaling.describe_scalable_targets(ServiceNamespace="ecs", ResourceIds=[resource_id])
            if targets["ScalableTargets"]:
                # Else service auto scaling would raise the count straight back to its minimum.
                scaling.register_scalable_target(
                    ServiceNamespace="ecs",
                    ResourceId=resource_id,
                    ScalableDimension="ecs:service:DesiredCount",
                    MinCapacity=0,
                    MaxCapacity=0,
                )
            ecs.update_service(cluster=cluster, service=name, desiredCount=0)
            services.append(f"{cluster}/{name}")
    return services


def _project_groups(autoscaling: Any, project: str) -> list[dict[str, Any]]:
    paginator = autoscaling.get_paginator("describe_auto_scaling_groups")
    pages = paginator.paginate(Filters=[{"Name": f"tag:{PROJECT_TAG}", "Values": [project]}])
    return [group for page in pages for group in page["AutoScalingGroups"]]


def _release_groups(autoscaling: Any, groups: list[dict[str, Any]]) -> int:
    unprotected = 0
    for group in groups:
        name = group["AutoScalingGroupName"]
        # Protection first: an ASG does not terminate protected hosts to meet a lower desired capacity.
        autoscaling.update_auto_scaling_group(
            AutoScalingGroupName=name, NewInstancesProtectedFromScaleIn=False
        )
        protected = protected_instance_ids(group)
        for chunk in batches(protected, PROTECTION_BATCH):
            autoscaling.set_instance_protection(
                AutoScalingGroupName=name, InstanceIds=list(chunk), ProtectedFromScaleIn=False
            )
        unprotected += len(protected)
        autoscaling.update_auto_scaling_group(AutoScalingGroupName=name, MinSize=0, DesiredCapacity=0)
    return unprotected


def release_region(
    session: Any,
    project: str,
    region: str,
    *,
    timeout_seconds: float = 1800,
    poll_seconds: float = 15,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] = print,
) -> RegionRelease:
    """Scale one region's serving capacity of `project` to zero and wait for its hosts to terminate."""
    ecs = session.client("ecs", region_name=region)
    scaling = session.client("application-autoscaling", region_name=region)
    autoscaling = session.client("autoscaling", region_name=region)
    result = RegionRelease(region)
    for cluster in project_clusters(ecs, project):
        result.services += _stop_services(ecs, scaling, cluster)
    groups = _project_groups(autoscaling, project)
    result.groups = [group["AutoScalingGroupName"] for group in groups]
    result.unprotected_instances = _release_groups(autoscaling, groups)
    log(
        f"{region}: {len(result.services)} services and {len(result.groups)} host groups set to zero, "
        f"{result.unprotected_instances} hosts unprotected"
    )
    deadline = time.monotonic() + timeout_seconds
    while True:
        remaining = sum(len(group["Instances"]) for group in _project_groups(autoscaling, project))
        result.remaining_instances = remaining
        if remaining == 0 or time.monotonic() >= deadline:
            return result
        log(f"{region}: waiting for {remaining} hosts to terminate")
        sleep(poll_seconds)


def stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def main(argv: Sequence[str] | None = None, session_factory: Callable[[], Any] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.release_capacity", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("config", help="the config file the stacks were deployed from")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds to wait per region (default 1800)"
    )
    args = parser.parse_args(argv)

    from settings.loader import ConfigError, load_settings

    try:
        settings = load_settings(args.config)
    except ConfigError as error:
        print(f"config error:\n{error}", file=sys.stderr)
        return 1
    if settings.load_balancer.deletion_protection:
        # Releasing the hosts first and then failing on the load balancer would leave each region serving
        # nothing, behind an endpoint that still answers.
        print(
            f"{args.config}: load_balancer.deletion_protection is on, so `cdk destroy` would fail on the "
            "ALBs. Set it to false, `make deploy`, then destroy; nothing changed",
            file=sys.stderr,
        )
        return 1
    regions = list(settings.regions)

    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    # Before the question: a confirmation that can only end in "no credentials" wastes the operator's care.
    session = (session_factory or boto3.Session)()
    if not has_credentials(session):
        needs = "it scales the fleets down in your account before `cdk destroy`"
        print(no_credentials_message("make destroy", needs), file=sys.stderr)
        return 2
    if not args.yes:
        if not stdin_is_terminal():
            message = "no terminal to confirm on; run `make destroy YES=1` to confirm; nothing changed"
            print(f"make destroy: {message}", file=sys.stderr)
            return 1
        try:
            answer = input(
                f"Scale every serving host of {settings.project!r} in {', '.join(regions)} to zero before "
                "destroying the stacks? Type the project name to continue: "
            )
        except EOFError:  # Ctrl-D
            answer = ""
        if answer.strip() != settings.project:
            print("not confirmed; nothing changed", file=sys.stderr)
            return 1

    failed = []
    for region in regions:
        try:
            result = release_region(session, settings.project, region, timeout_seconds=args.timeout)
        except (BotoCoreError, ClientError) as error:
            print(f"{region}: {error}", file=sys.stderr)
            return 1
        if not result.done:
            failed.append(f"{region} ({result.remaining_instances} hosts left)")
    if failed:
        print(f"hosts still running after {args.timeout:.0f} s in: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
