"""The preflight's AWS reads that had no test against moto (tests/aws_calls_on_moto.py): the network in use
by zone, the applied and default quotas Service Quotas keeps for `vpc`, a parameter's presence."""

from __future__ import annotations

from typing import Any

import boto3
from moto import mock_aws

from ops.preflight.aws import applied_quota, network_use, parameter_exists, quotas_by_name

REGION = "us-east-1"
PROJECT = "kit"


def _nat(ec2: Any, vpc: str, cidr: str, zone: str, tags: list[dict[str, str]] | None = None) -> None:
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone)["Subnet"]["SubnetId"]
    address = ec2.allocate_address(Domain="vpc")["AllocationId"]
    extra = {"TagSpecifications": [{"ResourceType": "natgateway", "Tags": tags}]} if tags else {}
    ec2.create_nat_gateway(SubnetId=subnet, AllocationId=address, **extra)


def test_nat_gateways_are_counted_in_the_zone_of_their_subnet_leaving_the_projects_own_out(credentials):
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        before = network_use(ec2, PROJECT)
        theirs = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
        _nat(ec2, theirs, "10.9.0.0/24", "us-east-1a")
        _nat(ec2, theirs, "10.9.1.0/24", "us-east-1a")
        _nat(ec2, theirs, "10.9.2.0/24", "us-east-1b")
        ours = ec2.create_vpc(
            CidrBlock="10.8.0.0/16",
            TagSpecifications=[{"ResourceType": "vpc", "Tags": [{"Key": "project", "Value": PROJECT}]}],
        )["Vpc"]["VpcId"]
        _nat(ec2, ours, "10.8.0.0/24", "us-east-1a", [{"Key": "project", "Value": PROJECT}])
        after = network_use(ec2, PROJECT)
    # DescribeSubnets places each NAT gateway in its zone: us-east-1a holds two of theirs (ours not counted).
    assert before.nat_gateways_busiest_zone == 0
    assert after.nat_gateways_busiest_zone == 2
    assert after.vpcs == before.vpcs + 1  # theirs; the project's is its own to replace
    assert after.elastic_ips == before.elastic_ips + 4  # the four allocated here carry no project tag


def test_a_quota_never_raised_reads_as_the_default_given(credentials):
    """moto keeps no applied value (GetServiceQuota: NoSuchResourceException), as an account that never
    asked for more: the caller's default stands."""
    with mock_aws():
        client = boto3.client("service-quotas", region_name=REGION)
        assert applied_quota(client, "vpc", "L-F678F1CE", 5.0) == 5.0


class _NoListServiceQuotas:
    """A WORKAROUND for moto, not a stand-in for AWS: moto 5.2.5 does not implement ListServiceQuotas
    (tests/aws_calls_on_moto.py checks it still does not). Its answer here is an empty page, AWS's answer
    for an account that raised no quota of the service, so the defaults are read from moto."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def get_paginator(self, operation: str) -> Any:
        if operation == "list_service_quotas":

            class Empty:
                def paginate(self, **_: Any) -> list[dict[str, Any]]:
                    return [{"Quotas": []}]

            return Empty()
        return self._inner.get_paginator(operation)


def test_quotas_by_name_read_the_defaults_where_none_is_applied(credentials):
    with mock_aws():
        client = _NoListServiceQuotas(boto3.client("service-quotas", region_name=REGION))
        found = quotas_by_name(
            client, "vpc", ["VPCs per Region", "Internet gateways per Region", "None such"]
        )
    assert found == {"VPCs per Region": 5.0, "Internet gateways per Region": 5.0}


def test_parameter_exists_against_moto(credentials):
    with mock_aws():
        ssm = boto3.client("ssm", region_name=REGION)
        ssm.put_parameter(Name="/kit/us-east-1/serving-endpoint", Value="{}", Type="String")
        assert parameter_exists(ssm, "/kit/us-east-1/serving-endpoint")
        assert not parameter_exists(ssm, "/kit/us-east-1/missing")
