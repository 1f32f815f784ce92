"""The orchestrator construct in a bare stack: its own role (no managed policy), the public Powertools
layer, a schedule that never overlaps or retries, and its failure alarm."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match, Template

from cdk_constructs.traffic_orchestrator import OrchestratorProps, RegionReads, TrafficOrchestrator
from stacks.props import ORCHESTRATOR_DIRECTORY

PROPS = OrchestratorProps(
    code_directory=str(ORCHESTRATOR_DIRECTORY),
    config_json="{}",
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


def test_one_run_at_a_time_with_no_retries_and_no_stale_events(template):
    """Lambda's asynchronous retries (2 by default, events kept up to 6 h) gave overlapping, repeated and
    late runs: none, events dropped after a minute, one concurrent run."""
    template.has_resource_properties("AWS::Lambda::Function", {"ReservedConcurrentExecutions": 1})
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
