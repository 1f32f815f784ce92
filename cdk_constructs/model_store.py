"""Read access to the model weights and compiled Neuron artifacts in S3, for the serving tasks alone."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_constructs.nag import acknowledge


@dataclass(frozen=True)
class ModelStoreProps:
    bucket: str
    prefix: str  # no leading or trailing slash; "" means the whole bucket


class ModelStoreAccess(Construct):
    """The task role: it may list and read the configured prefix and nothing else in S3."""

    def __init__(self, scope: Construct, id: str, *, props: ModelStoreProps) -> None:
        super().__init__(scope, id)
        partition = Aws.PARTITION
        bucket_arn = f"arn:{partition}:s3:::{props.bucket}"
        objects = f"{bucket_arn}/{props.prefix}/*" if props.prefix else f"{bucket_arn}/*"
        self.task_role = iam.Role(
            self,
            "TaskRole",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description="Serving task: reads model weights and compiled Neuron artifacts",
        )
        self.task_role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[objects]))
        list_statement = iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket_arn])
        if props.prefix:
            list_statement.add_condition("StringLike", {"s3:prefix": [props.prefix, f"{props.prefix}/*"]})
        self.task_role.add_to_policy(list_statement)
        self.objects_arn = objects
        acknowledge(
            self.task_role,
            f"AwsSolutions-IAM5[Resource::{objects.replace(partition, '<AWS::Partition>')}]",
            "Weights and compiled artifacts are many objects under one configured prefix; the wildcard "
            "covers that prefix only, read-only.",
        )
