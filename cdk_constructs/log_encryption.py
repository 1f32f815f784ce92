"""One customer-managed KMS key per stack for every log group and alarm topic it creates."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import ArnFormat, Aws, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

# CloudWatch Logs accepts only these retention periods (days); a configured value is rounded up to the next.
RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)


def retention_at_least(days: int) -> logs.RetentionDays:
    """The shortest CloudWatch Logs retention that keeps logs at least `days` days."""
    allowed = next((value for value in RETENTION_DAYS if value >= days), RETENTION_DAYS[-1])
    # The enum lists the same periods in the same order, then INFINITE.
    return dict(zip(RETENTION_DAYS, logs.RetentionDays, strict=False))[allowed]


@dataclass(frozen=True)
class LogProps:
    retention_days: int


class EncryptedLogs(Construct):
    """Owns the key; `log_group()` hands out log groups encrypted with it."""

    def __init__(self, scope: Construct, id: str, *, props: LogProps) -> None:
        super().__init__(scope, id)
        self._props = props
        self.key = kms.Key(
            self,
            "Key",
            description="Encrypts the serving stack's logs and alarm notifications",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.DESTROY,
        )
        region = Stack.of(self).region
        # CloudWatch Logs encrypts with the key on the log groups' behalf, only for this account's log groups.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{region}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": Stack.of(self).format_arn(
                            service="logs",
                            resource="log-group",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            )
        )

    def allow_alarm_notifications(self) -> None:
        """Let CloudWatch encrypt alarm notifications to a topic under this key, for this account's alarms
        only; without it alarm notifications to the encrypted topic are dropped silently."""
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )

    def log_group(self, id: str, *, log_group_name: str | None = None) -> logs.LogGroup:
        """A log group under this key; a name only where a service requires one (WAF's aws-waf-logs-)."""
        return logs.LogGroup(
            self,
            id,
            log_group_name=log_group_name,
            encryption_key=self.key,
            retention=retention_at_least(self._props.retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
