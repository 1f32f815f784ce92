"""The dashboard picture is drawn from a template's DashboardBody, references and all."""

from __future__ import annotations

import json

import pytest

from ops.render_dashboard import dashboard_body, main, widget_boxes

BODY_PARTS = [
    '{"widgets":[{"type":"alarm","width":24,"height":6,"x":0,"y":0,"properties":{"title":"Region health",'
    '"alarms":["',
    {"Fn::GetAtt": ["RegionDegraded", "Arn"]},
    '"]}},{"type":"metric","width":12,"height":6,"x":0,"y":6,"properties":{"title":"Tasks","metrics":'
    '[["ECS/ContainerInsights","RunningTaskCount","ClusterName","',
    {"Ref": "Cluster"},
    '",{"label":"inf2.48xlarge tasks"}],["LLMServing","NeuronCoreUtilization","InstanceType","trn1.32xlarge",'
    '{"stat":"Average"}]]}}]}',
]
TEMPLATE = {
    "Resources": {
        "Dash": {
            "Type": "AWS::CloudWatch::Dashboard",
            "Properties": {"DashboardBody": {"Fn::Join": ["", BODY_PARTS]}},
        }
    }
}


def test_body_resolves_references_and_boxes_keep_the_grid_positions():
    boxes = widget_boxes(dashboard_body(TEMPLATE))
    assert [(b.kind, b.x, b.y, b.width, b.height) for b in boxes] == [
        ("alarm", 0, 0, 24, 6),
        ("metric", 0, 6, 12, 6),
    ]
    assert boxes[0].series == ("RegionDegraded",)
    assert boxes[1].series == ("inf2.48xlarge tasks", "NeuronCoreUtilization Average")


def test_a_template_without_a_dashboard_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "t.template.json"
    path.write_text(json.dumps({"Resources": {}}))
    assert main([str(path), str(tmp_path / "out.png")]) == 1
    assert "has no AWS::CloudWatch::Dashboard" in capsys.readouterr().err


def test_renders_a_png(tmp_path):
    path = tmp_path / "t.template.json"
    path.write_text(json.dumps(TEMPLATE))
    output = tmp_path / "dashboard.png"
    assert main([str(path), str(output)]) == 0
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("bad", [{"Fn::Sub": "x"}, 3])
def test_unknown_expressions_are_refused(bad):
    with pytest.raises(ValueError):
        dashboard_body(
            {"Resources": {"D": {"Type": "AWS::CloudWatch::Dashboard", "Properties": {"DashboardBody": bad}}}}
        )
