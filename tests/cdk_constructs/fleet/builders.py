"""Builds a fleet in a bare stack with stand-in target groups, cluster and role."""

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from cdk_constructs.fleet import FleetProps, FleetTargets, ImageSource, NeuronFleet, ServingPorts
from settings.instances import INSTANCES

NEURON_AMI_PARAMETER = (
    "/aws/service/ecs/optimized-ami/amazon-linux-2023/neuron/"
    "al2023-ami-ecs-neuron-hvm-2023.0.20261113-kernel-6.1-x86_64/image_id"
)


def fleet_props(instance_type="inf2.48xlarge", **overrides):
    values = dict(
        instance=INSTANCES[instance_type],
        tensor_parallel=INSTANCES[instance_type].neuron_cores,
        min_hosts=2,
        max_hosts=20,
        max_surge_percent=25,
        ami_parameter_name=NEURON_AMI_PARAMETER,
        data_volume_gib=600,
        image=ImageSource(image_uri="public.ecr.aws/example/serving:1"),
        ports=ServingPorts(http=8000, grpc=8001, metrics=8002),
        shared_memory_mib=4096,
        cold_start_budget_seconds=1800,
        health_check_grace_seconds=2400,
        instance_warmup_seconds=300,
        environment=(("ENGINE_MAX_NUM_SEQS", "32"),),
        target_requests_in_flight=24.0,
        metrics_namespace="LLMServing",
        model_name="assistant",
        offered_in_region=True,
        availability_zones=("us-east-1a", "us-east-1b"),
    )
    values.update(overrides)
    return FleetProps(**values)


def build(stack, vpc, props):
    cluster = ecs.Cluster(stack, "Cluster", vpc=vpc)
    alb_sg = ec2.SecurityGroup(stack, "AlbSg", vpc=vpc)
    http = elbv2.ApplicationTargetGroup(
        stack,
        "Http",
        vpc=vpc,
        port=8000,
        protocol=elbv2.ApplicationProtocol.HTTP,
        target_type=elbv2.TargetType.IP,
    )
    grpc = elbv2.ApplicationTargetGroup(
        stack,
        "Grpc",
        vpc=vpc,
        port=8001,
        protocol=elbv2.ApplicationProtocol.HTTP,
        protocol_version=elbv2.ApplicationProtocolVersion.GRPC,
        target_type=elbv2.TargetType.IP,
    )
    role = iam.Role(stack, "TaskRole", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    fleet = NeuronFleet(
        stack,
        "Fleet",
        props=props,
        cluster=cluster,
        targets=FleetTargets(http=http, grpc=grpc, load_balancer_security_group=alb_sg),
        task_role=role,
        log_group=logs.LogGroup(stack, "Logs"),
        compile_task_role=iam.Role(
            stack, "CompileTaskRole", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com")
        ),
        compile_log_group=logs.LogGroup(stack, "CompileLogs"),
    )
    return fleet, Template.from_stack(stack)


def serving_task_definition(template):
    (task,) = (
        t
        for logical_id, t in template.find_resources("AWS::ECS::TaskDefinition").items()
        if logical_id.startswith("FleetTask")
    )
    return task


def compile_task_definition(template):
    (task,) = (
        t
        for logical_id, t in template.find_resources("AWS::ECS::TaskDefinition").items()
        if logical_id.startswith("FleetCompile")
    )
    return task


def serving_container(template):
    return serving_task_definition(template)["Properties"]["ContainerDefinitions"][0]
