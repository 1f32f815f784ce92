"""The global routing stack of the default config: what it holds, what it must never hold, and its IAM."""

from __future__ import annotations

import json
import re

from aws_cdk import App
from syrupy.extensions.json import JSONSnapshotExtension

from settings import load_settings
from settings.aws_limits import LAMBDA_ENVIRONMENT_BYTES, SSM_ADVANCED_VALUE_BYTES, SSM_STANDARD_VALUE_BYTES
from settings.aws_rules import DESCRIBE_ALARMS_COMPOSITES_NEED_STAR, describe_alarms_sees_composites
from stacks.global_routing import GlobalRouting
from stacks.props import POWERTOOLS_VERSION
from stacks.routing_names import orchestrator_config, powertools_layer_parameter
from stacks.serving_app import app_context
from tests.stacks.conftest import REPO, deployed_orchestrator_config, resources

ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def _function(template):
    (function,) = resources(template, "AWS::Lambda::Function").values()
    return function["Properties"]


def _text(value) -> str:
    """An ARN as a string, whether the template writes it out or joins it with the partition."""
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(part for part in value["Fn::Join"][1] if isinstance(part, str))
    return value


def _statements(template):
    (policy,) = resources(template, "AWS::IAM::Policy").values()
    return policy["Properties"]["PolicyDocument"]["Statement"]


def test_no_record_or_health_check_in_the_template_so_no_deploy_resets_weights(global_template):
    """The orchestrator owns the weighted records; the regional stacks own the health checks."""
    types = {resource["Type"] for resource in global_template["Resources"].values()}
    assert not {t for t in types if t.startswith("AWS::Route53::")}
    # State and override are written at run time only; the one parameter is the orchestrator's config.
    (parameter,) = resources(global_template, "AWS::SSM::Parameter").values()
    assert "/routing/config-" in parameter["Properties"]["Name"]


def test_no_reference_to_any_regional_stack(global_template):
    text = json.dumps(global_template)
    assert "Fn::ImportValue" not in text
    assert not [r for r in global_template["Resources"].values() if "CrossRegion" in r["Type"]]


def test_the_orchestrator_gets_the_config_the_settings_describe(settings, global_template):
    environment = _function(global_template)["Environment"]["Variables"]
    assert deployed_orchestrator_config(global_template) == orchestrator_config(settings)
    assert environment["POWERTOOLS_METRICS_NAMESPACE"] == f"{settings.project}/Routing"


def test_powertools_comes_from_the_public_layer_of_the_pinned_version(global_template):
    function = _function(global_template)
    assert function["Handler"] == "routing.handler.handler"
    assert function["Runtime"] == "python3.14"
    (parameter,) = [p for name, p in global_template["Parameters"].items() if "powertools" in name.lower()]
    assert parameter["Default"] == f"/aws/service/powertools/python/x86_64/python3.14/{POWERTOOLS_VERSION}"
    # The parameter `make preflight` checks in the orchestrator's region is the one the stack resolves.
    assert parameter["Default"] == powertools_layer_parameter()
    pinned = (REPO / "requirements-dev.txt").read_text()
    assert f"aws-lambda-powertools=={POWERTOOLS_VERSION}" in pinned
    assert function["Timeout"] < 60  # runs never overlap on the one-minute schedule


def test_runs_every_minute_without_retries(global_template):
    (rule,) = resources(global_template, "AWS::Events::Rule").values()
    assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    (target,) = rule["Properties"]["Targets"]
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0


