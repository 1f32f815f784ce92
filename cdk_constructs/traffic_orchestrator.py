"""The traffic orchestrator: a Python Lambda on a one-minute schedule, with the least IAM it needs.

Its code is a plain folder (`orchestrator/`), staged as an asset with no build step, so synth needs no
Docker and no network; Powertools comes from AWS's public layer, found at deploy time through the SSM
parameter Powertools publishes per version (the same version the tests run), and boto3 from the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from cdk_constructs.log_encryption import EncryptedLogs, LogProps
from cdk_constructs.nag import acknowledge

RUNTIME = lambda_.Runtime.PYTHON_3_14
POWERTOOLS_PARAMETER = "/aws/service/powertools/python/x86_64/python3.14/{version}"
HANDLER = "routing.handler.handler"
# Lambda's shortest maximum event age (AWS::Lambda::EventInvokeConfig, 60-21600 s): a run queued longer
# (throttled behind the one allowed run) is dropped, the next scheduled one reads fresher minutes.
MAX_EVENT_AGE = Duration.seconds(60)
# What the handler reads its config and run lock from (orchestrator/routing/config_source.py, run_lock.py).
CONFIG_PARAMETER_VARIABLE = "ORCHESTRATOR_CONFIG_PARAMETER"
CONFIG_DIGEST_VARIABLE = "ORCHESTRATOR_CONFIG_SHA256"
LOCK_TABLE_VARIABLE = "ORCHESTRATOR_LOCK_TABLE"
LOCK_KEY_ATTRIBUTE = "lock"
# SSM Parameter Store: 4 KB values in the standard tier, 8 KB in the advanced one (priced).
STANDARD_PARAMETER_BYTES = 4096
ADVANCED_PARAMETER_BYTES = 8192


def parameter_tier(value: str) -> str:
    """The cheapest tier that holds the value; ValueError past the advanced tier's 8 KB."""
    size = len(value.encode("utf-8"))
    if size <= STANDARD_PARAMETER_BYTES:
        return "Standard"
    if size <= ADVANCED_PARAMETER_BYTES:
        return "Advanced"
    raise ValueError(
        f"the orchestrator's config is {size:,} bytes encoded, above SSM's {ADVANCED_PARAMETER_BYTES:,}-byte "
        "advanced parameters: fewer cells or regions per global stack"
    )


@dataclass(frozen=True)
class RegionReads:
    """What the orchestrator reads in one region."""

    region: str
    parameters: tuple[str, ...]  # SSM parameter names (the region's endpoint and health check)


@dataclass(frozen=True)
class OrchestratorProps:
    code_directory: str
    # routing.config.OrchestratorConfig as the Lambda reads it from SSM (config_source.encode), the
    # parameter's name (versioned: it holds the config's digest) and the JSON's SHA-256.
    config_value: str
    config_parameter: str
    config_sha256: str
    routing_metrics_namespace: str  # where it publishes each region's weight
    hosted_zone_id: str
    record_name: str  # the one client-facing name whose records it may change
    reads: tuple[RegionReads, ...]
    state_parameter: str  # written by the orchestrator alone
    override_parameter: str  # written by operators (`make traffic`)
    powertools_version: str
    log_retention_days: int
    alarm_email: str | None = None  # subscribed to the orchestrator's alarm topic
    alarm_topic_arn: str | None = None  # the operator's own topic in this region, notified too
    # Reserved concurrency 1 on top of the run lock, for accounts that can spare it (the preflight says).
    reserved_concurrency: bool = False


