"""`python -m ops.preflight CONFIG [--assembly cdk.out]`: print a table per region of what the config needs
from the account beside what the account has, and whether the synthesized assembly's scheduled actions
still start in the future; exit 1 naming every shortfall, 2 when AWS cannot be asked."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ops.compile import FleetArtifact, fleet_artifacts, manifest_exists
from ops.preflight.assembly import AssemblyError, launch_template_images, read_template, scheduled_starts
from ops.preflight.aws import (
    ECS_SERVICE_CODE,
    applied_quota,
    capacity_reservations,
    elastic_ip_limit,
    elb_limits,
    fleet_groups,
    lambda_concurrency,
    network_use,
    parameter_exists,
    parameter_value,
    quota_values,
    quotas_by_name,
    template_targets,
    zone_offerings,
)
from ops.preflight.checks import (
    ECS_CONTAINER_INSTANCES,
    ELB_SERVICE_CODE,
    ELB_TARGETS_PER_TARGET_GROUP,
    Finding,
    Status,
    account_quota_findings,
    ami_drifts,
    ami_finding,
    ami_freeze,
    ami_roll_findings,
    artifact_finding,
    concurrency_finding,
    layer_finding,
    quota_findings,
    reservation_findings,
    reservation_ids,
    scale_findings,
    schedule_findings,
    zone_findings,
)
from settings.aws_limits import (
    ELASTIC_IPS,
    INTERNET_GATEWAYS_PER_REGION,
    NAT_GATEWAYS_PER_ZONE,
    VPCS_PER_REGION,
)
from settings.loader import ConfigError, load_settings
from settings.schema import Settings
from stacks.routing_names import neuron_ami_parameter, powertools_layer_parameter, stack_name

STYLES = {Status.OK: "green", Status.WARNING: "yellow", Status.SHORTFALL: "bold red"}


def region_findings(
    settings: Settings,
    region: str,
    session: Any,
    assembly: Path,
    now: datetime,
    artifacts: Sequence[FleetArtifact] = (),
    roll_ami_in_freeze: bool = False,
) -> list[Finding]:
    ec2 = session.client("ec2", region_name=region)
    service_quotas = session.client("service-quotas", region_name=region)
    fleets = settings.regions[region].fleets
    codes = sorted({fleet.instance.on_demand_vcpu_quota for fleet in fleets})
    findings = quota_findings(settings, region, quota_values(service_quotas, codes))
    limits = elb_limits(session.client("elbv2", region_name=region))
    limits |= quotas_by_name(service_quotas, ECS_SERVICE_CODE, [ECS_CONTAINER_INSTANCES])
    limits |= quotas_by_name(service_quotas, ELB_SERVICE_CODE, [ELB_TARGETS_PER_TARGET_GROUP])
    findings += scale_findings(settings, region, limits)
    findings += zone_findings(settings, region, zone_offerings(ec2, [f.instance_type for f in fleets]))
    named = reservation_ids(settings, region)
    reservations = capacity_reservations(ec2, named) if named else {}
    findings += reservation_findings(settings, region, reservations)
    findings += account_quota_findings(
        settings, region, account_quotas(service_quotas, ec2), network_use(ec2, settings.project)
    )
    ssm = session.client("ssm", region_name=region)
    ami = neuron_ami_parameter(settings.container.neuron_ami_release)
    known = {ami: parameter_value(ssm, ami)}
    findings.append(ami_finding(region, ami, known[ami] is not None))
    if region == settings.orchestrator_region:
        parameter = powertools_layer_parameter()
        findings.append(layer_finding(region, parameter, parameter_exists(ssm, parameter)))
        concurrency = lambda_concurrency(session.client("lambda", region_name=region))
        findings.append(concurrency_finding(settings, concurrency))
    s3 = session.client("s3", region_name=region)
    for artifact in artifacts:
        if artifact.region == region:
            exists = manifest_exists(s3, artifact)
            findings.append(
                artifact_finding(region, artifact.instance_type, artifact.key, artifact.uri, exists)
            )
    # Every cell's stack, not only the first: each carries its own scheduled actions.
    for cell in settings.cells(region):
        stack = stack_name(settings, region, cell.index)
        template = read_template(assembly, stack)
        starts = scheduled_starts(template) if template is not None else None
        findings += schedule_findings(region, stack, starts, now)
        wanted = launch_template_images(template) if template is not None else {}
        if wanted:
            autoscaling = session.client("autoscaling", region_name=region)
            groups = fleet_groups(autoscaling, ec2, settings.project, None if cell.count == 1 else cell.name)
            drifts = ami_drifts(groups, template_targets(ssm, wanted, known)) if groups else []
            freeze = ami_freeze(settings, region, now)
            findings += ami_roll_findings(region, stack, drifts, freeze, roll_ami_in_freeze)
    return findings


def account_quotas(service_quotas: Any, ec2: Any) -> dict[str, float]:
    """The network quotas each cell's VPC takes, as this account has them: Elastic IPs as EC2 reports them,
    the rest from Service Quotas (AWS's default where never raised)."""
    values = {
        quota.code: applied_quota(service_quotas, quota.service, quota.code, float(quota.default))
        for quota in (VPCS_PER_REGION, NAT_GATEWAYS_PER_ZONE, INTERNET_GATEWAYS_PER_REGION)
    }
    eips = elastic_ip_limit(ec2)
    values[ELASTIC_IPS.code] = float(ELASTIC_IPS.default) if eips is None else eips
    return values


def table(region: str, findings: list[Finding]) -> Table:
    rendered = Table(title=f"{region}", title_justify="left")
    for column in ("check", "for", "needed", "available", "result"):
        rendered.add_column(column)
    for finding in findings:
        rendered.add_row(
            finding.check,
            finding.scope,
            finding.needed,
            finding.available,
            f"[{STYLES[finding.status]}]{finding.status.value}[/]",
        )
    return rendered


def main(argv: Sequence[str] | None = None, session_factory: Callable[[], Any] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.preflight", description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="the config file to check, e.g. config/prime-day.yaml")
    parser.add_argument(
        "--assembly",
        default="cdk.out",
        type=Path,
        help="the synthesized cloud assembly about to be deployed (default cdk.out): its scheduled actions "
        "must all start in the future",
    )
    parser.add_argument(
        "--roll-ami-in-freeze",
        action="store_true",
        help="an AMI change inside the freeze before an event (deploy.freeze_hours_before_event) is a "
        "warning, not a shortfall: the deploy rolls it deliberately",
    )
    args = parser.parse_args(argv)
    console = Console()
    errors = Console(stderr=True, soft_wrap=True)
    try:
        settings = load_settings(args.config)
    except ConfigError as error:
        errors.print(f"config error:\n{error}", markup=False, highlight=False)
        return 1

    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    session = (session_factory or boto3.Session)()
    problems: list[Finding] = []
    now = datetime.now(UTC)
    try:
        artifacts = fleet_artifacts(settings)
    except ValueError as error:  # the key's or the engine settings' error, naming the setting
        errors.print(f"preflight: cannot key the compiled artifacts: {error}", markup=False, highlight=False)
        return 1
    for region in settings.regions:
        try:
            findings = region_findings(
                settings, region, session, args.assembly, now, artifacts, args.roll_ami_in_freeze
            )
        except NoCredentialsError:
            errors.print(
                "preflight: no AWS credentials found; it reads quotas, zone offerings and reservations from "
                "your account: set AWS_PROFILE (or run `aws configure` / `aws sso login`) and run it again",
                markup=False,
            )
            return 2
        except ClientError as error:
            detail = error.response.get("Error", {})
            errors.print(
                f"preflight: AWS refused {error.operation_name} in {region}: "
                f"{detail.get('Code')}: {detail.get('Message')}",
                markup=False,
            )
            return 2
        except AssemblyError as error:
            errors.print(f"preflight: {error}", markup=False, highlight=False)
            return 2
        except BotoCoreError as error:
            errors.print(f"preflight: cannot reach AWS in {region}: {error}", markup=False)
            return 2
        console.print(table(region, findings))
        problems.extend(f for f in findings if f.status is not Status.OK)
    for finding in problems:
        if finding.status is Status.WARNING:
            errors.print(f"warning: {finding.advice}", markup=False, highlight=False)
    shortfalls = [f for f in problems if f.status is Status.SHORTFALL]
    if shortfalls:
        errors.print(f"{len(shortfalls)} shortfall(s):", markup=False)
        for finding in shortfalls:
            errors.print(f"  {finding.advice}", markup=False, highlight=False)
        return 1
    console.print(f"preflight: {args.config} fits the account in {', '.join(settings.regions)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