def test_route53_changes_are_limited_to_the_one_name_in_the_one_zone(settings, global_template):
    statements = _statements(global_template)
    actions = {
        a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert not [a for a in actions if a.endswith(":*") or a == "*"]
    (change,) = [s for s in statements if s["Action"] == "route53:ChangeResourceRecordSets"]
    assert settings.tls.hosted_zone_id in json.dumps(change["Resource"])
    condition = change["Condition"]["ForAllValues:StringEquals"]
    assert condition["route53:ChangeResourceRecordSetsNormalizedRecordNames"] == [settings.tls.domain_name]


def test_writes_only_its_own_state_parameter(settings, global_template):
    (put,) = [s for s in _statements(global_template) if s["Action"] == "ssm:PutParameter"]
    assert _text(put["Resource"]).endswith(f":parameter/{settings.project}/routing/state")


def test_reads_each_regions_published_parameters_in_that_region(settings, global_template):
    (read,) = [s for s in _statements(global_template) if "ssm:GetParameters" in s["Action"]]
    text = json.dumps(read["Resource"])
    for region in settings.regions:
        assert f":ssm:{region}:" in text
        assert f"parameter/{settings.project}/{region}/serving-endpoint" in text


def test_the_fleet_dashboard_shows_every_region_side_by_side(settings, global_template):
    (dashboard,) = resources(global_template, "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    text = (
        "".join(part for part in body["Fn::Join"][1] if isinstance(part, str)) if "Fn::Join" in body else body
    )
    for title in ("Output tokens per minute", "Time to first token p99", "Hosts per instance type", "weight"):
        assert title in text
    for region in settings.regions:
        assert (
            f'"OutputTokens","Model","{settings.model.name}",{{"label":"{region}","region":"{region}"' in text
        )
        assert f'"RegionWeight","Region","{region}"' in text
        for fleet in settings.regions[region].fleets:
            assert f'"label":"{region} {fleet.instance_type}"' in text


def test_global_stack_matches_snapshot(global_template, snapshot):
    normalized = json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(global_template, sort_keys=True)))
    assert normalized == snapshot.use_extension(JSONSnapshotExtension)


def test_alarm_reads_are_granted_on_star_because_composite_alarms_need_it(global_template):
    """The orchestrator drains on each region's region-unfit composite alarm."""
    rule = DESCRIBE_ALARMS_COMPOSITES_NEED_STAR
    assert describe_alarms_sees_composites({"Statement": _statements(global_template)}), rule.source
    (reads,) = [s for s in _statements(global_template) if "cloudwatch:DescribeAlarms" in s["Action"]]
    assert set(reads["Action"]) == {"cloudwatch:DescribeAlarms", "cloudwatch:GetMetricData"}


EIGHT_REGIONS = (
    "us-east-1",
    "us-east-2",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-northeast-1",
    "ap-southeast-2",
    "eu-north-1",
)


def test_eight_regions_of_three_cells_deploy_within_lambda_and_ssm_limits(tmp_path):
    """The config of 5 regions x 2 cells filled Lambda's 4 KB of environment; 8 x 3 is 9 KB of JSON, above
    even an advanced parameter. The synthesized template's environment and parameter must fit."""
    lines = ["model: {artifacts_s3_uri: s3://bucket/model/}", "regions:"]
    for index, region in enumerate(EIGHT_REGIONS):
        lines.append(
            f"  {region}:\n    weight: 10\n    cells: 3\n    vpc_cidr: 10.{index}.0.0/16\n"
            f"    availability_zones: [{region}a, {region}b]\n    fleets:\n"
            "      - {instance_type: inf2.48xlarge, tensor_parallel: 8, min: 3, max: 12}"
        )
    path = tmp_path / "eight.yaml"
    path.write_text("\n".join(lines) + "\n")
    settings = load_settings(path)
    app = App(context=app_context(settings))
    stack = GlobalRouting(app, "global", settings=settings)
    template = app.synth().get_stack_by_name(stack.stack_name).template
    (function,) = resources(template, "AWS::Lambda::Function").values()
    variables = function["Properties"]["Environment"]["Variables"]
    size = sum(len(json.dumps(key)) + len(json.dumps(value)) for key, value in variables.items())
    assert size < LAMBDA_ENVIRONMENT_BYTES // 2
    config = deployed_orchestrator_config(template)
    assert len(config.regions) == 24
    (parameter,) = resources(template, "AWS::SSM::Parameter").values()
    assert len(parameter["Properties"]["Value"]) <= SSM_STANDARD_VALUE_BYTES
    assert parameter["Properties"]["Tier"] == "Standard"
    assert len(config.to_json()) > SSM_ADVANCED_VALUE_BYTES  # what the plain JSON would not have fitted
