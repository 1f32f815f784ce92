"""SSM Session Manager on the Neuron hosts: a shell for operators without SSH or an open port, audited.

Sessions started with this construct's session document are encrypted with the stack's key and their whole
transcript streams to an encrypted log group; StartSession itself is in CloudTrail. Give operators
`ssm:StartSession` on the hosts and on this document only, so no session runs without the log."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from cdk_constructs.log_encryption import EncryptedLogs
from cdk_constructs.nag import acknowledge

# What SSM Agent calls to register and to carry a session (the Systems Manager guide's agent API list):
# the session channels (ssmmessages) and, for agents before 3.3.40, the message service (ec2messages).
# None of these take a resource ARN, except UpdateInstanceInformation (scoped to instances below).
SESSION_CHANNEL_ACTIONS = (
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
    "ec2messages:AcknowledgeMessage",
    "ec2messages:DeleteMessage",
    "ec2messages:FailMessage",
    "ec2messages:GetEndpoint",
    "ec2messages:GetMessages",
    "ec2messages:SendReply",
)
IDLE_SESSION_MINUTES = 20


@dataclass(frozen=True)
class HostSessionsProps:
    document_name: str  # what operators pass to `aws ssm start-session --document-name`


class HostSessions(Construct):
    def __init__(self, scope: Construct, id: str, *, props: HostSessionsProps, logs: EncryptedLogs) -> None:
        super().__init__(scope, id)
        self._logs = logs
        self.log_group = logs.log_group("SessionLogs")
        self.document = ssm.CfnDocument(
            self,
            "SessionDocument",
            name=props.document_name,
            document_type="Session",
            content={
                "schemaVersion": "1.0",
                "description": "Shell on a serving host, encrypted and logged to CloudWatch Logs",
                "sessionType": "Standard_Stream",
                "inputs": {
                    "cloudWatchLogGroupName": self.log_group.log_group_name,
                    "cloudWatchEncryptionEnabled": True,
                    "cloudWatchStreamingEnabled": True,
                    "kmsKeyId": logs.key.key_id,
                    "idleSessionTimeout": str(IDLE_SESSION_MINUTES),
                    "runAsEnabled": False,
                    "shellProfile": {"linux": "cd /; exec bash -l"},
                },
            },
            update_method="NewVersion",
        )
        self.document_name = props.document_name

    def grant_agent(self, role: iam.IRole) -> None:
        """Let the SSM Agent on hosts with this role register, carry sessions and write their transcript."""
        stack = Stack.of(self)
        # The kit deploys to commercial regions only, where CDK writes the partition out as "aws".
        instances = f"arn:aws:ec2:{stack.region}:{stack.account}:instance/*"
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ssm:UpdateInstanceInformation"], resources=[instances])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(SESSION_CHANNEL_ACTIONS), resources=["*"])
        )
        # The agent checks the group's encryption before streaming to it (DescribeLogGroups takes no ARN).
        role.add_to_principal_policy(iam.PolicyStatement(actions=["logs:DescribeLogGroups"], resources=["*"]))
        self.log_group.grant(role, "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents")
        self._logs.key.grant(role, "kms:Decrypt", "kms:GenerateDataKey")
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{instances}]",
            "SSM Agent reports for the instance it runs on; an instance's id is not known when its role is "
            "made, so the role names the account's instances in this region.",
        )
