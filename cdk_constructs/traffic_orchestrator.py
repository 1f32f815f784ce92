"""The traffic orchestrator: a Python Lambda on a one-minute schedule, with the least IAM it needs.

Its code is a plain folder (`orchestrator/`), staged as an asset with no build step, so synth needs no
Docker and no network; Powertools comes from AWS's public layer, found at deploy time through the SSM
parameter Powertools publishes per version (the same version the tests run), and boto3 from the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from cdk_constructs.log_encryption import retention_at_least
from cdk_constructs.nag import acknowledge

RUNTIME = lambda_.Runtime.PYTHON_3_14
POWERTOOLS_PARAMETER = "/aws/service/powertools/python/x86_64/python3.14/{version}"
HANDLER = "routing.handler.handler"


@dataclass(frozen=True)
class RegionReads:
    """What the orchestrator reads in one region."""

    region: str
    parameters: tuple[str, ...]  # SSM parameter names (the region's endpoint and health check)


@dataclass(frozen=True)
class OrchestratorProps:
    code_directory: str
    config_json: str  # routing.config.OrchestratorConfig, as the Lambda parses it
    routing_metrics_namespace: str  # where it publishes each region's weight
    hosted_zone_id: str
    record_name: str  # the one client-facing name whose records it may change
    reads: tuple[RegionReads, ...]
    state_parameter: str  # written by the orchestrator alone
    override_parameter: str  # written by operators (`make traffic`)
    powertools_version: str
    log_retention_days: int


class TrafficOrchestrator(Construct):
    def __init__(self, scope: Construct, id: str, *, props: OrchestratorProps) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=retention_at_least(props.log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Traffic orchestrator: read region signals, change the weighted records",
        )
        self._grant(props, stack)
        powertools = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "Powertools",
            ssm.StringParameter.value_for_string_parameter(
                self, POWERTOOLS_PARAMETER.format(version=props.powertools_version)
            ),
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            handler=HANDLER,
            code=lambda_.Code.from_asset(props.code_directory, exclude=["**/__pycache__", "**/*.pyc"]),
            layers=[powertools],
            role=self.role,
            log_group=self.log_group,
            memory_size=256,
            # Shorter than the schedule, so two runs never overlap.
            timeout=Duration.seconds(50),
            description="Moves Route 53 weights between regions from their health and spare capacity",
            environment={
                "ORCHESTRATOR_CONFIG": props.config_json,
                "POWERTOOLS_METRICS_NAMESPACE": props.routing_metrics_namespace,
                "POWERTOOLS_SERVICE_NAME": "traffic-orchestrator",
            },
        )
        # CDK makes the function depend on both the role and its policy; the role is already referenced
        # (cfn-lint W3005), the policy must stay so the first run has its permissions.
        policy = self.role.node.find_child("DefaultPolicy").node.default_child
        self.function.node.default_child.add_override("DependsOn", [stack.get_logical_id(policy)])
        events.Rule(
            self,
            "EveryMinute",
            description="One traffic orchestrator run per minute",
            schedule=events.Schedule.rate(Duration.minutes(1)),
            # A run retried late is worse than the next run, which reads fresher metrics.
            targets=[
                targets.LambdaFunction(self.function, retry_attempts=0, max_event_age=Duration.seconds(60))
            ],
        )
        self.failing_alarm = cloudwatch.Alarm(
            self,
            "Failing",
            alarm_description="The traffic orchestrator failed in 3 of the last 5 minutes: weights frozen "
            "(Route 53 health checks still fail regions out)",
            metric=self.function.metric_errors(period=Duration.minutes(1), statistic="Sum"),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _grant(self, props: OrchestratorProps, stack: Stack) -> None:
        zone = stack.format_arn(
            service="route53",
            region="",
            account="",
            resource="hostedzone",
            resource_name=props.hosted_zone_id,
        )
        self.role.add_to_policy(
            iam.PolicyStatement(actions=["route53:ListResourceRecordSets"], resources=[zone])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["route53:ChangeResourceRecordSets"],
                resources=[zone],
                # Only the one client-facing name's A records: nothing else in the zone.
                conditions={
                    "ForAllValues:StringEquals": {
                        "route53:ChangeResourceRecordSetsNormalizedRecordNames": [props.record_name.lower()],
                        "route53:ChangeResourceRecordSetsRecordTypes": ["A"],
                    }
                },
            )
        )
        read_parameters = [
            stack.format_arn(
                service="ssm", region=reads.region, resource="parameter", resource_name=name.lstrip("/")
            )
            for reads in props.reads
            for name in reads.parameters
        ]
        state, override = (
            stack.format_arn(service="ssm", resource="parameter", resource_name=name.lstrip("/"))
            for name in (props.state_parameter, props.override_parameter)
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["ssm:GetParameter", "ssm:GetParameters"],
                resources=[*read_parameters, state, override],
            )
        )
        self.role.add_to_policy(iam.PolicyStatement(actions=["ssm:PutParameter"], resources=[state]))
        # GetMetricData has no resource-level permissions, and DescribeAlarms returns composite alarms
        # (the region-degraded alarm is one) only when granted on "*" (CloudWatch API reference).
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:GetMetricData", "cloudwatch:DescribeAlarms"], resources=["*"]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[f"{self.log_group.log_group_arn}:*"],
            )
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:GetMetricData has no resource-level permissions, and DescribeAlarms returns "
            "composite alarms (the regions' degraded alarms) only when granted on '*'; both only read.",
        )
        log_group_id = stack.resolve(stack.get_logical_id(self.log_group.node.default_child))
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::<{log_group_id}.Arn>:*]",
            "Log streams of the function's own log group, which Lambda names at run time.",
        )
