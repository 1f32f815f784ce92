from datetime import UTC, datetime

from aws_cdk.assertions import Match

from cdk_constructs.fleet import ScheduledBounds
from tests.cdk_constructs.fleet.builders import build, fleet_props


def test_service_scales_on_its_own_fleets_requests_in_flight_within_config_bounds(template):
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 2, "MaxCapacity": 20}
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "TargetTrackingScalingPolicyConfiguration": Match.object_like(
                {
                    "TargetValue": 24,
                    "CustomizedMetricSpecification": Match.object_like(
                        {
                            "MetricName": "RequestsInFlight",
                            "Namespace": "LLMServing",
                            "Dimensions": [
                                {"Name": "InstanceType", "Value": "inf2.48xlarge"},
                                {"Name": "Model", "Value": "assistant"},
                            ],
                            "Statistic": "Average",
                        }
                    ),
                }
            )
        },
    )


def test_event_bounds_are_scheduled_on_the_service_scalable_target(stack, vpc):
    raise_ = ScheduledBounds("prime-day-raise", datetime(2027, 7, 8, 6, 0, tzinfo=UTC), 12, 60)
    restore = ScheduledBounds("prime-day-restore", datetime(2027, 7, 10, 7, 0, tzinfo=UTC), 2, 20)
    _, template = build(stack, vpc, fleet_props(scheduled_bounds=(raise_, restore)))
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "MinCapacity": 2,
            "MaxCapacity": 20,
            "ScheduledActions": [
                {
                    "ScheduledActionName": "prime-day-raise",
                    "Schedule": "at(2027-07-08T06:00:00)",
                    "ScalableTargetAction": {"MinCapacity": 12, "MaxCapacity": 60},
                },
                {
                    "ScheduledActionName": "prime-day-restore",
                    "Schedule": "at(2027-07-10T07:00:00)",
                    "ScalableTargetAction": {"MinCapacity": 2, "MaxCapacity": 20},
                },
            ],
        },
    )


def test_no_scheduled_actions_without_events(template):
    target = next(iter(template.find_resources("AWS::ApplicationAutoScaling::ScalableTarget").values()))
    assert "ScheduledActions" not in target["Properties"]
