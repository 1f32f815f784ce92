import dataclasses
import json

import pytest
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk.assertions import Match, Template

from cdk_constructs.log_encryption import EncryptedLogs, LogProps
from cdk_constructs.observability import FleetView, NeuronView, ObservabilityProps, ServingObservability

PROPS = ObservabilityProps(
    dashboard_name="assistant-us-east-1",
    degraded_alarm_name="assistant-us-east-1-region-degraded",
    unfit_alarm_name="assistant-us-east-1-region-unfit",
    metrics_namespace="LLMServing",
    model_name="assistant",
    ttft_p99_threshold_ms=900,
    alarm_email="oncall@example.com",
)


NEURON_SERIES = {
    "utilization": "NeuronCoreUtilization",
    "device_memory_used": "NeuronDeviceMemoryUsed",
    "execution_errors": "NeuronExecutionErrors",
    "hardware_errors": "NeuronHardwareErrors",
    "runtime_failures": "NeuronRuntimeFailures-inf2.48xlarge",
}


@pytest.fixture
def template(stack, vpc):
    return _template(stack, vpc, PROPS)


def _template(stack, vpc, props: ObservabilityProps):
    alb = elbv2.ApplicationLoadBalancer(stack, "Alb", vpc=vpc)
    group = elbv2.ApplicationTargetGroup(stack, "Http", vpc=vpc, port=8000, target_type=elbv2.TargetType.IP)
    alb.add_listener("Listener", port=80, default_target_groups=[group])
    upstream, serving = (
        cloudwatch.Alarm(
            stack,
            name,
            metric=cloudwatch.Metric(namespace="X", metric_name=name),
            threshold=1,
            evaluation_periods=1,
        )
        for name in ("Upstream", "Serving")
    )
    fleets = [
        FleetView(
            "inf2.48xlarge",
            cloudwatch.Metric(namespace="ECS/ContainerInsights", metric_name="RunningTaskCount"),
            cloudwatch.Metric(namespace="AWS/AutoScaling", metric_name="GroupInServiceInstances"),
            NeuronView(
                **{
                    field: cloudwatch.Metric(namespace="LLMServing", metric_name=name)
                    for field, name in NEURON_SERIES.items()
                }
            ),
        )
    ]
    ServingObservability(
        stack,
        "Obs",
        props=props,
        logs=EncryptedLogs(stack, "Logs", props=LogProps(retention_days=30)),
        load_balancer=alb,
        target_groups=[group],
        fleets=fleets,
        alarms=[upstream],
        serving_alarms=[serving],
    )
    return Template.from_stack(stack)


def _dashboard_body(template):
    dashboard = next(iter(template.find_resources("AWS::CloudWatch::Dashboard").values()))
    body = dashboard["Properties"]["DashboardBody"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    return "".join(p if isinstance(p, str) else "<ref>" for p in parts)


def test_dashboard_shows_ttft_p50_and_p99_of_the_containers_emf_metric(template):
    body = _dashboard_body(template)
    assert '"LLMServing","TimeToFirstToken","Model","assistant"' in body
    for statistic in ("p50", "p99"):
        assert f'"stat":"{statistic}"' in body


def test_dashboard_shows_ttft_p99_per_fleet_from_the_fleet_dimension_set(template):
    body = _dashboard_body(template)
    assert (
        '"LLMServing","TimeToFirstToken","InstanceType","inf2.48xlarge","Model","assistant",'
        '{"label":"inf2.48xlarge","period":60,"stat":"p99"}' in body
    )


def test_alarm_watches_the_region_series_not_a_fleet(template):
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "TimeToFirstToken", "Dimensions": [{"Name": "Model", "Value": "assistant"}]},
    )


def test_dashboard_shows_output_tokens_in_flight_and_balancer_metrics(template):
    body = _dashboard_body(template)
    for metric in (
        "OutputTokens",
        "RequestsInFlight",
        "QueueDepth",
        "RunningTaskCount",
        "GroupInServiceInstances",
        "RequestCountPerTarget",
        "HealthyHostCount",
        "HTTPCode_ELB_5XX_Count",
        "ActiveConnectionCount",
    ):
        assert metric in body, metric


