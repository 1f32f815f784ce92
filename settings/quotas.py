"""What a config takes from the account's quotas, from config alone: one model that `make validate` judges
against AWS's defaults and the preflight against the account's own values.

Each cell is a stack with its own VPC (docs/peak-events.md, "Cells"): a VPC, an internet gateway for the load
balancer's public subnets, and `nat_gateways` NAT gateways, each holding an Elastic IP, one per zone from the
first zone on (CDK places them in the first public subnets). So a region's cells take `cells` VPCs and
internet gateways, `cells x nat_gateways` Elastic IPs, and `cells` NAT gateways in its first zone."""

from __future__ import annotations

from dataclasses import dataclass

from settings.aws_limits import (
    ELASTIC_IPS,
    INTERNET_GATEWAYS_PER_REGION,
    LAMBDA_CONCURRENCY,
    NAT_GATEWAYS_PER_ZONE,
    UNRESERVED_CONCURRENCY_MIN,
    VPCS_PER_REGION,
    AccountQuota,
)
from settings.schema import Settings

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class QuotaNeed:
    """What the config takes from one quota in one region, and the config key that decides it."""

    quota: AccountQuota
    region: str
    needed: int
    where: KeyPath
    why: str  # how the count comes about, for the message

    def message(self, available: float, source: str) -> str:
        """The advice when `available` (the quota, less what others already use) is short."""
        q = self.quota
        return (
            f"{self.region}: {self.why} need {self.needed} of {q.name} ({q.service} {q.code}), "
            f"{source} {available:,.0f}: request an increase in Service Quotas before deploying"
        )


def network_needs(settings: Settings, region: str) -> list[QuotaNeed]:
    """VPCs, internet gateways, Elastic IPs and NAT gateways per zone the region's cells create."""
    cells = settings.regions[region].cells
    nat = settings.nat_gateways(region)
    nat_key: KeyPath = (
        "regions",
        region,
        "nat_gateways" if settings.regions[region].nat_gateways else "cells",
    )
    stacks = f"{cells} cell stack(s), a VPC each,"
    needs = [
        QuotaNeed(VPCS_PER_REGION, region, cells, ("regions", region, "cells"), stacks),
        QuotaNeed(INTERNET_GATEWAYS_PER_REGION, region, cells, ("regions", region, "cells"), stacks),
    ]
    if nat:
        needs += [
            QuotaNeed(
                ELASTIC_IPS,
                region,
                cells * nat,
                nat_key,
                f"{cells} cell(s) x {nat} NAT gateway(s), an EIP each,",
            ),
            QuotaNeed(
                NAT_GATEWAYS_PER_ZONE,
                region,
                cells,
                nat_key,
                f"{cells} cell(s), each with a NAT gateway in the region's first zone,",
            ),
        ]
    return needs


def orchestrator_needs(settings: Settings) -> list[QuotaNeed]:
    """Reserved concurrency 1 for the orchestrator leaves the account's concurrency minus one unreserved,
    which Lambda allows only while that stays at least 100. Without it the run lock keeps runs apart and the
    function needs no quota of its own."""
    if not settings.routing.reserved_concurrency:
        return []
    return [
        QuotaNeed(
            LAMBDA_CONCURRENCY,
            settings.orchestrator_region,
            UNRESERVED_CONCURRENCY_MIN + 1,
            ("routing", "reserved_concurrency"),
            "the orchestrator's reserved concurrency 1 plus the 100 Lambda keeps unreserved",
        )
    ]


def quota_needs(settings: Settings) -> list[QuotaNeed]:
    needs = [need for region in settings.regions for need in network_needs(settings, region)]
    return needs + orchestrator_needs(settings)


def default_quota_warnings(settings: Settings) -> list[tuple[KeyPath, str]]:
    """(key path, message) for each need above AWS's default: what a new account must raise first. An
    account that raised them already passes the preflight, which reads its own values."""
    return [
        (need.where, need.message(need.quota.default, "AWS's default is"))
        for need in quota_needs(settings)
        if need.needed > need.quota.default
    ]
