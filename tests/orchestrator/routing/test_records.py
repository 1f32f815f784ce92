"""The change batch: only records that differ, none for a region that has not published its endpoint."""

from __future__ import annotations

from orchestrator.routing.records import Record, changes, wanted_record
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
