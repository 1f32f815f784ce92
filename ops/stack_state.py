"""What CloudFormation left a stack as after a failed deploy, read rather than assumed: a failed first
creation, a rollback that itself failed and an update rolled back each need a different next step.
Statuses as the CloudFormation API reference lists them (Stack.StackStatus)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

NOT_CREATED = "NOT_CREATED"  # DescribeStacks: "Stack with id X does not exist"

_NEXT_STEP = {
    "UPDATE_ROLLBACK_COMPLETE": "CloudFormation rolled it back to the version before",
    "ROLLBACK_COMPLETE": (
        "its first creation failed and was rolled back; CloudFormation keeps the empty stack, which must be "
        "deleted before it can be created again: `aws cloudformation delete-stack --stack-name {stack}`"
    ),
    "ROLLBACK_FAILED": (
        "its first creation failed AND its rollback failed: resources are left in place; read the stack's "
        "events, remove what blocks (e.g. a load balancer's deletion protection), then delete the stack"
    ),
    "UPDATE_ROLLBACK_FAILED": (
        "the update failed AND its rollback failed: the stack is stuck; read its events, fix what blocks, "
        "then `aws cloudformation continue-update-rollback --stack-name {stack}`"
    ),
    "DELETE_FAILED": "a delete of it failed; read its events",
    NOT_CREATED: "it was never created (the failure came before CloudFormation started)",
}


def end_state(stack: str, status: str, reason: str = "") -> str:
    """One line for the stop report: the status and what it means for the next step."""
    if status.endswith("_IN_PROGRESS"):
        meaning = "still in progress: the CLI stopped watching it; wait for it to end before anything else"
    elif status in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
        meaning = "the stack itself deployed; the CLI failed after it"
    else:
        meaning = _NEXT_STEP.get(status, "read the stack's events").format(stack=stack)
    because = f" ({reason})" if reason else ""
    return f"CloudFormation status {status}{because}: {meaning}"


def stack_status(cloudformation: Any, stack: str) -> tuple[str, str]:
    """(StackStatus, StackStatusReason), or NOT_CREATED when no such stack exists."""
    try:
        found = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        if "does not exist" in str(error.response.get("Error", {}).get("Message", "")):
            return NOT_CREATED, ""
        raise
    if not found:
        return NOT_CREATED, ""
    return found[0]["StackStatus"], found[0].get("StackStatusReason", "")


def stack_alarms(cloudwatch: Any, stack: str) -> tuple[str, ...]:
    """The names of the stack's alarms that it does not name itself: CloudFormation names such a resource
    `<stack name>-<logical id>-<random suffix>` (CloudFormation user guide, "Name type"), so they share the
    stack's name as a prefix."""
    names = []
    for page in cloudwatch.get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=f"{stack}-", AlarmTypes=["CompositeAlarm", "MetricAlarm"]
    ):
        names += [
            alarm["AlarmName"] for kind in ("MetricAlarms", "CompositeAlarms") for alarm in page.get(kind, [])
        ]
    return tuple(sorted(names))
