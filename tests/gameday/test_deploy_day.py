"""What the deploy code reads on a deploy day is moto holding the twin's state (gameday/deploy_day.py
`Mirror`): read here through boto3, as ops/deploy_waves and the fixes to it read it, while a rolling
deployment is under way."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import boto3

from gameday.aws import _botocore_session
from gameday.deploy_day import Mirror
from gameday.run import run_scenario

REPO = Path(__file__).resolve().parents[2]
DAY = f"""\
config: {REPO / "config" / "prime-day.yaml"}
start: "2027-07-08T11:00:00-07:00"
minutes: 60
traffic:
  us-east-1: [[0, 2500]]
  us-west-2: [[0, 1500]]
  us-east-2: [[0, 1000]]
deploys:
  - {{kind: deploy, at: 2, change: image, revision: {{name: v2}}}}
"""


def test_moto_answers_the_deploy_codes_reads_with_the_twins_rollout(tmp_path, monkeypatch):
    seen: dict[str, object] = {}
    write = Mirror.write

    def write_and_look(mirror: Mirror, minute: int) -> None:
        write(mirror, minute)
        fleets = mirror.twin.cells["us-east-1/1"].fleets.values()
        if "services" in seen or not any(f.rollout and f.rollout.new_serving for f in fleets):
            return
        session = boto3.Session(botocore_session=_botocore_session(), region_name="us-east-1")
        ecs = session.client("ecs")
        (cluster,) = [
            c["clusterName"]
            for c in ecs.describe_clusters(clusters=ecs.list_clusters()["clusterArns"], include=["TAGS"])[
                "clusters"
            ]
            if {"key": "cell", "value": "us-east-1/1"} in c.get("tags", [])
        ]
        arns = ecs.list_services(cluster=cluster)["serviceArns"]
        seen["services"] = ecs.describe_services(cluster=cluster, services=arns)["services"]
        stack = mirror.twin.cells["us-east-1/1"].control.stack
        seen["status"] = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
        seen["resources"] = session.client("cloudformation").list_stack_resources(StackName=stack)
        seen["cluster"] = cluster
        home = session.client("cloudwatch", region_name="us-west-2")
        now = mirror.twin.start + timedelta(minutes=minute + 1)
        seen["invocations"] = home.get_metric_statistics(
            Namespace="AWS/Lambda",
            MetricName="Invocations",
            Dimensions=[{"Name": "FunctionName", "Value": mirror_function(mirror)}],
            StartTime=now - timedelta(minutes=10),
            EndTime=now,
            Period=60,
            Statistics=["Sum"],
        )["Datapoints"]

    monkeypatch.setattr(Mirror, "write", write_and_look)
    path = tmp_path / "day.yaml"
    path.write_text(DAY)
    run_scenario(path)

    services = seen["services"]
    assert len(services) == 2  # one a fleet
    for service in services:
        primary, active = service["deployments"]
        assert (primary["status"], primary["rolloutState"]) == ("PRIMARY", "IN_PROGRESS")
        assert primary["taskDefinition"].endswith(":v2") and active["taskDefinition"].endswith(":current")
        assert service["runningCount"] == primary["runningCount"] + active["runningCount"] > 0
    assert seen["status"]["StackStatus"] == "UPDATE_IN_PROGRESS"
    clusters = [
        r["PhysicalResourceId"]
        for r in seen["resources"]["StackResourceSummaries"]
        if r["ResourceType"] == "AWS::ECS::Cluster"
    ]
    assert clusters == [seen["cluster"]]
    assert seen["invocations"] and all(d["Sum"] >= 1 for d in seen["invocations"])


def mirror_function(mirror: Mirror) -> str:
    stack = next(name for name in mirror.regions if name.endswith("-global"))
    function = mirror.orchestrator_function(stack)
    assert function is not None
    return function
