"""`python -m ops.compile CONFIG [--dry-run] [--wait]`: `make compile`, the Neuron artifacts before any host
needs them.

Every fleet's compiled-artifact key is computed here, offline, exactly as its hosts compute it at start: the
task definition's environment (stacks/props.py and the fleet's task definition), the image's model.json, and
the kit's toolchain pin that the image is checked against (container/entrypoint/artifact_key.py). A key is
complete when `compiled/<key>/artifact-manifest.json` exists under the region's artifacts prefix (a compile
writes it last). For each key without one, the compile runs on the fleet's own instance type: an ECS task of
the fleet's compile task definition (cdk_constructs/fleet/task_definition.py CompileTaskDefinition: the
serving image, devices and environment, the compile mode `python3 -m entrypoint.compile`, the stack's
compile task role, the only role that may write `compiled/`, and a log group apart from the fleet's) on the
region's cluster (the first cell's), placed by the fleet's capacity provider, in the subnets and security
group of the fleet's service. It compiles, uploads `compiled/<key>/` and writes the manifest last.
DRY_RUN=1 lists the keys and what exists.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONTAINER = REPO / "container"
MODEL_JSON = CONTAINER / "model_repository" / "assistant" / "1" / "model.json"
MANIFEST_NAME = "artifact-manifest.json"  # container/entrypoint/artifact_key.py MANIFEST_NAME
STARTED_BY = "make-compile"


@dataclass(frozen=True)
class FleetArtifact:
    """What one fleet of one region needs compiled (its cells share the key and the region's prefix)."""

    region: str
    instance_type: str
    key: str
    bucket: str
    prefix: str  # <artifacts prefix>/compiled/<key>

    @property
    def manifest_key(self) -> str:
        return f"{self.prefix}/{MANIFEST_NAME}"

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}/"


def _container_modules() -> tuple[Any, Any]:
    """The serving image's own key and engine-settings code (stdlib only), so the key here is the one a
    host computes."""
    path = str(CONTAINER)
    if path not in sys.path:
        sys.path.append(path)
    from entrypoint import artifact_key
    from serving import engine_settings

    return artifact_key, engine_settings


def task_environment(settings: Any, region: str, fleet: Any) -> dict[str, str]:
    """The fleet's container environment as its task definition sets it."""
    from cdk_constructs.fleet.task_definition import fleet_environment
    from stacks.props import fleet_props

    return fleet_environment(fleet_props(settings, region, fleet))


def fleet_artifacts(settings: Any, model_json: Path = MODEL_JSON) -> list[FleetArtifact]:
    from stacks.props import engine_environment

    artifact_key, engine_settings = _container_modules()
    found = []
    for region, config in settings.regions.items():
        for fleet in config.fleets:
            environ = task_environment(settings, region, fleet)
            engine = engine_settings.engine_settings(model_json, environ)
            inputs = artifact_key.compile_inputs(engine, environ, tuple(sorted(artifact_key.TOOLCHAIN_PIN)))
            key = artifact_key.artifact_key(inputs)
            compiled = dict(engine_environment(settings, region))["COMPILED_ARTIFACTS_S3_URI"]
            bucket, _, prefix = compiled.removeprefix("s3://").partition("/")
            found.append(
                FleetArtifact(region, fleet.instance_type, key, bucket, f"{prefix.rstrip('/')}/{key}")
            )
    return found


def manifest_exists(s3: Any, artifact: FleetArtifact) -> bool:
    from botocore.exceptions import ClientError

    try:
        s3.head_object(Bucket=artifact.bucket, Key=artifact.manifest_key)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound", "NoSuchBucket"):
            return False
        raise
    return True


def missing(artifacts: Iterable[FleetArtifact], s3_for: Callable[[str], Any]) -> list[FleetArtifact]:
    return [a for a in artifacts if not manifest_exists(s3_for(a.region), a)]


def one_per_location(artifacts: Iterable[FleetArtifact]) -> list[FleetArtifact]:
    """The first artifact of each S3 location: regions whose artifacts prefix is shared share the compiled
    artifacts, and one compile writes them for all (more tasks of one key would compile the same files
    again, and race to write them)."""
    first: dict[tuple[str, str], FleetArtifact] = {}
    for artifact in artifacts:
        first.setdefault((artifact.bucket, artifact.manifest_key), artifact)
    return list(first.values())


