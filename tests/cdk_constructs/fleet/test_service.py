from aws_cdk import Stack
from aws_cdk.assertions import Match
from hypothesis import given
from hypothesis import strategies as st

from tests.cdk_constructs.fleet.builders import build, fleet_props


def test_service_runs_one_task_per_host_with_rollback_and_grace(template):
    template.has_resource_properties(
        "AWS::ECS::Service",
        {
            "PlacementConstraints": [{"Type": "distinctInstance"}],
            "DeploymentConfiguration": Match.object_like(
                {
                    "DeploymentCircuitBreaker": Match.object_like({"Enable": True, "Rollback": True}),
                    "MinimumHealthyPercent": 100,
                    "MaximumPercent": 200,
                }
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


def _short_of_tasks_alarm(template):
    return next(
        alarm["Properties"]
        for alarm in template.find_resources("AWS::CloudWatch::Alarm").values()
        if any(
            query.get("Expression") == "desired - running" for query in alarm["Properties"].get("Metrics", [])
        )
    )


def test_fleet_alarms_when_tasks_stay_below_desired_beyond_the_cold_start(inf2):
    fleet, template = inf2
    assert fleet.serving.below_desired_alarm in fleet.alarms
    alarm = _short_of_tasks_alarm(template)
    stats = {
        query["Id"]: (query["MetricStat"]["Metric"]["MetricName"], query["MetricStat"]["Stat"])
        for query in alarm["Metrics"]
        if "MetricStat" in query
    }
    assert stats == {"desired": ("DesiredTaskCount", "Minimum"), "running": ("RunningTaskCount", "Maximum")}
    # 31 one-minute periods all short: longer than the 1800 s cold-start budget.
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (31, 31)
    assert alarm["EvaluationPeriods"] * 60 > 1800
    assert alarm["TreatMissingData"] == "notBreaching"


def test_fleet_allowed_to_be_empty_still_alarms_when_short_of_desired(stack, vpc):
    fleet, template = build(stack, vpc, fleet_props(min_hosts=0))
    assert fleet.serving.below_desired_alarm in fleet.alarms
    assert _short_of_tasks_alarm(template)


def _first_alarm_minute(alarm, desired, running):
    """CloudWatch's M-of-N evaluation of the alarm's expression over per-minute task counts (Container
    Insights publishes one datapoint a minute, so each one-minute period holds one sample)."""
    needed, window = alarm["DatapointsToAlarm"], alarm["EvaluationPeriods"]
    breaching = [d - r >= alarm["Threshold"] for d, r in zip(desired, running, strict=True)]
    for minute in range(len(breaching)):
        if sum(breaching[max(0, minute - window + 1) : minute + 1]) >= needed:
            return minute
    return None


def _event_ramp(arrivals, *, before=2, after=12, raise_at=10, minutes=120):
    """The minimum raised from `before` to `after` hosts at `raise_at` (a peak's scheduled action); each new
    host's task runs `arrivals[i]` minutes after the raise."""
    desired = [before if t < raise_at else after for t in range(minutes)]
    running = [before + sum(1 for a in arrivals if raise_at + a <= t) for t in range(minutes)]
    return desired, running


def test_raising_the_minimum_for_an_event_does_not_trip_it_while_hosts_start(template):
    alarm = _short_of_tasks_alarm(template)
    # Ten new hosts, the last one in at the very end of the 30-minute cold-start budget.
    desired, running = _event_ramp([3 * k for k in range(1, 11)])
    assert _first_alarm_minute(alarm, desired, running) is None


@given(st.lists(st.integers(0, 30), min_size=10, max_size=10))
def test_no_ramp_within_the_cold_start_budget_trips_it(arrivals):
    alarm = {"DatapointsToAlarm": 31, "EvaluationPeriods": 31, "Threshold": 1}
    assert _first_alarm_minute(alarm, *_event_ramp(arrivals)) is None


def test_a_host_that_never_starts_trips_it_just_after_the_budget(template):
    alarm = _short_of_tasks_alarm(template)
    desired, running = _event_ramp([3 * k for k in range(1, 10)])  # the tenth host never runs its task
    assert _first_alarm_minute(alarm, desired, running) == 10 + 30


def test_a_deploy_rolls_back_on_the_new_revisions_hardware_errors_not_the_fleets(inf2):
    """ECS judges a deploy by its alarms' own metrics: a fleet-wide one let a failing device on an old host
    roll back a good deploy. The deployment alarm counts the hosts of the service's own task definition
    revision alone (the sidecar's {InstanceType, TaskDefinitionRevision} series)."""
    fleet, template = inf2
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    alarms = service["Properties"]["DeploymentConfiguration"]["Alarms"]
    assert alarms["Enable"] is True and alarms["Rollback"] is True
    names = [name["Ref"] for name in alarms["AlarmNames"]]
    assert names == [stack_id(fleet.neuron.deployment_alarm)]
    task_definition = service["Properties"]["TaskDefinition"]
    for name in names:
        alarm = template.to_json()["Resources"][name]["Properties"]
        dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
        assert alarm["MetricName"] == "NeuronHardwareErrors"
        assert dimensions == {
            "InstanceType": "inf2.48xlarge",
            # The revision of the very task definition the service deploys: field 6 of its ARN.
            "TaskDefinitionRevision": {"Fn::Select": [6, {"Fn::Split": [":", task_definition]}]},
        }
    # The fleet-wide alarms still page; they no longer judge a deploy.
    fleet_wide = {stack_id(fleet.neuron.runtime_failure_alarm), stack_id(fleet.neuron.hardware_error_alarm)}
    assert fleet_wide <= {stack_id(a) for a in fleet.alarms} and not fleet_wide & set(names)


def test_the_revision_taken_from_a_task_definition_arn_is_its_revision():
    """What Fn::Select [6, Fn::Split [":", arn]] yields on an ARN as ECS writes it."""
    from cdk_constructs.fleet.neuron_health import ARN_REVISION_INDEX

    arn = "arn:aws:ecs:us-east-1:111122223333:task-definition/serving-inf2:42"
    assert arn.split(":")[ARN_REVISION_INDEX] == "42"


def stack_id(construct):
    return Stack.of(construct).get_logical_id(construct.node.default_child)


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


def test_the_circuit_breaker_rolls_back_after_a_fixed_few_failed_tasks(template):
    """ECS's default, half the desired count, needed 132 failed tasks at 264 desired (about 80 minutes at
    the peak) before a broken image was rolled back."""
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    breaker = service["Properties"]["DeploymentConfiguration"]["DeploymentCircuitBreaker"]
    assert breaker == {
        "Enable": True,
        "Rollback": True,
        "ThresholdConfiguration": {"Type": "COUNT", "Value": 3},
    }


def test_the_container_names_each_target_group_it_registers_in_at_its_port(template):
    """The container leaves these groups by itself when its engine dies (container/serving/
    leave_target_groups.py): one variable per group, the port in its name, the group's ARN its value."""
    from cdk_constructs.fleet.service import TARGET_GROUP_ENV_PREFIX
    from serving import leave_target_groups

    assert TARGET_GROUP_ENV_PREFIX == leave_target_groups.TARGET_GROUP_ENV_PREFIX
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    registered = {
        f"TARGET_GROUP_ARN_{lb['ContainerPort']}": lb["TargetGroupArn"]
        for lb in service["Properties"]["LoadBalancers"]
    }
    task = next(iter(template.find_resources("AWS::ECS::TaskDefinition").values()))
    serving = next(c for c in task["Properties"]["ContainerDefinitions"] if c["Name"] == "serving")
    named = {
        v["Name"]: v["Value"] for v in serving["Environment"] if v["Name"].startswith(TARGET_GROUP_ENV_PREFIX)
    }
    assert named == registered and len(named) == 2
