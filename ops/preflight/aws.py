"""What the preflight reads from AWS: thin calls that return plain data for checks.py."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
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


def parameter_value(ssm: Any, name: str) -> str | None:
    """An SSM parameter's value (a public AMI parameter's is the image id), or None where the region has no
    such parameter."""
    try:
        return str(ssm.get_parameter(Name=name)["Parameter"]["Value"])
    except ClientError as error:
        if error.response["Error"]["Code"] != "ParameterNotFound":
            raise
        return None


def applied_quota(service_quotas: Any, service: str, code: str, default: float) -> float:
    """A quota's applied value; AWS's default where the account never changed it (Service Quotas then has no
    applied value: NoSuchResourceException)."""
    try:
        return float(service_quotas.get_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]["Value"])
    except ClientError as error:
        if error.response["Error"]["Code"] != "NoSuchResourceException":
            raise
        return default


def elastic_ip_limit(ec2: Any) -> float | None:
    """The account's Elastic IP limit as EC2 itself reports it (DescribeAccountAttributes
    `vpc-max-elastic-ips`), or None where it reports none."""
    answer = ec2.describe_account_attributes(AttributeNames=["vpc-max-elastic-ips"])
    for attribute in answer.get("AccountAttributes", []):
        if attribute.get("AttributeName") == "vpc-max-elastic-ips":
            values = attribute.get("AttributeValues", [])
            if values:
                return float(values[0]["AttributeValue"])
    return None


def _tagged(resource: dict[str, Any], project: str) -> bool:
    return any(t.get("Key") == "project" and t.get("Value") == project for t in resource.get("Tags", []))


@dataclass(frozen=True)
class NetworkUse:
    """What the region's account already uses, beside what this project's own stacks hold (a redeploy
    replaces none of those): VPCs, internet gateways, Elastic IPs, and NAT gateways in the busiest zone."""

    vpcs: int
    internet_gateways: int
    elastic_ips: int
    nat_gateways_busiest_zone: int


def network_use(ec2: Any, project: str) -> NetworkUse:
    def count(operation: str, key: str, filters: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in ec2.get_paginator(operation).paginate(**({"Filters": filters} if filters else {})):
            found += [item for item in page.get(key, []) if not _tagged(item, project)]
        return found

    vpcs = count("describe_vpcs", "Vpcs")
    gateways = count("describe_internet_gateways", "InternetGateways")
    addresses = ec2.describe_addresses().get("Addresses", [])  # not paginated
    elastic_ips = [a for a in addresses if not _tagged(a, project)]
    nats = count(
        "describe_nat_gateways", "NatGateways", [{"Name": "state", "Values": ["pending", "available"]}]
    )
    zones: dict[str, int] = {}
    subnet_ids = sorted({nat["SubnetId"] for nat in nats if nat.get("SubnetId")})
    if subnet_ids:
        for subnet in ec2.describe_subnets(SubnetIds=subnet_ids)["Subnets"]:
            owners = [nat for nat in nats if nat.get("SubnetId") == subnet["SubnetId"]]
            zones[subnet["AvailabilityZone"]] = zones.get(subnet["AvailabilityZone"], 0) + len(owners)
    return NetworkUse(len(vpcs), len(gateways), len(elastic_ips), max(zones.values(), default=0))


@dataclass(frozen=True)
class LambdaConcurrency:
    limit: int  # the account's concurrent executions in the region
    unreserved: int  # what no function has reserved


def lambda_concurrency(lambda_client: Any) -> LambdaConcurrency:
    limit = lambda_client.get_account_settings()["AccountLimit"]
    return LambdaConcurrency(int(limit["ConcurrentExecutions"]), int(limit["UnreservedConcurrentExecutions"]))


PROJECT_TAG = "project"
CELL_TAG = "cell"  # on a cell's resources in a region of several cells (stacks/regional_serving.py)
DESCRIBE_INSTANCES_BATCH = 100
# Hosts on their way out (terminating or gone) no longer matter to which AMI the fleet runs.
LEAVING_STATES = ("Terminating", "Terminated", "Detaching", "Detached")


@dataclass(frozen=True)
class FleetGroup:
    """A fleet's Auto Scaling group: the AMI its launch template version boots and the AMI each of its hosts
    booted (EC2 DescribeInstances: the group's own answer has no image ids)."""

    name: str
    instance_type: str
    template_image: str | None  # the image of the launch template version the group launches
    hosts: dict[str, str]  # instance id -> the AMI it booted


def fleet_groups(autoscaling: Any, ec2: Any, project: str, cell: str | None = None) -> list[FleetGroup]:
    """The project's host groups in the clients' region (with `cell`, that cell's only), found by the tags
    the stacks put on them."""
    pages = autoscaling.get_paginator("describe_auto_scaling_groups").paginate(
        Filters=[{"Name": f"tag:{PROJECT_TAG}", "Values": [project]}]
        + ([{"Name": f"tag:{CELL_TAG}", "Values": [cell]}] if cell else [])
    )
    groups = []
    for page in pages:
        for group in page["AutoScalingGroups"]:
            members = [i for i in group.get("Instances", []) if i.get("LifecycleState") not in LEAVING_STATES]
            images = _instance_images(ec2, [i["InstanceId"] for i in members])
            template_image, template_type = _template_image(ec2, group.get("LaunchTemplate"))
            launched = {i.get("InstanceType") for i in members} - {None}
            instance_type = template_type or (launched.pop() if len(launched) == 1 else "")
            hosts = {i["InstanceId"]: images[i["InstanceId"]] for i in members if i["InstanceId"] in images}
            groups.append(FleetGroup(group["AutoScalingGroupName"], instance_type, template_image, hosts))
    return groups


def _instance_images(ec2: Any, ids: list[str]) -> dict[str, str]:
    images: dict[str, str] = {}
    for start in range(0, len(ids), DESCRIBE_INSTANCES_BATCH):
        chunk = ids[start : start + DESCRIBE_INSTANCES_BATCH]
        for page in ec2.get_paginator("describe_instances").paginate(InstanceIds=chunk):
            for reservation in page["Reservations"]:
                for instance in reservation["Instances"]:
                    images[instance["InstanceId"]] = instance["ImageId"]
    return images


def _template_image(ec2: Any, template: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """(image id, instance type) of the launch template version a group launches ($Latest and $Default
    resolved by EC2)."""
    if not template or "LaunchTemplateId" not in template:
        return None, None
    versions = ec2.describe_launch_template_versions(
        LaunchTemplateId=template["LaunchTemplateId"], Versions=[str(template.get("Version", "$Default"))]
    )["LaunchTemplateVersions"]
    if not versions:
        return None, None
    data = versions[0].get("LaunchTemplateData", {})
    return data.get("ImageId"), data.get("InstanceType")


def template_targets(ssm: Any, wanted: dict[str, str], known: dict[str, str | None]) -> dict[str, str | None]:
    """Instance type -> the AMI id its launch template will boot: an id as is, an SSM parameter as the
    region resolves it now (None where it has no such parameter). `known`: parameter values already read,
    and filled with the ones read here."""
    targets: dict[str, str | None] = {}
    for instance_type, image in wanted.items():
        if image.startswith("ami-"):
            targets[instance_type] = image
            continue
        if image not in known:
            known[image] = parameter_value(ssm, image)
        targets[instance_type] = known[image]
    return targets
