"""The change batch: only records that differ, none for a region that has not published its endpoint."""

from __future__ import annotations

from botocore.exceptions import ClientError

from orchestrator.routing.records import Record, apply_changes, changes, wanted_record
from orchestrator.routing.signals import Endpoint

EAST = Endpoint("Serving-1.us-east-1.elb.amazonaws.com.", "Z35SXDOTRQ7X7K", "hc-east")


def test_an_unchanged_record_is_left_alone_and_a_changed_weight_is_upserted():
    existing = {"us-east-1": wanted_record("us-east-1", 50, EAST)}
    assert changes("a.example.com", {"us-east-1": 50}, {"us-east-1": EAST}, existing) == []
    (change,) = changes("a.example.com", {"us-east-1": 40}, {"us-east-1": EAST}, existing)
    record = change["ResourceRecordSet"]
    assert change["Action"] == "UPSERT"
    assert (record["SetIdentifier"], record["Weight"], record["HealthCheckId"]) == (
        "us-east-1",
        40,
        "hc-east",
    )
    assert record["AliasTarget"] == {
        "HostedZoneId": "Z35SXDOTRQ7X7K",
        "DNSName": "dualstack.serving-1.us-east-1.elb.amazonaws.com",
        "EvaluateTargetHealth": True,
    }


def test_a_new_health_check_or_alb_updates_the_record():
    old = Record("us-east-1", 50, "dualstack.old.elb.amazonaws.com", "Z35SXDOTRQ7X7K", "hc-old")
    assert len(changes("a.example.com", {"us-east-1": 50}, {"us-east-1": EAST}, {"us-east-1": old})) == 1


def test_no_record_for_a_region_without_an_endpoint():
    assert changes("a.example.com", {"us-west-2": 30}, {"us-west-2": None}, {}) == []


def test_a_region_without_a_readable_endpoint_changes_only_its_weight_keeping_its_health_check():
    existing = {"us-east-1": wanted_record("us-east-1", 50, EAST)}
    (change,) = changes("a.example.com", {"us-east-1": 5}, {"us-east-1": None}, existing)
    record = change["ResourceRecordSet"]
    assert (record["Weight"], record["HealthCheckId"]) == (5, "hc-east")
    assert record["AliasTarget"]["DNSName"] == "dualstack.serving-1.us-east-1.elb.amazonaws.com"


class Route53:
    """Records what it is sent; refuses batches naming `bad` as Route 53 refuses an invalid change."""

    def __init__(self, bad: str) -> None:
        self.bad, self.applied = bad, []

    def change_resource_record_sets(self, HostedZoneId, ChangeBatch):
        regions = [c["ResourceRecordSet"]["SetIdentifier"] for c in ChangeBatch["Changes"]]
        if self.bad in regions:
            error = {"Error": {"Code": "InvalidChangeBatch", "Message": f"{self.bad} is invalid"}}
            raise ClientError(error, "ChangeResourceRecordSets")
        self.applied.extend(regions)


def test_an_invalid_change_is_set_aside_and_the_others_applied():
    west = Endpoint("serving-2.us-west-2.elb.amazonaws.com", "Z1H1FL5HABSF5", "hc-west")
    batch = changes(
        "a.example.com", {"us-east-1": 40, "us-west-2": 60}, {"us-east-1": EAST, "us-west-2": west}, {}
    )
    route53 = Route53("us-west-2")
    rejected = apply_changes(route53, "Z1", batch, "test")
    assert route53.applied == ["us-east-1"] and list(rejected) == ["us-west-2"]
