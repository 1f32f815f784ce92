"""The weighted alias records, one per region under the one client-facing name. The orchestrator owns
them: it creates each with the configured initial weight once the region has published its endpoint,
and only changes weights after that. No CloudFormation template holds them, so no deploy can reset them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from .signals import Endpoint

RECORD_TYPE = "A"


@dataclass(frozen=True)
class Record:
    region: str
    weight: int
    dns_name: str
    hosted_zone_id: str
    health_check_id: str | None


def _dns(name: str) -> str:
    return name.lower().rstrip(".")


def alias_dns_name(alb_dns_name: str) -> str:
    # Route 53 answers for an ALB alias with both address families when the name is the dualstack one.
    name = _dns(alb_dns_name)
    return name if name.startswith("dualstack.") else f"dualstack.{name}"


def read_records(route53: Any, zone_id: str, domain_name: str) -> dict[str, Record]:
    """Region (set identifier) -> its weighted record under the domain name."""
    found: dict[str, Record] = {}
    paginator = route53.get_paginator("list_resource_record_sets")
    pages = paginator.paginate(HostedZoneId=zone_id, StartRecordName=domain_name, StartRecordType=RECORD_TYPE)
    for page in pages:
        for record in page["ResourceRecordSets"]:
            if _dns(record["Name"]) != _dns(domain_name) or record["Type"] != RECORD_TYPE:
                return found
            if "SetIdentifier" in record and "Weight" in record and "AliasTarget" in record:
                found[record["SetIdentifier"]] = Record(
                    region=record["SetIdentifier"],
                    weight=int(record["Weight"]),
                    dns_name=_dns(record["AliasTarget"]["DNSName"]),
                    hosted_zone_id=record["AliasTarget"]["HostedZoneId"],
                    health_check_id=record.get("HealthCheckId"),
                )
    return found


def wanted_record(region: str, weight: int, endpoint: Endpoint) -> Record:
    return Record(
        region=region,
        weight=weight,
        dns_name=alias_dns_name(endpoint.alb_dns_name),
        hosted_zone_id=endpoint.alb_canonical_hosted_zone_id,
        health_check_id=endpoint.health_check_id,
    )


def changes(
    domain_name: str,
    weights: dict[str, int],
    endpoints: dict[str, Endpoint | None],
    existing: dict[str, Record],
) -> list[dict[str, Any]]:
    """UPSERTs for the records that differ from what should be (weight, target or health check). A region
    whose endpoint or health check is not published (or not readable this run) gets no new record; if it
    has one, only its weight changes, keeping the target and health check it has."""
    result = []
    for region, weight in sorted(weights.items()):
        endpoint = endpoints.get(region)
        if endpoint is not None:
            wanted = wanted_record(region, weight, endpoint)
        elif region in existing:
            wanted = replace(existing[region], weight=weight)
        else:
            continue
        if existing.get(region) == wanted:
            continue
        record: dict[str, Any] = {
            "Name": domain_name,
            "Type": RECORD_TYPE,
            "SetIdentifier": region,
            "Weight": weight,
            "AliasTarget": {
                "HostedZoneId": wanted.hosted_zone_id,
                "DNSName": wanted.dns_name,
                # No healthy target behind the ALB takes the record out as well.
                "EvaluateTargetHealth": True,
            },
        }
        if wanted.health_check_id:
            record["HealthCheckId"] = wanted.health_check_id
        result.append({"Action": "UPSERT", "ResourceRecordSet": record})
    return result


def _region_of(change: dict[str, Any]) -> str:
    return str(change["ResourceRecordSet"]["SetIdentifier"])


def _invalid(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") == "InvalidChangeBatch"


def _send(route53: Any, zone_id: str, changes: list[dict[str, Any]], comment: str) -> None:
    route53.change_resource_record_sets(
        HostedZoneId=zone_id, ChangeBatch={"Comment": comment[:256], "Changes": changes}
    )


def apply_changes(route53: Any, zone_id: str, batch: list[dict[str, Any]], comment: str) -> dict[str, str]:
    """One change batch; Route 53 applies all of it or none. When it rejects the batch as invalid (one bad
    record, e.g. an alias target it does not accept), each change is sent on its own, so one region's
    problem does not freeze the others. Returns region -> why its change was rejected."""
    if not batch:
        return {}
    try:
        _send(route53, zone_id, batch, comment)
        return {}
    except ClientError as error:
        if not _invalid(error):
            raise
        if len(batch) == 1:
            return {_region_of(batch[0]): str(error)}
    rejected: dict[str, str] = {}
    for change in batch:
        try:
            _send(route53, zone_id, [change], comment)
        except ClientError as error:
            if not _invalid(error):
                raise
            rejected[_region_of(change)] = str(error)
    return rejected