def test_ttft_p99_alarm_at_the_configured_threshold(template):
    alarms = template.find_resources(
        "AWS::CloudWatch::Alarm",
        {"Properties": {"MetricName": "TimeToFirstToken", "ExtendedStatistic": "p99"}},
    )
    assert len(alarms) == 1
    alarm = next(iter(alarms.values()))["Properties"]
    assert alarm["Threshold"] == 900
    assert alarm["Dimensions"] == [{"Name": "Model", "Value": "assistant"}]


def _composites(template):
    return {
        c["Properties"]["AlarmName"].rsplit("-", 2)[-1]: (logical_id, c["Properties"])
        for logical_id, c in template.find_resources("AWS::CloudWatch::CompositeAlarm").items()
    }


def test_region_degraded_composite_watches_every_alarm_by_a_known_name(template):
    _, composite = _composites(template)["degraded"]
    assert composite["AlarmName"] == "assistant-us-east-1-region-degraded"
    rule = json.dumps(composite["AlarmRule"])
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    # upstream, serving, TTFT p99, target 5xx share, slow-first-token, shed and rejected shares
    assert len(alarms) == 7
    for logical_id in alarms:
        assert logical_id in rule


def test_region_unfit_watches_the_serving_signals_and_the_target_5xx_share_only(template):
    _, composite = _composites(template)["unfit"]
    assert composite["AlarmName"] == "assistant-us-east-1-region-unfit"
    rule = json.dumps(composite["AlarmRule"])
    heard = {i for i in template.find_resources("AWS::CloudWatch::Alarm") if i in rule}
    assert {i.rstrip("0123456789ABCDEF") for i in heard} == {"Serving", "ObsTarget5xxShare"}
    assert "AlarmActions" not in composite


def test_target_5xx_share_leaves_sheds_out_on_3_of_5_minutes(template):
    """On main every 5xx counted, and an HTTP shed is a 503 at the ALB: shedding drained the region that
    shed. 2 bad minutes in a row also missed a region failing every other minute."""
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Threshold": 0.01,
            "EvaluationPeriods": 5,
            "DatapointsToAlarm": 3,
            "ComparisonOperator": "GreaterThanThreshold",
            "TreatMissingData": "notBreaching",
            "Metrics": Match.array_with(
                [
                    Match.object_like(
                        {
                            "Expression": "IF(requests > 0 AND FILL(errors, 0) > FILL(sheds, 0), "
                            "(FILL(errors, 0) - FILL(sheds, 0)) / requests, 0)"
                        }
                    ),
                    Match.object_like({"Id": "sheds", "MetricStat": Match.object_like({"Stat": "Sum"})}),
                ]
            ),
        },
    )


def _paging_alarm(template, name: str) -> tuple[str, dict]:
    found = [
        (key, a["Properties"])
        for key, a in template.find_resources("AWS::CloudWatch::Alarm").items()
        if key.startswith(f"Obs{name}")
    ]
    assert len(found) == 1, name
    return found[0]


@pytest.mark.parametrize("name", ["ShedShare", "RejectedShare", "SlowFirstTokenShare"])
def test_overload_and_client_mistakes_page_but_never_drain(template, name):
    """Sheds, rejects and slow first tokens have alarms of their own that page (region-degraded) and are
    not in region-unfit, which the orchestrator drains on."""
    key, alarm = _paging_alarm(template, name)
    assert alarm["EvaluationPeriods"] == 5 and alarm["DatapointsToAlarm"] == 3
    composites = _composites(template)
    assert key in json.dumps(composites["degraded"][1]["AlarmRule"])
    assert key not in json.dumps(composites["unfit"][1]["AlarmRule"])


