"""What the preflight reads from AWS: thin calls that return plain data for checks.py."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from botocore.exceptions import ClientError

EC2_SERVICE_CODE = "ec2"
ECS_SERVICE_CODE = "ecs"
NOT_FOUND_CODES = frozenset(
    {"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed"}
)


def quota_values(service_quotas: Any, codes: Iterable[str]) -> dict[str, float]:
    """Applied quota per code; the AWS default where the account never changed it (no applied value)."""
    values = {}
    for code in codes:
        try:
            quota = service_quotas.get_service_quota(ServiceCode=EC2_SERVICE_CODE, QuotaCode=code)
        except ClientError as error:
            if error.response["Error"]["Code"] != "NoSuchResourceException":
                raise
            quota = service_quotas.get_aws_default_service_quota(ServiceCode=EC2_SERVICE_CODE, QuotaCode=code)
        values[code] = float(quota["Quota"]["Value"])
    return values


def zone_offerings(ec2: Any, instance_types: Iterable[str]) -> dict[str, set[str]]:
    """Instance type -> the zones (names, as this account sees them) that offer it."""
    offered: dict[str, set[str]] = {}
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": sorted(set(instance_types))}],
    )
    for page in pages:
        for offering in page["InstanceTypeOfferings"]:
            offered.setdefault(offering["InstanceType"], set()).add(offering["Location"])
    return offered


def capacity_reservations(ec2: Any, reservation_ids: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    """Id -> its description, or None where the account has no such reservation. One call per id: EC2
    fails the whole call when any id is unknown."""
    found: dict[str, dict[str, Any] | None] = {}
    for reservation_id in reservation_ids:
        try:
            response = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
        except ClientError as error:
            if error.response["Error"]["Code"] not in NOT_FOUND_CODES:
                raise
            found[reservation_id] = None
            continue
        reservations = response.get("CapacityReservations", [])
        found[reservation_id] = reservations[0] if reservations else None
    return found


def elb_limits(elbv2: Any) -> dict[str, float]:
    """Elastic Load Balancing's limits for this account and region, by name (DescribeAccountLimits; its
    Max is a string)."""
    limits: dict[str, float] = {}
    for page in elbv2.get_paginator("describe_account_limits").paginate():
        for limit in page.get("Limits", []):
            limits[limit["Name"]] = float(limit["Max"])
    return limits


def quotas_by_name(service_quotas: Any, service_code: str, names: Iterable[str]) -> dict[str, float]:
    """Quota name -> value: the applied value, else AWS's default (ListServiceQuotas leaves out quotas
    without an applied value). By name, as the service's quota table in its developer guide lists them."""
    wanted = set(names)
    found: dict[str, float] = {}
    for operation in ("list_service_quotas", "list_aws_default_service_quotas"):
        missing = wanted - set(found)
        if not missing:
            break
        for page in service_quotas.get_paginator(operation).paginate(ServiceCode=service_code):
            for quota in page.get("Quotas", []):
                if quota.get("QuotaName") in missing:
                    found.setdefault(quota["QuotaName"], float(quota["Value"]))
    return found


def parameter_exists(ssm: Any, name: str) -> bool:
    """Whether this region has the SSM parameter (a public one, such as a Powertools layer's ARN)."""
    try:
        ssm.get_parameter(Name=name)
    except ClientError as error:
        if error.response["Error"]["Code"] != "ParameterNotFound":
            raise
        return False
    return True
