from aws_cdk.assertions import Match

from tests.cdk_constructs.fleet.builders import build, fleet_props


def test_service_runs_one_task_per_host_with_rollback_and_grace(template):
    template.has_resource_properties(
        "AWS::ECS::Service",
        {
            "PlacementConstraints": [{"Type": "distinctInstance"}],
            "DeploymentConfiguration": Match.object_like(
                {"DeploymentCircuitBreaker": {"Enable": True, "Rollback": True}, "MinimumHealthyPercent": 100}
            ),
            "HealthCheckGracePeriodSeconds": 2400,
            "CapacityProviderStrategy": [Match.object_like({"Weight": 1})],
        },
    )
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    assert "DesiredCount" not in service["Properties"] or service["Properties"]["DesiredCount"] is None


def test_service_registers_into_both_shared_target_groups(template):
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    registered = {
        (lb["ContainerPort"], lb["TargetGroupArn"]["Ref"][:4])
        for lb in service["Properties"]["LoadBalancers"]
    }
    assert registered == {(8000, "Http"), (8001, "Grpc")}


def test_tasks_accept_traffic_only_from_the_load_balancer(template):
    task_group = next(
        v
        for v in template.find_resources("AWS::EC2::SecurityGroup").values()
        if "serving tasks" in v["Properties"]["GroupDescription"]
    )
    assert "SecurityGroupIngress" not in task_group["Properties"]
    ingress = template.find_resources("AWS::EC2::SecurityGroupIngress")
    assert {
        (r["Properties"]["FromPort"], r["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0][:5])
        for r in ingress.values()
    } == {(8000, "AlbSg"), (8001, "AlbSg")}


def test_fleet_alarms_when_running_tasks_fall_below_the_minimum(inf2):
    fleet, template = inf2
    assert fleet.alarms and fleet.serving.below_minimum_alarm is fleet.alarms[0]
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "RunningTaskCount", "Threshold": 2, "ComparisonOperator": "LessThanThreshold"},
    )


def test_fleet_allowed_to_be_empty_has_no_floor_alarm(stack, vpc):
    fleet, template = build(stack, vpc, fleet_props(min_hosts=0))
    assert fleet.alarms == []
    template.resource_count_is("AWS::CloudWatch::Alarm", 0)


def test_service_waits_for_the_capacity_provider_association(template):
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    associations = template.find_resources("AWS::ECS::ClusterCapacityProviderAssociations")
    assert set(associations) <= set(service["DependsOn"])
    assert associations


def test_ecs_exec_is_off_by_default(template):
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    assert not service["Properties"].get("EnableExecuteCommand", False)


def test_ecs_exec_on_when_configured(stack, vpc):
    _, template = build(stack, vpc, fleet_props(ecs_exec=True))
    template.has_resource_properties("AWS::ECS::Service", {"EnableExecuteCommand": True})
