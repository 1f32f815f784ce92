"""The orchestrator construct in a bare stack: its own role (no managed policy), the public Powertools
layer, a schedule that never overlaps or retries, and its failure alarm."""

from __future__ import annotations

import dataclasses

import pytest
from aws_cdk.assertions import Match, Template

from cdk_constructs.traffic_orchestrator import (
    OrchestratorProps,
    RegionReads,
    TrafficOrchestrator,
    parameter_tier,
)
from orchestrator.routing.config_source import digest, encode
from stacks.props import ORCHESTRATOR_DIRECTORY

CONFIG_JSON = '{"regions": []}'
PROPS = OrchestratorProps(
    code_directory=str(ORCHESTRATOR_DIRECTORY),
    config_value=encode(CONFIG_JSON),
    config_parameter=f"/kit/routing/config-{digest(CONFIG_JSON)[:16]}",
    config_sha256=digest(CONFIG_JSON),
    routing_metrics_namespace="kit/Routing",
    hosted_zone_id="Z123",
    record_name="Assistant.Example.com",
    reads=(RegionReads("us-west-2", ("/kit/us-west-2/serving-endpoint",)),),
    state_parameter="/kit/routing/state",
    override_parameter="/kit/routing/override",
    powertools_version="3.37.0",
    log_retention_days=30,
    alarm_email="oncall@example.com",
)


@pytest.fixture
def template(stack) -> Template:
    TrafficOrchestrator(stack, "Orchestrator", props=PROPS)
    return Template.from_stack(stack)


def test_its_own_role_without_managed_policies(template):
    (role,) = template.find_resources("AWS::IAM::Role").values()
    assert "ManagedPolicyArns" not in role["Properties"]


def test_record_changes_name_the_record_in_lower_case(template):
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": "route53:ChangeResourceRecordSets",
                                "Condition": {
                                    "ForAllValues:StringEquals": {
                                        "route53:ChangeResourceRecordSetsNormalizedRecordNames": [
                                            "assistant.example.com"
                                        ],
                                        "route53:ChangeResourceRecordSetsRecordTypes": ["A"],
                                    }
                                },
                            }
                        )
                    ]
                )
            }
        },
    )


def test_code_is_the_plain_folder_and_the_layer_resolves_at_deploy_time(template):
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": "routing.handler.handler", "Layers": [{"Ref": Match.string_like_regexp("powertools")}]},
    )
    parameters = template.to_json()["Parameters"]
    assert any(p.get("Default", "").endswith("/python3.14/3.37.0") for p in parameters.values())


def test_the_failure_alarm_watches_the_function_errors(template):
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "Errors", "Namespace": "AWS/Lambda", "EvaluationPeriods": 5, "DatapointsToAlarm": 3},
    )


def test_no_retries_and_no_stale_events(template):
    """Lambda's asynchronous retries (2 by default, events kept up to 6 h) gave overlapping, repeated and
    late runs: none, events dropped after a minute."""
    (config,) = template.find_resources("AWS::Lambda::EventInvokeConfig").values()
    assert config["Properties"]["MaximumRetryAttempts"] == 0
    assert config["Properties"]["MaximumEventAgeInSeconds"] == 60
    assert config["Properties"]["Qualifier"] == "$LATEST"


def test_errors_throttles_and_missing_runs_notify_the_topic(template):
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    by_metric = {alarm["Properties"]["MetricName"]: alarm["Properties"] for alarm in alarms.values()}
    assert set(by_metric) == {"Errors", "Throttles", "Invocations"}
    (topic,) = template.find_resources("AWS::SNS::Topic")
    for properties in by_metric.values():
        assert properties["AlarmActions"] == [{"Ref": topic}]
        assert properties["OKActions"] == [{"Ref": topic}]
    missing = by_metric["Invocations"]
    assert missing["ComparisonOperator"] == "LessThanThreshold" and missing["Threshold"] == 1
    assert missing["TreatMissingData"] == "breaching"  # no datapoint is no run
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"}
    )
    # The topic is encrypted with a key CloudWatch may use, and CloudWatch may publish to it.
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Principal": {"Service": "cloudwatch.amazonaws.com"}, "Action": "sns:Publish"}
                        )
                    ]
                )
            }
        },
    )


def test_no_reserved_concurrency_unless_asked_so_any_account_can_deploy_it(template):
    """Lambda refuses reserved concurrency that leaves under 100 unreserved: new accounts with a quota of 10
    or 50 failed the global stack's first deploy. The run lock keeps runs apart instead."""
    (function,) = template.find_resources("AWS::Lambda::Function").values()
    assert "ReservedConcurrentExecutions" not in function["Properties"]
    (table,) = template.find_resources("AWS::DynamoDB::Table").values()
    assert table["Properties"]["KeySchema"] == [{"AttributeName": "lock", "KeyType": "HASH"}]
    assert table["Properties"]["BillingMode"] == "PAY_PER_REQUEST"
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["ORCHESTRATOR_LOCK_TABLE"] == {
        "Ref": next(iter(template.find_resources("AWS::DynamoDB::Table")))
    }


def test_reserved_concurrency_where_the_config_asks(stack):
    TrafficOrchestrator(stack, "Orchestrator", props=dataclasses.replace(PROPS, reserved_concurrency=True))
    Template.from_stack(stack).has_resource_properties(
        "AWS::Lambda::Function", {"ReservedConcurrentExecutions": 1}
    )


def test_the_config_is_a_parameter_the_environment_names_with_its_digest(template):
    (function,) = template.find_resources("AWS::Lambda::Function").values()
    variables = function["Properties"]["Environment"]["Variables"]
    assert "ORCHESTRATOR_CONFIG" not in variables
    assert variables["ORCHESTRATOR_CONFIG_SHA256"] == digest(CONFIG_JSON)
    (logical_id, parameter), *_ = template.find_resources("AWS::SSM::Parameter").items()
    assert (
        parameter["Properties"]["Name"]
        == variables["ORCHESTRATOR_CONFIG_PARAMETER"]
        == PROPS.config_parameter
    )
    assert parameter["Properties"]["Value"] == encode(CONFIG_JSON)
    assert parameter["Properties"]["Tier"] == "Standard"
    # The first run must find it: the function is created after the parameter.
    assert logical_id in function["DependsOn"]
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like({"Action": "ssm:GetParameter", "Resource": Match.any_value()}),
                        Match.object_like({"Action": ["dynamodb:PutItem", "dynamodb:DeleteItem"]}),
                    ]
                )
            }
        },
    )


@pytest.mark.parametrize(("size", "tier"), [(4096, "Standard"), (4097, "Advanced"), (8192, "Advanced")])
def test_the_parameter_tier_is_the_cheapest_that_holds_the_value(size, tier):
    assert parameter_tier("x" * size) == tier


def test_a_config_past_the_advanced_tier_stops_the_synth_naming_its_size():
    with pytest.raises(ValueError, match="8,193 bytes encoded"):
        parameter_tier("x" * 8193)


def test_the_operators_topic_is_notified_beside_the_stacks_own(stack):
    arn = "arn:aws:sns:us-east-1:123456789012:pager"
    TrafficOrchestrator(stack, "Orchestrator", props=dataclasses.replace(PROPS, alarm_topic_arn=arn))
    for alarm in Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm").values():
        assert arn in alarm["Properties"]["AlarmActions"]
