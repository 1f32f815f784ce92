"""A region of two cells (Prime Day as shipped: us-east-1, and us-west-2 too, split by `make plan`; the
tests below look at us-east-1's): a stack per cell, each with
its own ALB, cluster, fleets, alarms, health checks, parameters and metrics namespace; the orchestrator
weighs each cell's record. cfn-lint and cdk-nag run over it in test_checks.py."""

from __future__ import annotations

import json
import re

from syrupy.extensions.json import JSONSnapshotExtension

from stacks.props import global_stack_name
from stacks.routing_names import stack_name
from tests.stacks.conftest import cell_templates, deployed_orchestrator_config, resources

ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")
# A deployment alarm's name digests its task definition, the image's asset hash included (alarm_names.py).
DEPLOY_ALARM_DIGEST = re.compile(r"(-deploy-[a-z-]+-)[0-9a-f]{8}\b")
CELLS = ("us-east-1/1", "us-east-1/2")


def test_each_cell_is_a_stack_and_the_first_keeps_the_regions_name(cells_settings, cells):
    _, assembly = cells
    names = {stack.stack_name: stack.environment.region for stack in assembly.stacks}
    assert names == {
        "shopping-assistant-us-east-1": "us-east-1",
        "shopping-assistant-us-east-1-cell2": "us-east-1",
        "shopping-assistant-us-west-2": "us-west-2",
        "shopping-assistant-us-west-2-cell2": "us-west-2",
        "shopping-assistant-us-east-2": "us-east-2",
        global_stack_name(cells_settings): "us-west-2",  # not the largest region (us-east-1)
    }
    assert stack_name(cells_settings, "us-east-1", 1) == "shopping-assistant-us-east-1"


def test_every_cell_has_its_own_load_balancer_cluster_fleets_and_health_check(cells_settings, cells):
    templates = cell_templates(cells_settings, cells[1])
    for name in CELLS:
        template = templates[name]
        for kind in ("AWS::ElasticLoadBalancingV2::LoadBalancer", "AWS::ECS::Cluster"):
            assert len(resources(template, kind)) == 1, (name, kind)
        assert len(resources(template, "AWS::ECS::Service")) == 2, name
        calculated = [
            c
            for c in resources(template, "AWS::Route53::HealthCheck").values()
            if c["Properties"]["HealthCheckConfig"]["Type"] == "CALCULATED"
        ]
        assert len(calculated) == 1, name
        assert {"Key": "Name", "Value": f"{name} serving"} in calculated[0]["Properties"]["HealthCheckTags"]
        assert {"Key": "cell", "Value": name} in resources(template, "AWS::ECS::Cluster").popitem()[1][
            "Properties"
        ]["Tags"]


def test_cells_name_their_parameters_alarms_and_namespaces_apart(cells_settings, cells):
    """Two stacks in one region: any shared name would collide at deploy, and a shared namespace would mix
    the cells' hosts in every scaling metric and routing signal."""
    templates = cell_templates(cells_settings, cells[1])
    seen: dict[str, set[str]] = {}
    for index, name in enumerate(CELLS, start=1):
        template = templates[name]
        parameters = {p["Properties"]["Name"] for p in resources(template, "AWS::SSM::Parameter").values()}
        assert f"/shopping-assistant/us-east-1/cell{index}/serving-endpoint" in parameters
        alarms = {
            a["Properties"]["AlarmName"]
            for kind in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
            for a in resources(template, kind).values()
            if "AlarmName" in a["Properties"]
        }
        assert f"shopping-assistant-us-east-1-cell{index}-region-unfit" in alarms
        text = json.dumps(template)
        assert f'"AWS_EMF_NAMESPACE", "Value": "LLMServing/cell{index}"' in text
        assert f"LLMServing/cell{3 - index}" not in text
        for kind, names in (("parameters", parameters), ("alarms", alarms)):
            assert not (seen.get(kind, set()) & names), kind
            seen.setdefault(kind, set()).update(names)


def test_cells_split_the_regions_hosts(cells_settings, cells):
    templates = cell_templates(cells_settings, cells[1])
    for name in CELLS:
        groups = resources(templates[name], "AWS::AutoScaling::AutoScalingGroup").values()
        # inf2 3-28 and trn1 2-14 over two cells: 2-14 / 1-14 and 1-7, plus the deploy surge on the maxima.
        assert sorted(int(g["Properties"]["MaxSize"]) for g in groups) == [9, 18], name


def test_the_orchestrator_weighs_each_cell_and_reads_its_parameters(cells_settings, cells):
    _, assembly = cells
    template = assembly.get_stack_by_name(global_stack_name(cells_settings)).template
    config = deployed_orchestrator_config(template)
    targets = {t.name: t for t in config.regions}
    assert set(targets) == {*CELLS, "us-west-2/1", "us-west-2/2", "us-east-2"}
    assert [targets[c].initial_weight for c in CELLS] == [25, 25]  # us-east-1's 50, split
    assert [targets[f"us-west-2/{i}"].initial_weight for i in (1, 2)] == [15, 15]  # us-west-2's 30
    assert {targets[c].client_region for c in CELLS} == {"us-east-1"}
    assert config.cells_by_region["us-east-1"] == CELLS
    assert targets["us-east-2"].aws_region == "" and targets["us-east-2"].metrics_namespace == ""
    policy = json.dumps(template)
    assert "parameter/shopping-assistant/us-east-1/cell2/serving-endpoint" in policy


def test_cell_stack_matches_snapshot(cells_settings, cells, snapshot):
    # The second cell: the first differs from it by names only, which the tests above cover.
    template = cell_templates(cells_settings, cells[1])["us-east-1/2"]
    normalized = json.loads(
        DEPLOY_ALARM_DIGEST.sub(
            r"\1<digest>", ASSET_HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True))
        )
    )
    assert normalized == snapshot.use_extension(JSONSnapshotExtension)
