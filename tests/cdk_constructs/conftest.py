"""Each construct is built in a bare Stack bound to one account and region (zones seeded, no lookups)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("CDK_VALIDATION", "false")  # cfn-lint checks the real templates in tests/stacks
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App, Environment, Stack
from aws_cdk import aws_ec2 as ec2

from cdk_constructs.network import HOST_SUBNET_GROUP

ACCOUNT = "111111111111"
REGION = "us-east-1"
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]


def new_stack() -> Stack:
    """A bare stack in an app of its own: what a second synthesis of the same code would build."""
    app = App(context={f"availability-zones:account={ACCOUNT}:region={REGION}": ZONES})
    return Stack(app, "Test", env=Environment(account=ACCOUNT, region=REGION))


@pytest.fixture
def stack() -> Stack:
    return new_stack()


def host_vpc(stack: Stack) -> ec2.Vpc:
    """Two zones with the kit's subnet groups (the fleet places hosts by group name)."""
    return ec2.Vpc(
        stack,
        "Vpc",
        max_azs=2,
        nat_gateways=1,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC),
            ec2.SubnetConfiguration(name=HOST_SUBNET_GROUP, subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
        ],
    )


@pytest.fixture
def vpc(stack: Stack) -> ec2.Vpc:
    return host_vpc(stack)
