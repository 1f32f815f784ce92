"""A region's routing endpoint: alarms Route 53 can follow, health checks beside them, the parameters the
orchestrator reads."""

from __future__ import annotations

import pytest
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk.assertions import Match, Template

from cdk_constructs.routing_endpoint import RoutingEndpoint, RoutingEndpointProps, alarm_name

PROPS = RoutingEndpointProps(
    alarm_name_prefix="kit-us-east-1-routing",
    endpoint_parameter="/kit/us-east-1/serving-endpoint",
    health_check_parameter="/kit/us-east-1/routing-health-check",
    metrics_namespace="LLMServing",
    model_name="assistant",
    slow_first_token_share=0.01,
    error_share=0.02,
    min_healthy_hosts=3,
    evaluation_minutes=2,
)
# What Route 53 health checks can follow (Route 53 API reference, AlarmIdentifier).
ROUTE53_STATISTICS = {"Average", "Minimum", "Maximum", "Sum", "SampleCount"}


@pytest.fixture
def template(stack, vpc) -> Template:
    alb = elbv2.ApplicationLoadBalancer(stack, "Alb", vpc=vpc)
    group = elbv2.ApplicationTargetGroup(stack, "Http", vpc=vpc, port=8000, target_type=elbv2.TargetType.IP)
    alb.add_listener("Listener", port=80, default_target_groups=[group])
    RoutingEndpoint(stack, "Routing", props=PROPS, load_balancer=alb, target_group=group)
    return Template.from_stack(stack)


def test_every_alarm_is_one_standard_metric_with_a_statistic_route53_follows(template):
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    assert len(alarms) == 3
    for alarm in alarms.values():
        properties = alarm["Properties"]
        assert "Metrics" not in properties  # no metric math
        assert properties["Statistic"] in ROUTE53_STATISTICS
        assert "ExtendedStatistic" not in properties  # no percentiles
        assert properties["Period"] == 60
        assert properties["EvaluationPeriods"] == properties["DatapointsToAlarm"] == 2


def test_shares_are_averages_of_the_per_request_zero_one_metrics(template):
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "SlowFirstToken",
            "Statistic": "Average",
            "Threshold": 0.01,
            "ComparisonOperator": "GreaterThanThreshold",
        },
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm", {"MetricName": "RequestFailed", "Statistic": "Average", "Threshold": 0.02}
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "HealthyHostCount",
            "Statistic": "Minimum",
            "Threshold": 3,
            "ComparisonOperator": "LessThanThreshold",
        },
    )


def test_a_health_check_per_alarm_and_a_calculated_one_over_all(template):
    checks = template.find_resources("AWS::Route53::HealthCheck")
    metric_checks = [
        c for c in checks.values() if c["Properties"]["HealthCheckConfig"]["Type"] == "CLOUDWATCH_METRIC"
    ]
    (calculated,) = [
        c for c in checks.values() if c["Properties"]["HealthCheckConfig"]["Type"] == "CALCULATED"
    ]
    assert len(metric_checks) == 3
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


def test_alarm_names_change_with_their_settings_so_health_checks_copy_them_again():
    assert alarm_name("p", "errors", 0.01, 2) == alarm_name("p", "errors", 0.01, 2)
    assert alarm_name("p", "errors", 0.01, 2) != alarm_name("p", "errors", 0.02, 2)
    assert alarm_name("p", "errors", 0.01, 2).startswith("p-errors-")
