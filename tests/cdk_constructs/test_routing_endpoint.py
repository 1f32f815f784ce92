"""A region's routing endpoint: hard faults only in DNS (no healthy host, the front door, engine errors on
3 of 5 minutes), alarms Route 53 can follow, the parameters the orchestrator reads."""

from __future__ import annotations

import dataclasses
import re

import pytest
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk.assertions import Match, Template

from cdk_constructs.routing_endpoint import RoutingEndpoint, RoutingEndpointProps
from settings.aws_rules import alarm_health_checks, health_check_problems, stale_health_checks
from tests.cdk_constructs.conftest import host_vpc, new_stack

PROPS = RoutingEndpointProps(
    alarm_name_prefix="kit-us-east-1-routing",
    endpoint_parameter="/kit/us-east-1/serving-endpoint",
    health_check_parameter="/kit/us-east-1/routing-health-check",
    metrics_namespace="LLMServing",
    model_name="assistant",
    error_share=0.02,
    evaluation_minutes=2,
    alb_ready_path="/v2/models/assistant/ready",
)


def _build(stack, vpc, props=PROPS, port=8000) -> Template:
    alb = elbv2.ApplicationLoadBalancer(stack, "Alb", vpc=vpc)
    group = elbv2.ApplicationTargetGroup(
        stack,
        "Http",
        vpc=vpc,
        port=port,
        protocol=elbv2.ApplicationProtocol.HTTP,
        target_type=elbv2.TargetType.IP,
    )
    alb.add_listener("Listener", port=80, default_target_groups=[group])
    RoutingEndpoint(stack, "Routing", props=props, load_balancer=alb, target_group=group)
    return Template.from_stack(stack)


@pytest.fixture
def template(stack, vpc) -> Template:
    return _build(stack, vpc)


def test_every_alarm_health_check_follows_an_alarm_route53_supports(template):
    """Rule (b) of settings/aws_rules.py: one standard-resolution metric, a statistic Route 53 supports."""
    assert len(alarm_health_checks(template.to_json())) == 2
    assert health_check_problems(template.to_json()) == []


def test_a_changed_alarm_setting_makes_the_health_check_copy_it_again(template):
    """Route 53 copies an alarm only when a health check is created or names a new alarm (rule (b)): a new
    threshold or window must come with a new alarm name, or the check keeps evaluating the old ones."""
    stack = new_stack()
    changed = _build(
        stack, host_vpc(stack), dataclasses.replace(PROPS, error_share=0.05, evaluation_minutes=3)
    )
    assert alarm_health_checks(template.to_json()).keys() == alarm_health_checks(changed.to_json()).keys()
    assert stale_health_checks(template.to_json(), changed.to_json()) == []


def test_latency_and_sheds_never_take_a_region_out_of_dns(template):
    """On main a 1% slow-first-token share and a 1% failed share (sheds included) failed the region's
    Route 53 check: a loaded region left DNS whole."""
    names = {
        a["Properties"]["MetricName"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()
    }
    assert names == {"ServingError", "HealthyHostCount"}
    assert not names & {"SlowFirstToken", "Shed", "RequestFailed", "TimeToFirstToken"}


def test_engine_errors_fail_the_check_on_3_of_5_minutes_so_a_flapping_region_is_caught(template):
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "ServingError",
            "Statistic": "Average",
            "Threshold": 0.02,
            "ComparisonOperator": "GreaterThanThreshold",
            "EvaluationPeriods": 5,
            "DatapointsToAlarm": 3,
        },
    )


def test_only_no_healthy_host_at_all_fails_the_host_check(template):
    """On main the floor came from the everyday minimums (1-2 hosts) while cells run hundreds at the peak:
    no stronger than no healthy target, so it says exactly that."""
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "HealthyHostCount",
            "Statistic": "Minimum",
            "Threshold": 1,
            "ComparisonOperator": "LessThanThreshold",
            "EvaluationPeriods": 2,
            "DatapointsToAlarm": 2,
        },
    )


def test_the_front_door_is_checked_over_https_from_outside_on_the_ready_path(template):
    """On main a listener, certificate, WAF or network fault with healthy targets failed no check."""
    template.has_resource_properties(
        "AWS::Route53::HealthCheck",
        {
            "HealthCheckConfig": {
                "Type": "HTTPS",
                "FullyQualifiedDomainName": {"Fn::GetAtt": [Match.any_value(), "DNSName"]},
                "Port": 443,
                "ResourcePath": "/v2/models/assistant/ready",
                "EnableSNI": True,
                "RequestInterval": 30,
                "FailureThreshold": 3,
            }
        },
    )


