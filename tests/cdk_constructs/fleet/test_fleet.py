from aws_cdk.assertions import Annotations, Match

from tests.cdk_constructs.fleet.builders import build, fleet_props


def _keys(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item)


def test_no_desired_capacity_anywhere(template):
    assert "DesiredCapacity" not in set(_keys(template.to_json()))
    template.has_resource_properties("AWS::AutoScaling::AutoScalingGroup", {"MinSize": "2"})


def test_hosts_have_surge_headroom_above_the_service_maximum(template):
    # Service tasks 2..20, hosts up to 20 + 5: a deploy at the maximum can still start new tasks.
    template.has_resource_properties("AWS::AutoScaling::AutoScalingGroup", {"MaxSize": "25"})
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalableTarget", {"MaxCapacity": 20})


def test_fleet_of_a_type_ec2_does_not_offer_in_the_region_warns_at_synth(stack, vpc) -> None:
    build(stack, vpc, fleet_props("trn1.32xlarge", offered_in_region=False))
    Annotations.from_stack(stack).has_warning(
        "/Test/Fleet", Match.string_like_regexp("trn1.32xlarge is not offered in this region")
    )


def test_fleet_of_an_offered_type_synthesizes_without_warnings(stack, vpc) -> None:
    build(stack, vpc, fleet_props())
    Annotations.from_stack(stack).has_no_warning("*", Match.any_value())


def test_a_deploy_during_an_event_starts_group_and_service_at_its_bounds_but_alarms_on_the_fleets_own(
    stack, vpc
):
    _, template = build(stack, vpc, fleet_props(min_hosts=2, max_hosts=20, event_bounds_at_deploy=(12, 60)))
    # The group keeps the deploy surge above the event maximum: 60 + 25% = 75 hosts.
    template.has_resource_properties("AWS::AutoScaling::AutoScalingGroup", {"MinSize": "12", "MaxSize": "75"})
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 12, "MaxCapacity": 60}
    )
    # No alarm may hold the event's floor: it would fire once the fleet scales back after the event.
    thresholds = [
        a["Properties"].get("Threshold") for a in template.find_resources("AWS::CloudWatch::Alarm").values()
    ]
    assert 12 not in thresholds
