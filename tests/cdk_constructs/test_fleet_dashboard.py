"""The fleet dashboard: every region's series, from that region, with ids unique per graph."""

from __future__ import annotations

import json

from aws_cdk.assertions import Template

from cdk_constructs.fleet_dashboard import FleetDashboard, FleetDashboardProps, RegionFleets

PROPS = FleetDashboardProps(
    dashboard_name="kit-fleet",
    metrics_namespace="LLMServing",
    model_name="assistant",
    routing_metrics_namespace="kit/Routing",
    ttft_p99_threshold_ms=1000,
    regions=(
        RegionFleets("us-east-1", ("inf2.48xlarge", "trn1.32xlarge")),
        RegionFleets("eu-west-1", ("inf2.48xlarge",)),
    ),
)


def test_hosts_are_counted_per_region_and_instance_type(stack):
    FleetDashboard(stack, "Fleet", props=PROPS)
    (dashboard,) = Template.from_stack(stack).find_resources("AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    if isinstance(body, dict):  # joined with the stack's own tokens (its region for the weight graph)
        body = "".join(part if isinstance(part, str) else "token" for part in body["Fn::Join"][1])
    body = json.loads(body)
    hosts = next(w for w in body["widgets"] if w["properties"]["title"].startswith("Hosts per instance type"))
    expressions = [m[0] for m in hosts["properties"]["metrics"] if isinstance(m[0], dict)]
    assert [e["label"] for e in expressions] == [
        "us-east-1 inf2.48xlarge",
        "us-east-1 trn1.32xlarge",
        "eu-west-1 inf2.48xlarge",
    ]
    assert expressions[0]["expression"] == "hosts0 / (PERIOD(hosts0) / 10)"
    regions = {m[-1].get("region") for m in hosts["properties"]["metrics"] if not isinstance(m[0], dict)}
    assert regions == {"us-east-1", "eu-west-1"}


def test_cells_are_drawn_one_by_one_from_their_own_namespaces(stack):
    props = FleetDashboardProps(
        dashboard_name="kit-fleet",
        metrics_namespace="LLMServing",
        model_name="assistant",
        routing_metrics_namespace="kit/Routing",
        ttft_p99_threshold_ms=1000,
        regions=(
            RegionFleets("us-east-1", ("inf2.48xlarge",), "us-east-1/1", "LLMServing/cell1"),
            RegionFleets("us-east-1", ("inf2.48xlarge",), "us-east-1/2", "LLMServing/cell2"),
            RegionFleets("eu-west-1", ("inf2.48xlarge",)),
        ),
    )
    FleetDashboard(stack, "Fleet", props=props)
    (dashboard,) = Template.from_stack(stack).find_resources("AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    if isinstance(body, dict):
        body = "".join(part if isinstance(part, str) else "token" for part in body["Fn::Join"][1])
    widgets = {w["properties"].get("title", ""): w["properties"] for w in json.loads(body)["widgets"]}
    tokens = next(v for k, v in widgets.items() if k.startswith("Output tokens"))
    assert [m[0] for m in tokens["metrics"]] == ["LLMServing/cell1", "LLMServing/cell2", "LLMServing"]
    assert [m[-1]["label"] for m in tokens["metrics"]] == ["us-east-1/1", "us-east-1/2", "eu-west-1"]
    weights = next(v for k, v in widgets.items() if k.startswith("Route 53 weight"))
    # The orchestrator's RegionWeight is per weighted record: a cell's name.
    assert [m[3] for m in weights["metrics"]] == ["us-east-1/1", "us-east-1/2", "eu-west-1"]
