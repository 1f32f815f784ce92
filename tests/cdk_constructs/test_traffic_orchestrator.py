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