def describe(artifacts: Sequence[FleetArtifact], exists: dict[FleetArtifact, bool] | None) -> str:
    lines = [f"{len(artifacts)} compiled-artifact keys (one per region and instance type):"]
    for artifact in artifacts:
        state = (
            "not checked (no AWS credentials)"
            if exists is None
            else ("complete" if exists[artifact] else "MISSING: `make compile` builds it")
        )
        lines.append(f"  {artifact.region} {artifact.instance_type}: {artifact.key}")
        lines.append(f"      {artifact.uri}{MANIFEST_NAME}: {state}")
    return "\n".join(lines)


_LOGICAL_PREFIX = re.compile(r"[^A-Za-z0-9]")


def fleet_resources(cloudformation: Any, stack: str, instance_type: str) -> dict[str, str]:
    """The cluster of a fleet's cell stack, and the fleet's compile task definition, capacity provider and
    service (their logical ids start with the fleet's construct id, `Fleet-<type>` without its punctuation;
    the compile task definition's continues with its own construct id). Empty when the stack does not
    exist."""
    from botocore.exceptions import ClientError

    from cdk_constructs.fleet.task_definition import COMPILE_CONSTRUCT_ID

    prefix = "Fleet" + _LOGICAL_PREFIX.sub("", instance_type)
    found: dict[str, str] = {}
    try:
        pages = list(cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack))
    except ClientError as error:
        if "does not exist" in str(error.response.get("Error", {}).get("Message", "")):
            return found  # not created yet: the bootstrap creates it
        raise
    for page in pages:
        for resource in page["StackResourceSummaries"]:
            kind, logical = resource["ResourceType"], resource["LogicalResourceId"]
            physical = resource.get("PhysicalResourceId", "")
            if kind == "AWS::ECS::Cluster":
                found["cluster"] = physical
            elif kind == "AWS::ECS::TaskDefinition" and logical.startswith(prefix + COMPILE_CONSTRUCT_ID):
                found["TaskDefinition"] = physical
            elif logical.startswith(prefix) and kind in ("AWS::ECS::CapacityProvider", "AWS::ECS::Service"):
                found[kind.rsplit("::", 1)[1]] = physical
    return found


def service_network(ecs: Any, resources: dict[str, str]) -> dict[str, Any]:
    """The fleet's service's own networkConfiguration (DescribeServices), for RunTask.

    Read from the service rather than rebuilt from the stack's subnets and security groups: the service is
    what runs on these hosts today, so whatever subnets (the HOST subnets, cdk_constructs/network.py),
    task security group and assignPublicIp it has, the compile has, without this tool knowing how the stack
    chooses them. The compile task definition uses awsvpc like the serving one, and RunTask refuses an
    awsvpc task without a networkConfiguration (ECS API reference, RunTask: "required for task definitions
    that use the awsvpc network mode"; "Network Configuration must be provided when networkMode 'awsvpc' is
    specified")."""
    described = ecs.describe_services(cluster=resources["cluster"], services=[resources["Service"]])
    services = described.get("services", [])
    network = services[0].get("networkConfiguration") if services else None
    if not network or not network.get("awsvpcConfiguration", {}).get("subnets"):
        found = (
            "has no awsvpc network configuration" if services else f"was not found: {described['failures']}"
        )
        raise RuntimeError(f"the fleet's service {resources['Service']} {found}; `make deploy` first")
    return {"awsvpcConfiguration": network["awsvpcConfiguration"]}


def start_compile(ecs: Any, resources: dict[str, str], artifact: FleetArtifact) -> str:
    """One task of the fleet's compile task definition, on a host of the fleet's type, in the service's
    network; its ARN. The task definition holds the compile command and the compile task role, so RunTask
    overrides nothing (the caller needs iam:PassRole on the task definition's roles)."""
    response = ecs.run_task(
        cluster=resources["cluster"],
        taskDefinition=resources["TaskDefinition"],
        capacityProviderStrategy=[{"capacityProvider": resources["CapacityProvider"], "weight": 1}],
        networkConfiguration=service_network(ecs, resources),
        count=1,
        startedBy=STARTED_BY,
        tags=[{"key": "compiled-artifact-key", "value": artifact.key}],
    )
    failures = response.get("failures", [])
    if failures or not response.get("tasks"):
        raise RuntimeError(f"{artifact.region} {artifact.instance_type}: ECS refused the task: {failures}")
    return response["tasks"][0]["taskArn"]


