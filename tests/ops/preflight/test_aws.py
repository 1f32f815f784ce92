"""The preflight's AWS reads. Zone offerings run against moto; moto 5.2.5 has no Service Quotas `ec2`
service (NoSuchResourceException) and default quotas for `vpc` only, does not implement
DescribeCapacityReservations, answers DescribeAccountLimits with figures of its own and has none of AWS's
public SSM parameters, so those go through botocore's Stubber with responses shaped like AWS's (named in
each test)."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws

from ops.preflight.aws import (
    capacity_reservations,
    elb_limits,
    parameter_exists,
    quota_values,
    quotas_by_name,
    zone_offerings,
)
from tests.ops.preflight.conftest import BLOCK_ID, block


def test_zone_offerings_by_availability_zone(credentials):
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        offered = zone_offerings(ec2, ["trn1.32xlarge", "inf2.48xlarge"])
    assert offered["trn1.32xlarge"] == {"us-east-1b", "us-east-1c", "us-east-1f"}
    assert "us-east-1a" in offered["inf2.48xlarge"]


def test_quota_values_fall_back_to_the_aws_default_where_none_is_applied(credentials):
    client = boto3.client("service-quotas", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response(
            "get_service_quota",
            {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-1945791B", "Value": 1536.0}},
            {"ServiceCode": "ec2", "QuotaCode": "L-1945791B"},
        )
        stub.add_client_error(
            "get_service_quota",
            "NoSuchResourceException",
            expected_params={"ServiceCode": "ec2", "QuotaCode": "L-2C3B7624"},
        )
        stub.add_response(
            "get_aws_default_service_quota",
            {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-2C3B7624", "Value": 256.0}},
            {"ServiceCode": "ec2", "QuotaCode": "L-2C3B7624"},
        )
        assert quota_values(client, ["L-1945791B", "L-2C3B7624"]) == {
            "L-1945791B": 1536.0,
            "L-2C3B7624": 256.0,
        }
        stub.assert_no_pending_responses()


def test_capacity_reservations_one_call_per_id_and_none_for_an_unknown_id(credentials):
    client = boto3.client("ec2", region_name="us-east-1")
    unknown = "cr-0fffffffffffffff0"
    with Stubber(client) as stub:
        stub.add_response(
            "describe_capacity_reservations",
            {"CapacityReservations": [block()]},
            {"CapacityReservationIds": [BLOCK_ID]},
        )
        stub.add_client_error(
            "describe_capacity_reservations",
            "InvalidCapacityReservationId.NotFound",
            expected_params={"CapacityReservationIds": [unknown]},
        )
        found = capacity_reservations(client, [BLOCK_ID, unknown])
        stub.assert_no_pending_responses()
    assert found[unknown] is None
    assert found[BLOCK_ID]["State"] == "scheduled"


def test_elb_limits_read_every_page_of_describe_account_limits(credentials):
    """Botocore's Stubber with AWS's response shape (Max is a string; the call pages with NextMarker)."""
    client = boto3.client("elbv2", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response(
            "describe_account_limits",
            {
                "Limits": [
                    {"Name": "target-groups", "Max": "3000"},
                    {"Name": "targets-per-application-load-balancer", "Max": "1000"},
                ],
                "NextMarker": "page-2",
            },
            {},
        )
        stub.add_response(
            "describe_account_limits",
            {"Limits": [{"Name": "targets-per-target-group", "Max": "1500"}]},
            {"Marker": "page-2"},
        )
        limits = elb_limits(client)
        stub.assert_no_pending_responses()
    assert limits["targets-per-application-load-balancer"] == 1000.0
    assert limits["targets-per-target-group"] == 1500.0


def test_elb_limits_against_moto(credentials):
    """moto 5.2.5 answers DescribeAccountLimits with figures of its own (30 targets per ALB), not AWS's."""
    with mock_aws():
        limits = elb_limits(boto3.client("elbv2", region_name="us-east-1"))
    assert limits["targets-per-application-load-balancer"] == 30.0


def test_ecs_quotas_by_name_fall_back_to_the_aws_default_where_none_is_applied(credentials):
    """Stubber: ListServiceQuotas returns applied values only; the ECS quota comes from the defaults."""
    client = boto3.client("service-quotas", region_name="us-east-1")
    quota = {"ServiceCode": "ecs", "QuotaCode": "L-0000EXAMPLE"}
    with Stubber(client) as stub:
        stub.add_response(
            "list_service_quotas",
            {"Quotas": [{**quota, "QuotaName": "Clusters per account", "Value": 10000.0}]},
            {"ServiceCode": "ecs"},
        )
        stub.add_response(
            "list_aws_default_service_quotas",
            {"Quotas": [{**quota, "QuotaName": "Container instances per cluster", "Value": 5000.0}]},
            {"ServiceCode": "ecs"},
        )
        found = quotas_by_name(client, "ecs", ["Container instances per cluster"])
        stub.assert_no_pending_responses()
    assert found == {"Container instances per cluster": 5000.0}


def test_parameter_exists_tells_a_missing_parameter_from_a_refused_call(credentials):
    """Stubber: AWS's public Powertools parameters are not in moto."""
    client = boto3.client("ssm", region_name="us-east-1")
    name = "/aws/service/powertools/python/x86_64/python3.14/3.37.0"
    with Stubber(client) as stub:
        stub.add_response(
            "get_parameter",
            {"Parameter": {"Name": name, "Type": "String", "Value": "arn:aws:lambda:us-east-1:1:layer:x:1"}},
            {"Name": name},
        )
        stub.add_client_error("get_parameter", "ParameterNotFound", expected_params={"Name": name})
        stub.add_client_error("get_parameter", "AccessDeniedException", expected_params={"Name": name})
        assert parameter_exists(client, name) is True
        assert parameter_exists(client, name) is False
        with pytest.raises(ClientError):
            parameter_exists(client, name)
