"""Edits of a synthesized assembly that the game-day tests share: a copy with one stack's template changed,
and the changes themselves that more than one test module makes."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

Resources = dict


def edited(assembly: Path, folder: Path, edit: Callable[[Resources], None], stack: str) -> Path:
    """A copy of the assembly under `folder` with `edit(resources)` applied to one stack's template (a
    region's, `us-west-2`, or a cell's, `us-east-1-cell2`); assets are left out, the twin reads none."""
    copy = folder / "cdk.out"
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(assembly, copy, ignore=shutil.ignore_patterns("asset.*"))
    path = copy / f"shopping-assistant-{stack}.template.json"
    template = json.loads(path.read_text())
    edit(template["Resources"])
    path.write_text(json.dumps(template))
    return copy


def without_deregister_targets_grant(resources: Resources) -> None:
    """The task role's statements without the one that lets a host take its own target out of its groups."""
    for resource in resources.values():
        if resource["Type"] == "AWS::IAM::Policy":
            document = resource["Properties"]["PolicyDocument"]
            document["Statement"] = [
                s for s in document["Statement"] if s["Action"] != "elasticloadbalancing:DeregisterTargets"
            ]
