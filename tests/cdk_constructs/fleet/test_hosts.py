import json
from datetime import UTC, datetime

import pytest
from aws_cdk.assertions import Capture, Match

from cdk_constructs.fleet import CapacityBlockProps, CapacityReservationProps, ScheduledBounds, WarmPoolProps
from cdk_constructs.fleet.host_boot import EBS_MODEL, INSTANCE_STORE_MODEL
from tests.cdk_constructs.fleet.builders import NEURON_AMI_PARAMETER, build, fleet_props

GROUP_ARN = "arn:aws:resource-groups:us-east-1:111111111111:group/prime-day"


def test_hosts_boot_the_ecs_neuron_ami_resolved_from_ssm_at_deploy_time(template):
    parameters = template.to_json()["Parameters"]
    ami = [p for p in parameters.values() if p.get("Default") == NEURON_AMI_PARAMETER]
    assert ami and ami[0]["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {
                    "InstanceType": "inf2.48xlarge",
                    "MetadataOptions": Match.object_like({"HttpTokens": "required"}),
                }
            )
        },
    )


def test_capacity_provider_manages_scaling_termination_protection_and_draining(template):
    template.has_resource_properties(
        "AWS::ECS::CapacityProvider",
        {
            "AutoScalingGroupProvider": Match.object_like(
                {
                    "ManagedScaling": Match.object_like({"Status": "ENABLED", "TargetCapacity": 100}),
                    "ManagedTerminationProtection": "ENABLED",
                    "ManagedDraining": "ENABLED",
                }
            )
        },
    )
    template.has_resource_properties(
        "AWS::AutoScaling::AutoScalingGroup", {"NewInstancesProtectedFromScaleIn": True}
    )


def test_managed_scaling_warms_up_for_boot_and_registration_not_the_models_cold_start(stack, vpc):
    """ECS holds further scale-out for hosts inside their warm-up: a cold-start-long warm-up (1800 s) would
    allow one batch of hosts per half hour during a surge."""
    _, template = build(stack, vpc, fleet_props(instance_warmup_seconds=240, cold_start_budget_seconds=1800))
    providers = template.find_resources("AWS::ECS::CapacityProvider")
    (provider,) = providers.values()
    scaling = provider["Properties"]["AutoScalingGroupProvider"]["ManagedScaling"]
    assert scaling["InstanceWarmupPeriod"] == 240


def test_inf2_keeps_weights_on_an_encrypted_ebs_volume_sized_from_config(template):
    data = template.to_json()
    launch = next(iter(template.find_resources("AWS::EC2::LaunchTemplate").values()))
    mappings = launch["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"]
    volume = next(m for m in mappings if m["DeviceName"] == "/dev/xvdb")["Ebs"]
    assert volume == {"Encrypted": True, "VolumeSize": 600, "VolumeType": "gp3"}
    assert EBS_MODEL in json.dumps(data)


def test_trn1_keeps_weights_on_instance_store_without_an_ebs_data_volume(stack, vpc):
    _, template = build(stack, vpc, fleet_props("trn1.32xlarge"))
    launch = next(iter(template.find_resources("AWS::EC2::LaunchTemplate").values()))
    devices = [m["DeviceName"] for m in launch["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"]]
    assert devices == ["/dev/xvda"]
    user_data = json.dumps(launch["Properties"]["LaunchTemplateData"]["UserData"])
    assert INSTANCE_STORE_MODEL in user_data and EBS_MODEL not in user_data


def test_host_joins_the_cluster_and_blocks_task_metadata_access(template):
    launch = next(iter(template.find_resources("AWS::EC2::LaunchTemplate").values()))
    user_data = json.dumps(launch["Properties"]["LaunchTemplateData"]["UserData"])
    assert "ECS_CLUSTER=" in user_data
    assert "ECS_AWSVPC_BLOCK_IMDS=true" in user_data
    assert "ECS_CONTAINER_STOP_TIMEOUT=120s" in user_data


RAISE = ScheduledBounds("prime-day-raise", datetime(2027, 7, 8, 6, 0, tzinfo=UTC), 12, 60)
RESTORE = ScheduledBounds("prime-day-restore", datetime(2027, 7, 10, 7, 0, tzinfo=UTC), 2, 20)


def test_event_bounds_are_scheduled_on_the_group_minimum_and_maximum_without_desired_capacity(stack, vpc):
    _, template = build(stack, vpc, fleet_props(scheduled_bounds=(RAISE, RESTORE)))
    actions = template.find_resources("AWS::AutoScaling::ScheduledAction")
    group = Capture()
    template.has_resource_properties(
        "AWS::AutoScaling::ScheduledAction",
        {"AutoScalingGroupName": {"Ref": group}, "StartTime": "2027-07-08T06:00:00Z", "MinSize": 12},
    )
    assert group.as_string() in template.find_resources("AWS::AutoScaling::AutoScalingGroup")
    assert sorted(
        (a["Properties"]["StartTime"], a["Properties"]["MinSize"], a["Properties"]["MaxSize"])
        for a in actions.values()
    ) == [("2027-07-08T06:00:00Z", 12, 75), ("2027-07-10T07:00:00Z", 2, 25)]  # maxima + the 25% deploy surge
    assert all("DesiredCapacity" not in a["Properties"] for a in actions.values())


