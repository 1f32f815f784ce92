from aws_cdk.assertions import Match


def test_service_scales_on_requests_in_flight_within_config_bounds(template):
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 2, "MaxCapacity": 20}
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "TargetTrackingScalingPolicyConfiguration": Match.object_like(
                {
                    "CustomizedMetricSpecification": Match.object_like(
                        {"MetricName": "RequestsInFlight", "Namespace": "LLMServing"}
                    )
                }
            )
        },
    )