def test_a_health_check_per_alarm_and_a_calculated_one_over_all_and_the_front_door(template):
    checks = template.find_resources("AWS::Route53::HealthCheck")
    metric_checks = [
        c for c in checks.values() if c["Properties"]["HealthCheckConfig"]["Type"] == "CLOUDWATCH_METRIC"
    ]
    (calculated,) = [
        c for c in checks.values() if c["Properties"]["HealthCheckConfig"]["Type"] == "CALCULATED"
    ]
    assert len(metric_checks) == 2
    for check in metric_checks:
        config = check["Properties"]["HealthCheckConfig"]
        assert config["AlarmIdentifier"]["Region"] == "us-east-1"
        assert "Ref" in config["AlarmIdentifier"]["Name"]  # the alarm exists before its health check
        # A region without traffic (new, or drained) has no data and must not be failed out for it.
        assert config["InsufficientDataHealthStatus"] == "Healthy"
    config = calculated["Properties"]["HealthCheckConfig"]
    assert len(config["ChildHealthChecks"]) == config["HealthThreshold"] == 3


def test_publishes_the_endpoint_and_the_health_check_for_the_orchestrator(template):
    template.has_resource_properties(
        "AWS::SSM::Parameter",
        {
            "Name": PROPS.endpoint_parameter,
            "Value": {"Fn::Join": ["", Match.array_with([Match.string_like_regexp("alb_dns_name")])]},
        },
    )
    template.has_resource_properties(
        "AWS::SSM::Parameter",
        {"Name": PROPS.health_check_parameter, "Value": {"Fn::GetAtt": [Match.any_value(), "HealthCheckId"]}},
    )


def _alarm_names(props=PROPS, port=8000) -> dict[str, str]:
    """Alarm logical id (less its hash) -> AlarmName, from a fresh app: what another synth would write."""
    stack = new_stack()
    alarms = _build(stack, host_vpc(stack), props, port).find_resources("AWS::CloudWatch::Alarm")
    return {
        re.sub(r"[0-9A-F]{8}$", "", key): alarm["Properties"]["AlarmName"] for key, alarm in alarms.items()
    }


def test_alarm_names_are_the_prefix_the_signal_and_a_digest_resolved_at_synth():
    names = _alarm_names()
    assert sorted(names) == ["RoutingErrorShare", "RoutingNoHealthyHosts"]
    assert re.fullmatch(r"kit-us-east-1-routing-serving-errors-[0-9a-f]{8}", names["RoutingErrorShare"])
    assert re.fullmatch(r"kit-us-east-1-routing-no-healthy-hosts-[0-9a-f]{8}", names["RoutingNoHealthyHosts"])
    assert _alarm_names() == names  # the same settings give the same names in every synth


def test_a_replaced_target_group_makes_a_new_healthy_hosts_alarm_so_its_check_copies_the_new_one():
    """A new port replaces the group under the same logical id: the alarm's dimensions (GetAtt of the group)
    read the same in the template, but Route 53 would keep watching the old group's series, which has no
    data (healthy). The name changes, so CloudFormation makes a new alarm and updates the check to it."""
    before, after = _alarm_names(), _alarm_names(port=8080)
    assert before["RoutingNoHealthyHosts"] != after["RoutingNoHealthyHosts"]
    assert before["RoutingErrorShare"] == after["RoutingErrorShare"]  # it does not watch the group


@pytest.mark.parametrize(
    ("change", "moved"),
    [
        ({"error_share": 0.03}, "RoutingErrorShare"),  # threshold
        ({"error_bad_minutes": 2}, "RoutingErrorShare"),  # the M of N
        ({"model_name": "other"}, "RoutingErrorShare"),  # a dimension
        ({"metrics_namespace": "Other"}, "RoutingErrorShare"),
        ({"evaluation_minutes": 3}, "RoutingNoHealthyHosts"),
    ],
)
def test_a_change_of_what_an_alarm_watches_renames_that_alarm_alone(change, moved):
    before, after = _alarm_names(), _alarm_names(dataclasses.replace(PROPS, **change))
    assert {key for key in before if before[key] != after[key]} == {moved}


def test_a_change_of_wording_keeps_the_names():
    """Descriptions and health-check labels are for people: no new alarm (and no new check) for them."""
    assert _alarm_names() == _alarm_names(dataclasses.replace(PROPS, label="us-east-1/2"))