class TrafficOrchestrator(Construct):
    def __init__(self, scope: Construct, id: str, *, props: OrchestratorProps) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.logs = EncryptedLogs(self, "Encryption", props=LogProps(retention_days=props.log_retention_days))
        self.log_group = self.logs.log_group("Logs")
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Traffic orchestrator: read region signals, change the weighted records",
        )
        self.config_parameter = ssm.CfnParameter(
            self,
            "Config",
            name=props.config_parameter,
            type="String",
            value=props.config_value,
            tier=parameter_tier(props.config_value),
            description="Traffic orchestrator config (zlib+base64 JSON), written by each deploy",
        )
        # One run at a time, in any account: a lease taken with a conditional write (run_lock.py). The item
        # lives a minute; nothing in the table outlives the run that wrote it.
        self.lock_table = dynamodb.Table(
            self,
            "RunLock",
            partition_key=dynamodb.Attribute(name=LOCK_KEY_ATTRIBUTE, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="expires_at",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=RemovalPolicy.DESTROY,
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
            # Shorter than the schedule; one run at a time (the run lock, and reserved concurrency where the
            # account can spare it), so two runs never overlap even when a delivery is late or repeated.
            timeout=Duration.seconds(50),
            reserved_concurrent_executions=1 if props.reserved_concurrency else None,
            description="Moves Route 53 weights between regions from their health and spare capacity",
            environment={
                CONFIG_PARAMETER_VARIABLE: props.config_parameter,
                CONFIG_DIGEST_VARIABLE: props.config_sha256,
                LOCK_TABLE_VARIABLE: self.lock_table.table_name,
                "POWERTOOLS_METRICS_NAMESPACE": props.routing_metrics_namespace,
                "POWERTOOLS_SERVICE_NAME": "traffic-orchestrator",
            },
        )
        # CDK makes the function depend on both the role and its policy; the role is already referenced
        # (cfn-lint W3005), the policy must stay so the first run has its permissions, and the config
        # parameter must exist before the first run reads it (the environment holds only its name).
        policy = self.role.node.find_child("DefaultPolicy").node.default_child
        self.function.node.default_child.add_override(
            "DependsOn", [stack.get_logical_id(policy), stack.get_logical_id(self.config_parameter)]
        )
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
        # EventBridge's own retries are off above; Lambda's asynchronous invocation has its own (2, for up
        # to 6 hours by default): none, and no event older than a minute (Lambda developer guide,
        # "Configuring error handling for asynchronous invocation").
        self.function.configure_async_invoke(retry_attempts=0, max_event_age=MAX_EVENT_AGE)
        self._alarms(props)

    def _alarms(self, props: OrchestratorProps) -> None:
        """Silence is a failure too: errors, throttled runs and runs that did not happen all notify."""
        self.logs.allow_alarm_notifications()
        self.topic = sns.Topic(self, "AlarmTopic", master_key=self.logs.key, enforce_ssl=True)
        if props.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(props.alarm_email))
        minute = Duration.minutes(1)
        at_least_once = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        self.failing_alarm = self._three_of_five(
            "Failing",
            "The traffic orchestrator failed in 3 of the last 5 minutes: weights frozen "
            "(Route 53 health checks still fail regions out). Its log has one 'run failed' line per failure.",
            self.function.metric_errors(period=minute, statistic="Sum"),
            at_least_once,
            # No invocation is the NotRunning alarm's concern.
            cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.throttled_alarm = self._three_of_five(
            "Throttled",
            "Traffic orchestrator runs throttled in 3 of the last 5 minutes: a run took "
            "longer than a minute (one run at a time), so scheduled runs were dropped",
            self.function.metric_throttles(period=minute, statistic="Sum"),
            at_least_once,
            cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.not_running_alarm = self._three_of_five(
            "NotRunning",
            "The traffic orchestrator was not invoked in 3 of the last 5 minutes (schedule "
            "disabled or deleted, function throttled or removed): weights frozen",
            self.function.metric_invocations(period=minute, statistic="Sum"),
            cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            # No datapoint is no invocation: the very thing this alarm is for.
            cloudwatch.TreatMissingData.BREACHING,
        )
        self.alarms = (self.failing_alarm, self.throttled_alarm, self.not_running_alarm)
        topics = [self.topic]
        if props.alarm_topic_arn:
            topics.append(sns.Topic.from_topic_arn(self, "PagerTopic", props.alarm_topic_arn))
        for alarm in self.alarms:
            for topic in topics:
                alarm.add_alarm_action(cloudwatch_actions.SnsAction(topic))
                alarm.add_ok_action(cloudwatch_actions.SnsAction(topic))
        # The topic's policy replaces SNS's default one (enforce_ssl), so CloudWatch must be allowed to
        # publish explicitly: for these alarms, from this account.
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarms",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": [alarm.alarm_arn for alarm in self.alarms]},
                },
            )
        )

    def _three_of_five(
        self,
        construct_id: str,
        description: str,
        metric: cloudwatch.IMetric,
        comparison: cloudwatch.ComparisonOperator,
        missing: cloudwatch.TreatMissingData,
    ) -> cloudwatch.Alarm:
        """An alarm on one count per minute against 1, in 3 of the last 5 minutes."""
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_description=description,
            metric=metric,
            threshold=1,
            comparison_operator=comparison,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            treat_missing_data=missing,
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
        config = stack.format_arn(
            service="ssm", resource="parameter", resource_name=props.config_parameter.lstrip("/")
        )
        self.role.add_to_policy(iam.PolicyStatement(actions=["ssm:GetParameter"], resources=[config]))
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["dynamodb:PutItem", "dynamodb:DeleteItem"], resources=[self.lock_table.table_arn]
            )
        )
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
