"""One synthesized app of the default config per test session: every stack test reads the same assembly."""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("CDK_VALIDATION", "false")  # cfn-lint runs on the templates in test_checks.py
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import (
    App,
    cx_api,
)

from orchestrator.routing.config import OrchestratorConfig
from orchestrator.routing.config_source import DIGEST_VARIABLE, PARAMETER_VARIABLE, decode
from settings import Settings, load_settings
from stacks.props import global_stack_name
from stacks.routing_names import stack_name
from stacks.serving_app import build_app

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO / "config" / "default.yaml"
# The Prime Day overlay with every operations and network switch turned the other way: what the default
# config's templates do not exercise (no NAT, no endpoints, operator access, no WAF, regional replicas).
SWITCHED_OVERLAY = """\
base: {base}
operations: {{session_manager: true, ecs_exec: true}}
load_balancer: {{deletion_protection: false, waf: {{enabled: false}}}}
regions:
  us-east-1:
    nat_gateways: 0
  us-west-2:
    nat_gateways: 1
    interface_endpoints: false
  us-east-2:
    nat_gateways: 0
    artifacts_s3_uri: s3://replica-us-east-2/llama-8b-instruct/
    image_uris:
      inf2: 123456789012.dkr.ecr.us-east-2.amazonaws.com/serving:inf2
      trn1: 123456789012.dkr.ecr.us-east-2.amazonaws.com/serving:trn1
"""


@pytest.fixture(scope="session")
def settings() -> Settings:
    return load_settings(DEFAULT_CONFIG)


@pytest.fixture(scope="session")
def synthesized(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> tuple[App, cx_api.CloudAssembly]:
    app = build_app(settings, outdir=str(tmp_path_factory.mktemp("cdk.out")))
    return app, app.synth()


@pytest.fixture(scope="session")
def switched_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    path = tmp_path_factory.mktemp("config") / "switched.yaml"
    path.write_text(SWITCHED_OVERLAY.format(base=REPO / "config" / "prime-day.yaml"))
    return load_settings(path)


@pytest.fixture(scope="session")
def switched(
    switched_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> tuple[App, cx_api.CloudAssembly]:
    app = build_app(switched_settings, outdir=str(tmp_path_factory.mktemp("cdk.out")))
    return app, app.synth()


@pytest.fixture(scope="session")
def switched_templates(
    switched_settings: Settings, switched: tuple[App, cx_api.CloudAssembly]
) -> dict[str, dict[str, Any]]:
    """Region -> that region's serving template (its first cell's), switched."""
    _, assembly = switched
    return first_cells(switched_settings, assembly)


@pytest.fixture(scope="session")
def templates(settings: Settings, synthesized: tuple[App, cx_api.CloudAssembly]) -> dict[str, dict[str, Any]]:
    """Region -> that region's synthesized serving template."""
    _, assembly = synthesized
    return first_cells(settings, assembly)


def first_cells(settings: Settings, assembly: cx_api.CloudAssembly) -> dict[str, dict[str, Any]]:
    """Region -> the template of its first cell (the region's own stack name)."""
    names = {stack_name(settings, region): region for region in settings.regions}
    return {names[s.stack_name]: s.template for s in assembly.stacks if s.stack_name in names}


def cell_templates(settings: Settings, assembly: cx_api.CloudAssembly) -> dict[str, dict[str, Any]]:
    """Cell name (`us-east-1/2`, or the region for a one-cell region) -> its stack's template."""
    by_stack = {stack.stack_name: stack.template for stack in assembly.stacks}
    return {cell.name: by_stack[stack_name(settings, cell.region, cell.index)] for cell in settings.all_cells}


@pytest.fixture(scope="session")
def global_template(settings: Settings, synthesized: tuple[App, cx_api.CloudAssembly]) -> dict[str, Any]:
    _, assembly = synthesized
    return assembly.get_stack_by_name(global_stack_name(settings)).template


def resources(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def deployed_orchestrator_config(template: dict[str, Any]) -> OrchestratorConfig:
    """The orchestrator's config as the global template deploys it: the SSM parameter its function's
    environment names, checked against the digest beside it (what the Lambda does at its cold start)."""
    (function,) = [
        f["Properties"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if PARAMETER_VARIABLE in f["Properties"].get("Environment", {}).get("Variables", {})
    ]
    environment = function["Environment"]["Variables"]
    assert "ORCHESTRATOR_CONFIG" not in environment  # the config itself is not in the environment
    (parameter,) = [
        p["Properties"]
        for p in resources(template, "AWS::SSM::Parameter").values()
        if p["Properties"]["Name"] == environment[PARAMETER_VARIABLE]
    ]
    return decode(parameter["Value"], environment[DIGEST_VARIABLE], parameter["Name"])


def keys(value: Any):
    """Every mapping key anywhere in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from keys(item)


def scheduled_bounds(template: dict[str, Any]) -> dict[str, list[tuple[str, int, int]]]:
    """Scalable target or Auto Scaling group -> its deployed (min, max) then every scheduled change, as
    (start time, min, max) in time order: what the bounds are from each moment on."""
    found: dict[str, list[tuple[str, int, int]]] = {}
    for name, target in resources(template, "AWS::ApplicationAutoScaling::ScalableTarget").items():
        properties = target["Properties"]
        found[name] = [("deploy", int(properties["MinCapacity"]), int(properties["MaxCapacity"]))]
        actions = properties.get("ScheduledActions", [])
        found[name] += sorted(
            (
                action["Schedule"].removeprefix("at(").removesuffix(")"),
                int(action["ScalableTargetAction"]["MinCapacity"]),
                int(action["ScalableTargetAction"]["MaxCapacity"]),
            )
            for action in actions
        )
    for name, group in resources(template, "AWS::AutoScaling::AutoScalingGroup").items():
        properties = group["Properties"]
        found[name] = [("deploy", int(properties["MinSize"]), int(properties["MaxSize"]))]
    changes: list[tuple[str, str, int, int]] = []
    for action in resources(template, "AWS::AutoScaling::ScheduledAction").values():
        properties = action["Properties"]
        changes.append(
            (
                properties["AutoScalingGroupName"]["Ref"],
                properties["StartTime"].removesuffix("Z"),
                int(properties["MinSize"]),
                int(properties["MaxSize"]),
            )
        )
    for group, *change in sorted(changes):
        found[group].append(tuple(change))  # type: ignore[arg-type]
    return found


def lowered_together(template: dict[str, Any]) -> list[tuple[str, str]]:
    """(resource, time) of every scheduled change that lowers a maximum at the same time as a minimum:
    Application Auto Scaling and the capacity provider scale in to a lowered maximum at once."""
    cuts = []
    for name, steps in scheduled_bounds(template).items():
        for (_, low, high), (at, new_low, new_high) in pairwise(steps):
            if new_low < low and new_high < high:
                cuts.append((name, at))
    return cuts


@pytest.fixture(scope="session")
def cells_settings() -> Settings:
    """Prime Day as shipped: three regions, us-east-1 split into two cells by `make plan`."""
    return load_settings(REPO / "config" / "prime-day.yaml")


@pytest.fixture(scope="session")
def cells(
    cells_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> tuple[App, cx_api.CloudAssembly]:
    app = build_app(cells_settings, outdir=str(tmp_path_factory.mktemp("cdk.out")))
    return app, app.synth()
