"""Session Manager on the hosts: an audited session document and least-privilege agent permissions."""

import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from cdk_constructs.host_sessions import SESSION_CHANNEL_ACTIONS, HostSessions, HostSessionsProps
from cdk_constructs.log_encryption import EncryptedLogs, LogProps


@pytest.fixture
def template(stack):
    logs = EncryptedLogs(stack, "Logs", props=LogProps(retention_days=30))
    sessions = HostSessions(
        stack, "Sessions", props=HostSessionsProps(document_name="kit-us-east-1-host"), logs=logs
    )
    role = iam.Role(stack, "HostRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    sessions.grant_agent(role)
    return Template.from_stack(stack)


def test_sessions_are_encrypted_and_streamed_to_an_encrypted_log_group(template):
    document = next(iter(template.find_resources("AWS::SSM::Document").values()))["Properties"]
    assert document["DocumentType"] == "Session" and document["Name"] == "kit-us-east-1-host"
    inputs = document["Content"]["inputs"]
    assert inputs["cloudWatchEncryptionEnabled"] is True and inputs["cloudWatchStreamingEnabled"] is True
    assert inputs["runAsEnabled"] is False
    key = next(iter(template.find_resources("AWS::KMS::Key")))
    assert inputs["kmsKeyId"] == {"Ref": key}
    (group_id, group), *_ = template.find_resources("AWS::Logs::LogGroup").items()
    assert inputs["cloudWatchLogGroupName"] == {"Ref": group_id}
    assert "KmsKeyId" in group["Properties"]


def _statements(template):
    policy = next(iter(template.find_resources("AWS::IAM::Policy").values()))
    return policy["Properties"]["PolicyDocument"]["Statement"]


def _actions(statement):
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else actions


def test_agent_gets_the_session_actions_not_the_managed_policy(template):
    role = next(iter(template.find_resources("AWS::IAM::Role").values()))["Properties"]
    assert "ManagedPolicyArns" not in role  # no AmazonSSMManagedInstanceCore (inventory, patching, params)
    granted = {action for statement in _statements(template) for action in _actions(statement)}
    assert set(SESSION_CHANNEL_ACTIONS) | {"ssm:UpdateInstanceInformation"} <= granted
    assert not any(action.endswith(":*") or action == "*" for action in granted)
    assert not {"ssm:GetParameter", "ssm:SendCommand", "ssm:PutInventory"} & granted


def test_registration_is_scoped_to_instances_and_logging_to_the_session_group(template):
    statements = _statements(template)
    register = next(s for s in statements if "ssm:UpdateInstanceInformation" in _actions(s))
    assert register["Resource"] == "arn:aws:ec2:us-east-1:111111111111:instance/*"
    writes = next(s for s in statements if "logs:PutLogEvents" in _actions(s))
    assert writes["Resource"] == {
        "Fn::GetAtt": [next(iter(template.find_resources("AWS::Logs::LogGroup"))), "Arn"]
    }
    decrypt = next(s for s in statements if "kms:Decrypt" in _actions(s))
    assert "Fn::GetAtt" in decrypt["Resource"]
