import json

from aws_cdk.assertions import Match

from cdk_constructs.fleet.host_boot import EBS_MODEL, INSTANCE_STORE_MODEL
from tests.cdk_constructs.fleet.builders import NEURON_AMI_PARAMETER, build, fleet_props


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
