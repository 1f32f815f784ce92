"""Alarm names that carry a digest of what the alarm watches, resolved at synth."""

from __future__ import annotations

from aws_cdk import Fn, Tags
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from aws_cdk.assertions import Template

from cdk_constructs.alarm_names import WatchedAlarm, references
from tests.cdk_constructs.conftest import new_stack


def test_references_finds_the_logical_ids_of_ref_getatt_and_sub():
    expression = {
        "Fn::Select": [6, {"Fn::Split": [":", {"Ref": "TaskDef"}]}],
        "x": [{"Fn::GetAtt": ["Group", "TargetGroupFullName"]}, {"Ref": "AWS::Region"}],
        "y": {"Fn::Sub": "${Repo.Arn}:${Image}-${AWS::AccountId}"},
    }
    assert set(references(expression)) == {"TaskDef", "Group", "AWS::Region", "Repo", "Image"}


def _name(*, environment: str | None = None, description: str = "d", threshold: float = 1) -> str:
    """The name of an alarm on a task definition's revision, the container's variable added after it."""
    stack = new_stack()
    task = ecs.Ec2TaskDefinition(stack, "Task")
    container = task.add_container("serving", image=ecs.ContainerImage.from_registry("x"), memory_limit_mib=8)
    revision = Fn.select(6, Fn.split(":", task.task_definition_arn))
    metric = cloudwatch.Metric(namespace="N", metric_name="M", dimensions_map={"Revision": revision})
    WatchedAlarm(
        stack,
        "Alarm",
        name_prefix="kit-deploy",
        metric=metric,
        threshold=threshold,
        evaluation_periods=1,
        alarm_description=description,
    )
    Tags.of(stack).add("project", description)
    if environment is not None:
        container.add_environment("TARGET", environment)
    (alarm,) = Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm").values()
    return alarm["Properties"]["AlarmName"]


def test_the_task_definition_behind_a_revision_counts_even_what_is_added_after_the_alarm():
    """The revision's expression reads the same for every revision; the task definition's properties do not,
    including a variable a later construct adds (the service adds its target groups')."""
    assert _name() == _name()
    assert _name(environment="a") != _name()
    assert _name(environment="a") != _name(environment="b")


def test_the_threshold_counts_and_words_and_tags_do_not():
    assert _name(threshold=2) != _name()
    assert _name(description="other words") == _name()
