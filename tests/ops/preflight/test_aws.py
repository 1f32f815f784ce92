"""The preflight's AWS reads. Zone offerings run against moto; moto 5.2.5 has no Service Quotas `ec2`
service (NoSuchResourceException) and does not implement DescribeCapacityReservations, so those two go
through botocore's Stubber with responses shaped like AWS's."""

from __future__ import annotations

import boto3
from botocore.stub import Stubber
from moto import mock_aws

from ops.preflight.aws import capacity_reservations, quota_values, zone_offerings
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