def main(argv: Sequence[str] | None = None, session_factory: Callable[[], Any] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.compile", description=__doc__.splitlines()[0])
    parser.add_argument("config", help="the config file, e.g. config/prime-day.yaml")
    parser.add_argument("--dry-run", action="store_true", help="list the keys and what exists; start nothing")
    parser.add_argument("--approve", action="store_true", help="create a region's missing stack (APPROVE=1)")
    parser.add_argument("--cdk", default="npx --no-install cdk --no-notices", help="the CDK CLI command")
    parser.add_argument(
        "--assembly", type=Path, default=Path("build") / "compile" / "cdk.out", help="bootstrap assembly"
    )
    args = parser.parse_args(argv)
    from ops.credentials import has_credentials
    from settings.loader import ConfigError, load_settings
    from stacks.routing_names import stack_name

    try:
        settings = load_settings(args.config)
    except ConfigError as error:
        print(f"config error:\n{error}", file=sys.stderr)
        return 1
    artifact_key, engine_settings = _container_modules()
    try:
        artifacts = fleet_artifacts(settings)
    except (artifact_key.ArtifactKeyError, engine_settings.EngineSettingsError) as error:
        print(f"compile: cannot key the artifacts: {error}", file=sys.stderr)
        return 1
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    session = (session_factory or boto3.Session)()
    if args.dry_run:
        from ops.day_zero import checklist

        print(checklist(args.config, "compile"))
    if not has_credentials(session):
        print(describe(artifacts, None))
        if args.dry_run:
            return 0
        print("make compile: no AWS credentials found; set AWS_PROFILE and run it again", file=sys.stderr)
        return 2
    try:
        exists = {a: manifest_exists(session.client("s3", region_name=a.region), a) for a in artifacts}
    except (BotoCoreError, ClientError) as error:
        print(f"compile: cannot read the artifacts in S3: {error}", file=sys.stderr)
        return 2
    print(describe(artifacts, exists))
    todo = [a for a in artifacts if not exists[a]]
    if args.dry_run or not todo:
        if not todo:
            print("every fleet's compiled artifacts are complete")
        return 0
    cdk = shlex.split(args.cdk)
    for artifact in one_per_location(todo):
        stack = stack_name(settings, artifact.region)
        try:
            cloudformation = session.client("cloudformation", region_name=artifact.region)
            resources = fleet_resources(cloudformation, stack, artifact.instance_type)
            if resources and not set(resources) >= NEEDED:
                # The stack exists without this fleet's compile task definition (deployed before it) or
                # without the fleet: a bootstrap's first-create template would set its live fleets to zero.
                # Deploying this config first would not do either: its hosts need the missing artifacts.
                print(
                    f"compile: {stack} has no {', '.join(sorted(NEEDED - set(resources)))} for "
                    f"{artifact.instance_type}; `make deploy` it with the config it runs now (whose "
                    f"artifacts are complete) to add them, then `make compile CONFIG={args.config}`",
                    file=sys.stderr,
                )
                return 1
            if not resources:
                if not args.approve:
                    print(
                        f"compile: {stack} does not exist yet; `make compile APPROVE=1` creates it first "
                        "with its fleets at zero tasks and its load balancer unprotected (a bootstrap: the "
                        "IAM and security groups of a new stack; review them with "
                        f"`make diff CONFIG={args.config}`), then compiles on its cluster; `make deploy` "
                        "completes it",
                        file=sys.stderr,
                    )
                    return 1
                bootstrap(cdk, args.config, args.assembly, stack)
                resources = fleet_resources(cloudformation, stack, artifact.instance_type)
            arn = start_compile(session.client("ecs", region_name=artifact.region), resources, artifact)
        except (BotoCoreError, ClientError, RuntimeError, KeyError, subprocess.CalledProcessError) as error:
            print(f"compile: {artifact.region} {artifact.instance_type}: {error}", file=sys.stderr)
            return 1
        print(f"{artifact.region} {artifact.instance_type}: compiling {artifact.key} in {arn}")
    print(
        "each compile task writes artifact-manifest.json last: `make compile DRY_RUN=1` shows when it is done"
    )
    return 0


NEEDED = {"cluster", "TaskDefinition", "CapacityProvider", "Service"}


def bootstrap(cdk: Sequence[str], config: str, assembly: Path, stack: str) -> None:
    """Create a region's first stack from the first-create assembly: fleets at zero, so the compile has a
    cluster and a capacity provider of each type before any service needs the artifacts."""
    from ops.cdk_cli import deploy_stack, synthesize_first_create

    if not (assembly / "manifest.json").is_file():
        synthesize_first_create(cdk, config, assembly)
    deploy_stack(cdk, assembly, stack, approve=True)


if __name__ == "__main__":
    sys.exit(main())