def test_warm_pool_keeps_stopped_hosts_that_never_return_on_scale_in(stack, vpc):
    _, template = build(stack, vpc, fleet_props(warm_pool=WarmPoolProps(min_size=2, max_prepared=40)))
    template.has_resource_properties(
        "AWS::AutoScaling::WarmPool",
        {
            "PoolState": "Stopped",
            "MinSize": 2,
            "MaxGroupPreparedCapacity": 40,
            "InstanceReusePolicy": {"ReuseOnScaleIn": False},
        },
    )
    launch = next(iter(template.find_resources("AWS::EC2::LaunchTemplate").values()))
    user_data = json.dumps(launch["Properties"]["LaunchTemplateData"]["UserData"])
    assert "ECS_WARM_POOLS_CHECK=true" in user_data
    # Auto Scaling stops a host entering the pool without waiting for user data: it runs at every boot.
    assert "cloud_final_modules:\\n- [scripts-user, always]" in user_data
    assert "ECS_CLUSTER=" in user_data and "serving-data-disk" in user_data


def test_no_warm_pool_unless_configured(template):
    assert template.find_resources("AWS::AutoScaling::WarmPool") == {}
    text = json.dumps(template.to_json())
    assert "ECS_WARM_POOLS_CHECK" not in text and "scripts-user" not in text


@pytest.mark.parametrize(
    ("reservation", "target"),
    [
        (
            CapacityReservationProps("capacity-reservations-first", ids=("cr-0123456789abcdef0",)),
            {"CapacityReservationIds": ["cr-0123456789abcdef0"]},
        ),
        (
            CapacityReservationProps("capacity-reservations-only", resource_group_arn=GROUP_ARN),
            {"CapacityReservationResourceGroupArns": [GROUP_ARN]},
        ),
    ],
)
def test_group_targets_on_demand_capacity_reservations_with_the_preference(stack, vpc, reservation, target):
    _, template = build(stack, vpc, fleet_props(capacity_reservation=reservation))
    template.has_resource_properties(
        "AWS::AutoScaling::AutoScalingGroup",
        {
            "CapacityReservationSpecification": {
                "CapacityReservationPreference": reservation.preference,
                "CapacityReservationTarget": target,
            }
        },
    )


def test_capacity_block_sets_the_market_type_and_keeps_hosts_in_the_block_zone(stack, vpc):
    block = CapacityBlockProps("cr-0123456789abcdef0", "us-east-1b")
    _, template = build(stack, vpc, fleet_props("trn1.32xlarge", min_hosts=0, capacity_block=block))
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {
                    "InstanceMarketOptions": {"MarketType": "capacity-block"},
                    "CapacityReservationSpecification": {
                        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
                    },
                }
            )
        },
    )
    group = next(iter(template.find_resources("AWS::AutoScaling::AutoScalingGroup").values()))
    subnets = [ref["Ref"] for ref in group["Properties"]["VPCZoneIdentifier"]]
    zones = {
        name: subnet["Properties"]["AvailabilityZone"]
        for name, subnet in template.find_resources("AWS::EC2::Subnet").items()
    }
    assert [zones[subnet] for subnet in subnets] == ["us-east-1b"]


def _user_data(template):
    launch = next(iter(template.find_resources("AWS::EC2::LaunchTemplate").values()))
    return json.dumps(launch["Properties"]["LaunchTemplateData"]["UserData"])


def test_ssm_agent_is_not_started_while_session_manager_is_off(template):
    assert "amazon-ssm-agent" not in _user_data(template)


def test_session_manager_starts_the_ssm_agent_at_boot(stack, vpc):
    _, template = build(stack, vpc, fleet_props(session_manager=True))
    user_data = _user_data(template)
    assert "dnf install -y amazon-ssm-agent" in user_data
    assert "systemctl enable --now amazon-ssm-agent" in user_data


def test_hosts_launch_only_in_the_zones_that_offer_their_type(stack, vpc):
    _, template = build(stack, vpc, fleet_props(availability_zones=("us-east-1b",)))
    group = next(iter(template.find_resources("AWS::AutoScaling::AutoScalingGroup").values()))
    subnets = group["Properties"]["VPCZoneIdentifier"]
    assert len(subnets) == 1
    subnet_id = subnets[0]["Ref"]
    subnet = template.to_json()["Resources"][subnet_id]["Properties"]
    assert subnet["AvailabilityZone"] == "us-east-1b"
    assert {"Key": "aws-cdk:subnet-name", "Value": "hosts"} in subnet["Tags"]
