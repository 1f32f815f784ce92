"""Access to the model weights and compiled Neuron artifacts in S3: the serving tasks read them; the compile
task (`make compile`) also writes the compiled artifacts, and nothing else."""

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


# Where compiled artifacts go under the region's prefix (stacks/props.py COMPILED_ARTIFACTS_S3_URI).
COMPILED_FOLDER = "compiled"


class ModelStoreAccess(Construct):
    """The task role: it may list and read the configured prefix and nothing else in S3. The compile task
    role: the same reads, and writes under `compiled/` alone. Each fleet's compile task definition holds it
    (cdk_constructs/fleet/task_definition.py CompileTaskDefinition, which `make compile` runs), so serving
    hosts can never overwrite the artifacts other hosts load."""

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
        self.compile_task_role = iam.Role(
            self,
            "CompileTaskRole",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description="make compile: reads the weights, writes compiled Neuron artifacts",
        )
        for role in (self.task_role, self.compile_task_role):
            role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[objects]))
            list_statement = iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket_arn])
            if props.prefix:
                list_statement.add_condition("StringLike", {"s3:prefix": [props.prefix, f"{props.prefix}/*"]})
            role.add_to_policy(list_statement)
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::{objects.replace(partition, '<AWS::Partition>')}]",
                "Weights and compiled artifacts are many objects under one configured prefix; the wildcard "
                "covers that prefix only, read-only.",
            )
        compiled = (
            f"{bucket_arn}/{props.prefix}/{COMPILED_FOLDER}/*"
            if props.prefix
            else (f"{bucket_arn}/{COMPILED_FOLDER}/*")
        )
        # PutObject covers a multipart upload's create, parts and completion (S3 user guide, "Multipart
        # upload API and permissions"); boto3's upload_file switches to it past 8 MB, as NEFFs are.
        self.compile_task_role.add_to_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[compiled])
        )
        acknowledge(
            self.compile_task_role,
            f"AwsSolutions-IAM5[Resource::{compiled.replace(partition, '<AWS::Partition>')}]",
            "A compile writes one key's many artifact files under compiled/; the wildcard covers that folder "
            "only, and only the compile task holds it.",
        )
        self.objects_arn = objects