def test_shed_share_is_the_average_of_the_per_request_shed_flag(template):
    _, alarm = _paging_alarm(template, "ShedShare")
    assert (alarm["MetricName"], alarm["Statistic"], alarm["Threshold"]) == ("Shed", "Average", 0.05)


def test_rejected_share_is_rejected_over_every_request(template):
    _, alarm = _paging_alarm(template, "RejectedShare")
    metrics = {m["Id"]: m for m in alarm["Metrics"]}
    assert metrics["rejected"]["MetricStat"]["Metric"]["MetricName"] == "RequestRejected"
    assert metrics["accepted"]["MetricStat"]["Stat"] == "SampleCount"


def test_dashboard_shows_sheds_and_rejects_apart(template):
    body = json.dumps(template.find_resources("AWS::CloudWatch::Dashboard"))
    assert "Requests shed (overload), rejected (client mistakes)" in body
    for name in ("Shed", "RequestRejected", "ServingError"):
        assert f'\\"{name}\\"' in body or f'"{name}"' in body, name


def test_notifications_go_to_an_encrypted_topic_with_the_configured_email(template):
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"}
    )


def test_cloudwatch_may_use_the_key_to_publish_alarms_to_the_encrypted_topic(template):
    key = next(iter(template.find_resources("AWS::KMS::Key").values()))
    statement = next(
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    )
    assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_dashboard_shows_neuron_device_series_per_fleet(template):
    body = _dashboard_body(template)
    for name in NEURON_SERIES.values():
        assert f'"LLMServing","{name}",{{"label":"inf2.48xlarge' in body, name
    assert "NeuronCore utilisation per fleet (%)" in body


def test_cloudwatch_may_publish_to_the_topic_only_for_this_accounts_degraded_alarm(template):
    policy = next(iter(template.find_resources("AWS::SNS::TopicPolicy").values()))["Properties"]
    statements = policy["PolicyDocument"]["Statement"]
    allow = next(s for s in statements if s.get("Sid") == "AllowCloudWatchAlarms")
    assert allow["Effect"] == "Allow"
    assert allow["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert allow["Action"] == "sns:Publish"
    composite, _ = _composites(template)["degraded"]
    assert allow["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnLike": {"aws:SourceArn": [{"Fn::GetAtt": [composite, "Arn"]}]},
    }
    # The deny-without-TLS statement stays: the allow is added to it, not instead of it.
    assert any(s["Effect"] == "Deny" and "aws:SecureTransport" in json.dumps(s) for s in statements)


@pytest.fixture
def following_template(stack, vpc):
    return _template(stack, vpc, dataclasses.replace(PROPS, catalog_follow_seconds=60))


def test_no_index_version_alarm_where_hosts_do_not_follow_the_catalog(template):
    assert not [i for i in template.find_resources("AWS::CloudWatch::Alarm") if "IndexVersions" in i]


def test_hosts_on_different_catalog_builds_for_longer_than_two_intervals_page(following_template):
    alarms = following_template.find_resources("AWS::CloudWatch::Alarm")
    (logical_id,) = [i for i in alarms if "IndexVersionsDisagree" in i]
    alarm = alarms[logical_id]["Properties"]
    # Three breaching minutes in a row: longer than two 60 s intervals.
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"], alarm["Threshold"]) == (3, 3, 0)
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    expression = next(query for query in alarm["Metrics"] if "Expression" in query)
    assert expression["Expression"] == "newest - oldest"
    stats = {
        query["Id"]: (query["MetricStat"]["Metric"]["MetricName"], query["MetricStat"]["Stat"])
        for query in alarm["Metrics"]
        if "MetricStat" in query
    }
    assert stats == {"newest": ("IndexVersion", "Maximum"), "oldest": ("IndexVersion", "Minimum")}
    _, degraded = _composites(following_template)["degraded"]
    _, unfit = _composites(following_template)["unfit"]
    assert logical_id in json.dumps(degraded["AlarmRule"])
    assert logical_id not in json.dumps(unfit["AlarmRule"]), "a host on an old catalog serves: no drain"
