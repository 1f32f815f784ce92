"""The region's ECS cluster, with Container Insights for per-service task and resource metrics, and the
audited ECS Exec configuration when operators may exec into the serving containers."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from constructs import Construct

from cdk_constructs.log_encryption import EncryptedLogs


@dataclass(frozen=True)
class ClusterProps:
    ecs_exec: bool = False


class ServingCluster(Construct):
    def __init__(
        self, scope: Construct, id: str, *, props: ClusterProps, vpc: ec2.IVpc, logs: EncryptedLogs
    ) -> None:
        super().__init__(scope, id)
        self.props = props
        # Every exec session is encrypted with the stack's key and its whole input and output is written to
        # an encrypted log group (the command itself is in CloudTrail as ecs:ExecuteCommand).
        self.exec_log_group = logs.log_group("ExecLogs") if props.ecs_exec else None
        execute_command = (
            ecs.ExecuteCommandConfiguration(
                kms_key=logs.key,
                logging=ecs.ExecuteCommandLogging.OVERRIDE,
                log_configuration=ecs.ExecuteCommandLogConfiguration(
                    cloud_watch_log_group=self.exec_log_group, cloud_watch_encryption_enabled=True
                ),
            )
            if self.exec_log_group
            else None
        )
        # Enhanced insights publish RunningTaskCount per service, which the fleets' alarms watch.
        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            vpc=vpc,
            container_insights_v2=ecs.ContainerInsights.ENHANCED,
            execute_command_configuration=execute_command,
        )
