"""A fleet as `make compile` finds it, built in moto through the ECS, EC2 and Auto Scaling APIs: a VPC with
host subnets and a public one, the task security group and another, a host of the fleet's type registered in
the cluster, the fleet's capacity provider, an `awsvpc` compile task definition, and the fleet's service
running in the host subnets with the task security group (as cdk_constructs/fleet/service.py places it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cdk_constructs.fleet.task_definition import COMPILE_COMMAND, COMPILE_CONTAINER_NAME


@dataclass(frozen=True)
class MotoFleet:
    resources: dict[str, str]  # as ops.compile.fleet_resources returns them
    host_subnets: tuple[str, ...]
    public_subnet: str
    task_security_group: str
    other_security_group: str


def resource_names(name: str) -> dict[str, str]:
    """The fleet's resources by name (RunTask and DescribeServices take names as well as ARNs)."""
    return {
        "cluster": f"{name}-cell",
        "TaskDefinition": f"{name}Fleetinf248xlargeCompileTaskDefinition",
        "CapacityProvider": f"{name}-inf2-provider",
        "Service": f"{name}-inf2-serving",
    }


def compile_fleet(session: Any, name: str, region: str) -> MotoFleet:
    ec2 = session.client("ec2", region_name=region)
    ecs = session.client("ecs", region_name=region)
    autoscaling = session.client("autoscaling", region_name=region)
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    # The stack's VPC has DNS hostnames on (CDK's default); moto's ECS also needs them to attach an awsvpc
    # task's network interface.
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})

    def subnet(cidr: str, zone: str) -> str:
        return ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=f"{region}{zone}")["Subnet"][
            "SubnetId"
        ]

    public = subnet("10.42.0.0/24", "a")
    hosts = (subnet("10.42.1.0/24", "a"), subnet("10.42.2.0/24", "b"))

    def group(group_name: str) -> str:
        return ec2.create_security_group(GroupName=group_name, Description=group_name, VpcId=vpc)["GroupId"]

    tasks, balancer = group(f"{name}-tasks"), group(f"{name}-load-balancer")
    image = ec2.describe_images()["Images"][0]["ImageId"]
    template = f"{name}-compile-hosts"
    ec2.create_launch_template(
        LaunchTemplateName=template, LaunchTemplateData={"ImageId": image, "InstanceType": "inf2.48xlarge"}
    )
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=template,
        LaunchTemplate={"LaunchTemplateName": template},
        MinSize=0,
        MaxSize=2,
        VPCZoneIdentifier=",".join(hosts),
    )
    group_arn = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[template])[
        "AutoScalingGroups"
    ][0]["AutoScalingGroupARN"]
    names = resource_names(name)
    cluster, provider = names["cluster"], names["CapacityProvider"]
    ecs.create_cluster(clusterName=cluster)
    ecs.create_capacity_provider(name=provider, autoScalingGroupProvider={"autoScalingGroupArn": group_arn})
    ecs.put_cluster_capacity_providers(
        cluster=cluster, capacityProviders=[provider], defaultCapacityProviderStrategy=[]
    )
    # The host the capacity provider would launch, registered as its ECS agent registers it.
    host = ec2.run_instances(
        ImageId=image, MinCount=1, MaxCount=1, InstanceType="inf2.48xlarge", SubnetId=hosts[0]
    )["Instances"][0]["InstanceId"]
    ecs.register_container_instance(
        cluster=cluster, instanceIdentityDocument=json.dumps({"instanceId": host, "region": region})
    )
    task_definition = ecs.register_task_definition(
        family=names["TaskDefinition"],
        networkMode="awsvpc",
        requiresCompatibilities=["EC2"],
        containerDefinitions=[
            {"name": COMPILE_CONTAINER_NAME, "image": "serving", "command": COMPILE_COMMAND, "memory": 1024}
        ],
    )["taskDefinition"]["taskDefinitionArn"]
    serving = ecs.register_task_definition(
        family=f"{name}Fleetinf248xlargeTaskTaskDefinition",
        networkMode="awsvpc",
        requiresCompatibilities=["EC2"],
        containerDefinitions=[{"name": "serving", "image": "serving", "memory": 1024}],
    )["taskDefinition"]["taskDefinitionArn"]
    service = ecs.create_service(
        cluster=cluster,
        serviceName=names["Service"],
        taskDefinition=serving,
        desiredCount=0,
        capacityProviderStrategy=[{"capacityProvider": provider, "weight": 1}],
        networkConfiguration={
            "awsvpcConfiguration": {
                "subnets": list(hosts),
                "securityGroups": [tasks],
                "assignPublicIp": "DISABLED",
            }
        },
    )["service"]["serviceArn"]
    return MotoFleet(
        resources={
            "cluster": cluster,
            "TaskDefinition": task_definition,
            "CapacityProvider": provider,
            "Service": service,
        },
        host_subnets=hosts,
        public_subnet=public,
        task_security_group=tasks,
        other_security_group=balancer,
    )
