"""The traffic orchestrator's handler under its role's policy from the synthesized global template, with moto
enforcing it. moto authorizes requests of services other than S3 against resource "*" only (see
policies.py), so each statement's resources are widened to "*" here and this test proves the ACTIONS: every
call the handler makes (the config parameter, the run lock, Route 53, CloudWatch, the state parameter) is
granted, and a statement taken away fails the run. The resources each statement names are asserted by
tests/cdk_constructs/test_traffic_orchestrator.py and tests/stacks/test_global_routing.py."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import boto3
import pytest
from aws_cdk import App
from botocore.exceptions import ClientError
from moto import mock_aws

from orchestrator.routing import handler as lambda_handler
from orchestrator.routing.config_source import DIGEST_VARIABLE, PARAMETER_VARIABLE, digest, encode
from settings import load_settings
from stacks.global_routing import GlobalRouting
from stacks.routing_names import orchestrator_config
from stacks.serving_app import app_context
from tests.iam.policies import Unenforced, assumed_session, enforced, role_policy

os.environ.setdefault("CDK_VALIDATION", "false")
SETTINGS = load_settings("config/default.yaml")
REGION = SETTINGS.orchestrator_region
TABLE = "orchestrator-run-lock"


class Context:
    function_name = "orchestrator"
    memory_limit_in_mb = 256
    invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:orchestrator"
    aws_request_id = "request-1"


@pytest.fixture(scope="module")
def shipped_policy() -> dict:
    app = App(context=app_context(SETTINGS))
    stack = GlobalRouting(app, "global", settings=SETTINGS)
    template = app.synth().get_stack_by_name(stack.stack_name).template
    return role_policy(template, "TrafficOrchestratorRole", REGION)


def _actions(statement: dict) -> list[str]:
    return statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]


def widened(policy: dict, drop: str | None = None) -> dict:
    """The policy with every resource `*` (moto checks non-S3 resources against `*` only). moto 5.2.5 also
    names CloudWatch's actions by its endpoint prefix, `monitoring:`, not IAM's `cloudwatch:`: each shipped
    `cloudwatch:X` is granted under both names, so the CloudWatch reads are checked too, not denied
    whatever the policy says (a moto quirk, not AWS's behaviour)."""
    statements = []
    for statement in policy["Statement"]:
        actions = _actions(statement)
        if drop is not None and drop in actions:
            continue
        aliases = [f"monitoring:{a.split(':', 1)[1]}" for a in actions if a.startswith("cloudwatch:")]
        statements.append({**statement, "Action": actions + aliases, "Resource": "*"})
    return {**policy, "Statement": statements}


@pytest.fixture
def deployed(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        route53 = boto3.client("route53")
        route53.create_hosted_zone(Name=SETTINGS.tls.hosted_zone_name, CallerReference="z")
        zone = route53.list_hosted_zones()["HostedZones"][0]["Id"].split("/")[-1]
        # The config the stack writes, for the zone moto made.
        in_zone = SETTINGS.model_copy(
            update={"tls": SETTINGS.tls.model_copy(update={"hosted_zone_id": zone})}
        )
        config_json = orchestrator_config(in_zone).to_json()
        name = f"/{SETTINGS.project}/routing/config-test"
        boto3.client("ssm").put_parameter(Name=name, Value=encode(config_json), Type="String")
        boto3.client("dynamodb").create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "lock", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "lock", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield {
            PARAMETER_VARIABLE: name,
            DIGEST_VARIABLE: digest(config_json),
            "ORCHESTRATOR_LOCK_TABLE": TABLE,
        }


def run_as(session: boto3.Session, environment: dict, monkeypatch) -> dict:
    credentials = session.get_credentials()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", credentials.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", credentials.secret_key)
    monkeypatch.setenv("AWS_SESSION_TOKEN", credentials.token)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "kit/Routing")
    monkeypatch.delenv("ORCHESTRATOR_CONFIG", raising=False)
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    lambda_handler._boto3_client.cache_clear()
    lambda_handler._config.clear()
    boto3.setup_default_session()
    made = lambda_handler._boto3_client

    def client(service: str, region: str):
        # Route 53 through the moto WORKAROUND (policies.Unenforced); every other service enforced.
        return Unenforced(made(service, region)) if service == "route53" else made(service, region)

    monkeypatch.setattr(lambda_handler, "_boto3_client", client)
    client.cache_clear = made.cache_clear  # type: ignore[attr-defined]
    try:
        with enforced():
            # Dated now, as EventBridge dates it a moment before the call: an event dated at the start of
            # the minute would be skipped as late whenever the test ran in that minute's last 10 s.
            now = datetime.now(UTC).replace(microsecond=0)
            return lambda_handler.handler({"time": now.isoformat().replace("+00:00", "Z")}, Context())
    finally:
        made.cache_clear()
        lambda_handler._config.clear()


def test_every_call_of_a_run_is_granted_by_the_shipped_role(shipped_policy, deployed, monkeypatch):
    session = assumed_session(widened(shipped_policy), REGION)
    result = run_as(session, deployed, monkeypatch)
    assert "weights" in result  # a decided run (no region is deployed yet: nothing to weigh)


@pytest.mark.parametrize("action", ["dynamodb:PutItem", "ssm:GetParameter", "ssm:PutParameter"])
def test_a_missing_permission_fails_the_run(shipped_policy, deployed, monkeypatch, action):
    session = assumed_session(widened(shipped_policy, drop=action), REGION, name="narrower")
    with pytest.raises(ClientError, match=r"AccessDenied|not authorized"):
        run_as(session, deployed, monkeypatch)
