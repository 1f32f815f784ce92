from aws_cdk.assertions import Template

from cdk_constructs.log_encryption import RETENTION_DAYS, EncryptedLogs, LogProps, retention_at_least


def test_retention_rounds_up_to_the_next_period_cloudwatch_accepts():
    assert retention_at_least(30).name == "ONE_MONTH"
    assert retention_at_least(31).name == "TWO_MONTHS"
    assert retention_at_least(1).name == "ONE_DAY"
    assert retention_at_least(10**6).name == "TEN_YEARS"


def test_every_retention_period_maps_to_its_own_enum_member():
    names = {retention_at_least(days).name for days in RETENTION_DAYS}
    assert len(names) == len(RETENTION_DAYS)


def test_log_groups_are_encrypted_with_the_rotating_key(stack):
    logs = EncryptedLogs(stack, "Logs", props=LogProps(retention_days=45))
    logs.log_group("One")
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    key_id = stack.resolve(logs.key.node.default_child.logical_id)
    template.has_resource_properties(
        "AWS::Logs::LogGroup", {"KmsKeyId": {"Fn::GetAtt": [key_id, "Arn"]}, "RetentionInDays": 60}
    )


def test_key_lets_cloudwatch_logs_use_it_only_for_this_accounts_log_groups(stack):
    EncryptedLogs(stack, "Logs", props=LogProps(retention_days=30))
    key = next(iter(Template.from_stack(stack).find_resources("AWS::KMS::Key").values()))
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    logs_statement = next(
        s for s in statements if s["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    )
    arn = logs_statement["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]["Fn::Join"][1]
    assert arn[-1] == ":logs:us-east-1:111111111111:log-group:*"
    assert not any(a in ("kms:*", "kms:Delete*", "kms:PutKeyPolicy") for a in logs_statement["Action"])
