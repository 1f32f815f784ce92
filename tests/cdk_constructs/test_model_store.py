import pytest
from aws_cdk.assertions import Template

from cdk_constructs.model_store import ModelStoreAccess, ModelStoreProps


def _statements(template, role_id_part: str = "TaskRole"):
    """The statements of the serving task role's policies (the compile task role, beside it, also writes)."""
    policies = template.find_resources("AWS::IAM::Policy")
    return [
        s
        for policy in policies.values()
        if any(role_id_part in r["Ref"] and "Compile" not in r["Ref"] for r in policy["Properties"]["Roles"])
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _flat(value):
    """An Fn::Join'ed ARN as one string, the partition shown as <partition>."""
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join("<partition>" if isinstance(p, dict) else p for p in value["Fn::Join"][1])
    return value


@pytest.fixture
def template(stack):
    ModelStoreAccess(stack, "Store", props=ModelStoreProps(bucket="weights-bucket", prefix="llama/v1"))
    return Template.from_stack(stack)


def test_task_role_is_assumable_by_ecs_tasks_only(template):
    role = next(iter(template.find_resources("AWS::IAM::Role").values()))
    principals = [s["Principal"] for s in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]]
    assert principals == [{"Service": "ecs-tasks.amazonaws.com"}]


def test_task_role_reads_only_objects_under_the_configured_prefix(template):
    statements = _statements(template)
    assert {s["Action"] for s in statements} == {"s3:GetObject", "s3:ListBucket"}
    get = next(s for s in statements if s["Action"] == "s3:GetObject")
    assert _flat(get["Resource"]) == "arn:<partition>:s3:::weights-bucket/llama/v1/*"


def test_listing_is_limited_to_the_prefix(template):
    listing = next(s for s in _statements(template) if s["Action"] == "s3:ListBucket")
    assert _flat(listing["Resource"]) == "arn:<partition>:s3:::weights-bucket"
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["llama/v1", "llama/v1/*"]}}


def test_whole_bucket_when_no_prefix(stack):
    ModelStoreAccess(stack, "Store", props=ModelStoreProps(bucket="weights-bucket", prefix=""))
    statements = _statements(Template.from_stack(stack))
    get = next(s for s in statements if s["Action"] == "s3:GetObject")
    assert _flat(get["Resource"]) == "arn:<partition>:s3:::weights-bucket/*"
    assert "Condition" not in next(s for s in statements if s["Action"] == "s3:ListBucket")
