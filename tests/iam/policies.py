"""The IAM policies a synthesized template ships, resolved to plain JSON, and a moto role that holds one.

moto enforces IAM once `INITIAL_NO_AUTH_ACTION_COUNT` requests have been made (moto docs, "IAM-like Access
Control"): calls signed with an assumed role's credentials are then checked against that role's policies.
moto checks S3 requests against their bucket and object ARNs, but other services' requests against resource
"*" only (moto/core/authorization.py), so resource-scoped statements of other services cannot be proven
this way: the S3 role is."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

import boto3
from moto import settings
from moto.core.authorization import ActionAuthenticatorMixin

ACCOUNT = "123456789012"  # moto's


def resolve(value: Any, pseudo: Mapping[str, str]) -> Any:
    """CloudFormation's Ref to pseudo parameters (and to the resources `pseudo` names) and Fn::Join, the
    intrinsics CDK writes into policies."""
    if isinstance(value, dict):
        if set(value) == {"Ref"} and value["Ref"] in pseudo:
            return pseudo[value["Ref"]]
        if set(value) == {"Fn::Join"}:
            separator, parts = value["Fn::Join"]
            return separator.join(str(resolve(part, pseudo)) for part in parts)
        return {key: resolve(item, pseudo) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, pseudo) for item in value]
    return value


def role_policy(template: dict[str, Any], role_fragment: str, region: str) -> dict[str, Any]:
    """The policy document attached to the template's role whose logical id holds `role_fragment`."""
    pseudo = {
        "AWS::Partition": "aws",
        "AWS::Region": region,
        "AWS::AccountId": ACCOUNT,
        "AWS::URLSuffix": "amazonaws.com",
    }
    # A target group's Ref is its ARN (the serving task may deregister targets of its two groups).
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::ElasticLoadBalancingV2::TargetGroup":
            pseudo[logical_id] = (
                f"arn:aws:elasticloadbalancing:{region}:{ACCOUNT}:targetgroup/{logical_id[:32]}/0123456789abcdef"
            )
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        roles = [role.get("Ref", "") for role in resource["Properties"].get("Roles", [])]
        if any(role_fragment in role for role in roles):
            return resolve(resource["Properties"]["PolicyDocument"], pseudo)
    raise LookupError(f"no policy of a role like {role_fragment!r} in the template")


def assumed_session(policy: Mapping[str, Any], region: str, name: str = "shipped") -> boto3.Session:
    """A role holding exactly `policy`, assumed: the session whose calls moto then authorizes."""
    iam = boto3.client("iam", region_name=region)
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
    }
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    iam.put_role_policy(RoleName=name, PolicyName=name, PolicyDocument=json.dumps(policy))
    credentials = boto3.client("sts", region_name=region).assume_role(
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{name}", RoleSessionName="test-session"
    )["Credentials"]
    return boto3.Session(
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
        region_name=region,
    )


@contextlib.contextmanager
def enforced() -> Iterator[None]:
    """Every request from here on is authorized against the caller's policies."""
    before = settings.INITIAL_NO_AUTH_ACTION_COUNT
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    try:
        yield
    finally:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = before


class Unenforced:
    """A WORKAROUND for moto, not a stand-in for AWS: under IAM enforcement moto 5.2.5 answers every Route 53
    request with SignatureDoesNotMatch, even for a role allowed everything (measured). Calls through this
    wrapper run with enforcement suspended; the statements they need are asserted on the template instead."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute) or name in ("get_paginator",):
            return _UnenforcedPaginator(attribute) if name == "get_paginator" else attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with suspended():
                return attribute(*args, **kwargs)

        return call


class _UnenforcedPaginator:
    def __init__(self, get_paginator: Any) -> None:
        self._get = get_paginator

    def __call__(self, name: str) -> Any:
        paginator = self._get(name)

        class Paginator:
            def paginate(self, **kwargs: Any) -> list[Any]:
                with suspended():
                    return list(paginator.paginate(**kwargs))

        return Paginator()


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    before = settings.INITIAL_NO_AUTH_ACTION_COUNT
    settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")
    try:
        yield
    finally:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = before
