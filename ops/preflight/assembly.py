"""The scheduled actions of a synthesized cloud assembly (`make synth` writes cdk.out/): plain data for
checks.py. Their start times are computed at synth, from the clock of that moment, so an assembly kept
and deployed later may carry times that have passed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


class AssemblyError(Exception):
    """A template in the assembly that cannot be read; str() names the file."""


@dataclass(frozen=True)
class ScheduledStart:
    resource: str  # the template's logical id of the group or scalable target
    action: str  # the scheduled action's name (or logical id, for a group's)
    at: datetime


def read_template(directory: Path, stack: str) -> dict[str, Any] | None:
    """The stack's template in the assembly, or None where the assembly has none."""
    path = directory / f"{stack}.template.json"
    if not path.is_file():
        return None
    try:
        template = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise AssemblyError(f"{path}: cannot read the synthesized template: {error}") from None
    if not isinstance(template, dict):
        raise AssemblyError(f"{path}: not a CloudFormation template (a JSON object)")
    return template


def _utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text.removesuffix("Z"))
    return moment.replace(tzinfo=UTC) if moment.utcoffset() is None else moment.astimezone(UTC)


def scheduled_starts(template: dict[str, Any]) -> list[ScheduledStart]:
    """Every one-time scheduled action: the groups' (StartTime) and the scalable targets' (at(...))."""
    found = []
    for logical_id, resource in template.get("Resources", {}).items():
        properties = resource.get("Properties", {})
        if resource.get("Type") == "AWS::AutoScaling::ScheduledAction" and "StartTime" in properties:
            group = properties.get("AutoScalingGroupName")
            owner = group.get("Ref", logical_id) if isinstance(group, dict) else str(group)
            found.append(ScheduledStart(owner, logical_id, _utc(properties["StartTime"])))
        elif resource.get("Type") == "AWS::ApplicationAutoScaling::ScalableTarget":
            for action in properties.get("ScheduledActions", []):
                schedule = action.get("Schedule", "")
                if schedule.startswith("at(") and schedule.endswith(")"):
                    found.append(
                        ScheduledStart(logical_id, action["ScheduledActionName"], _utc(schedule[3:-1]))
                    )
    return sorted(found, key=lambda start: start.at)


# The parameter type CDK's `MachineImage.from_ssm_parameter` declares: CloudFormation resolves the AMI id
# from SSM when the stack is deployed.
SSM_IMAGE_TYPE = "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"


def launch_template_images(template: dict[str, Any]) -> dict[str, str]:
    """Instance type -> what its launch template boots: the SSM parameter name CloudFormation resolves at
    deploy time, or the AMI id where the template names one."""
    parameters = template.get("Parameters", {})
    found = {}
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") != "AWS::EC2::LaunchTemplate":
            continue
        data = resource.get("Properties", {}).get("LaunchTemplateData", {})
        image, instance_type = data.get("ImageId"), data.get("InstanceType")
        if not isinstance(instance_type, str):
            continue
        if isinstance(image, dict) and "Ref" in image:
            parameter = parameters.get(image["Ref"], {})
            if parameter.get("Type") == SSM_IMAGE_TYPE and isinstance(parameter.get("Default"), str):
                found[instance_type] = parameter["Default"]
        elif isinstance(image, str):
            found[instance_type] = image
    return found
