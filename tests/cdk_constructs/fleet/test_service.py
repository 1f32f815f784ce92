import re

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Match
from hypothesis import given
from hypothesis import strategies as st

from cdk_constructs.fleet import ImageSource
from tests.cdk_constructs.conftest import host_vpc, new_stack
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
    assert names == [
        stack_id(fleet.serving.deployment_alarm),
        stack_id(fleet.serving.slow_deployment_alarm),
        stack_id(fleet.neuron.deployment_alarm),
    ]
    task_definition = service["Properties"]["TaskDefinition"]
    alarm = template.to_json()["Resources"][stack_id(fleet.neuron.deployment_alarm)]["Properties"]
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


def test_a_deploy_rolls_back_on_the_new_revisions_failed_requests_alone(inf2):
    """On main no deployment alarm watched serving errors: an image that starts and answers but fails 10% of
    requests completed its deploy. The alarm reads the container's {Model, InstanceType,
    TaskDefinitionRevision} series of the revision the service deploys, so neither a fault the old tasks
    already had nor their good requests (diluting the new ones' errors) decide it."""
    fleet, template = inf2
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    task_definition = service["Properties"]["TaskDefinition"]
    alarm = template.to_json()["Resources"][stack_id(fleet.serving.deployment_alarm)]["Properties"]
    inputs = {m["Id"]: m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert {key: (stat["Metric"]["MetricName"], stat["Stat"]) for key, stat in inputs.items()} == {
        "errors": ("ServingError", "Sum"),
        "requests": ("ServingError", "SampleCount"),
    }
    for stat in inputs.values():
        assert stat["Metric"]["Namespace"] == "LLMServing" and stat["Period"] == 60
        assert {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]} == {
            "Model": "assistant",
            "InstanceType": "inf2.48xlarge",
            "TaskDefinitionRevision": {"Fn::Select": [6, {"Fn::Split": [":", task_definition]}]},
        }
    (expression,) = [m["Expression"] for m in alarm["Metrics"] if "Expression" in m]
    assert expression == "IF(requests >= 20, errors / requests, 0)"
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0.05, "GreaterThanThreshold")
    assert (alarm["DatapointsToAlarm"], alarm["EvaluationPeriods"]) == (2, 3)
    # A new revision has no data until its first tasks serve: that is not a failure.
    assert alarm["TreatMissingData"] == "notBreaching"
    # A deploy's judge, not a page: the fleet's alarms (region-degraded) leave it out.
    assert fleet.serving.deployment_alarm not in fleet.alarms


def _minute_share(errors, requests):
    """The alarm's expression on one minute's counts."""
    return errors / requests if requests >= 20 else 0


def test_a_tenth_of_a_batchs_requests_failing_trips_it_in_two_minutes_and_strays_do_not():
    from cdk_constructs.fleet.service import DEPLOY_BAD_MINUTES, DEPLOY_ERROR_SHARE

    peak_batch = [_minute_share(1_300, 13_000)] * 3  # 55 new hosts at Prime Day, 10% failing
    assert sum(share > DEPLOY_ERROR_SHARE for share in peak_batch[:2]) == DEPLOY_BAD_MINUTES
    assert _minute_share(1, 10) == 0  # one stray error among ten requests is not 10%
    assert _minute_share(2, 200) < DEPLOY_ERROR_SHARE  # a fault at 1%, old and new alike, passes


def _alarm_name(props, alarm="deployment_alarm", part="serving"):
    stack = new_stack()
    fleet, template = build(stack, host_vpc(stack), props)
    construct = getattr(getattr(fleet, part), alarm)
    return template.to_json()["Resources"][stack_id(construct)]["Properties"]["AlarmName"]


@pytest.mark.parametrize("part", ["serving", "neuron"])
def test_each_task_definition_revision_gets_deployment_alarms_of_its_own(part):
    """PutMetricAlarm on an existing alarm keeps its state: a deployment alarm updated in place to the new
    revision kept the old revision's ALARM and rolled back the next deploy. Its name carries a digest of what
    it watches, the task definition behind the revision included, resolved at synth."""
    name = _alarm_name(fleet_props(), part=part)
    kind = "serving-errors" if part == "serving" else "hardware-errors"
    assert re.fullmatch(rf"Test-inf2\.48xlarge-deploy-{kind}-[0-9a-f]{{8}}", name)
    assert _alarm_name(fleet_props(), part=part) == name  # the same template, the same alarm
    new_image = fleet_props(image=ImageSource(image_uri="public.ecr.aws/example/serving:2"))
    assert _alarm_name(new_image, part=part) != name  # a new revision, a new alarm
    new_environment = fleet_props(environment=(("ENGINE_MAX_NUM_SEQS", "64"),))
    assert _alarm_name(new_environment, part=part) != name


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


def test_the_circuit_breaker_rolls_back_on_a_share_of_the_desired_count(template):
    """A fixed 3 failed tasks rolled back good peak deploys (55-127 new tasks a batch, three stray failures
    among them); ECS's default, half the desired count, waited 132 failed tasks at 264 desired."""
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    breaker = service["Properties"]["DeploymentConfiguration"]["DeploymentCircuitBreaker"]
    assert breaker == {
        "Enable": True,
        "Rollback": True,
        # Half the 25% surge: at most half of any batch (service.py).
        "ThresholdConfiguration": {"Type": "BOUNDED_PERCENT", "Value": 12},
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


def _deploy_batches(config):
    """(where, desired, batch) for every desired count a fleet of each cell may hold, at its own bounds and
    at each event's: the tasks a rolling deploy starts at once (rollout.py), with the config's surge."""
    from pathlib import Path

    from cdk_constructs.fleet.rollout import deploy_batch
    from settings import load_settings
    from settings.rollout import surge_hosts

    settings = load_settings(Path(__file__).resolve().parents[3] / "config" / config)
    percent = settings.serving.deployment.max_surge_percent
    for cell in settings.all_cells:
        events = [None, *(e for e in settings.events if cell.region in e.regions)]
        for fleet in settings.regions[cell.region].fleets:
            for event in events:
                low, high = settings.cell_bounds(cell, fleet, event)
                asg_max = high + surge_hosts(high, percent)
                where = f"{cell.name} {fleet.instance.name} {event.name if event else 'own bounds'}"
                for desired in range(max(low, 1), high + 1):
                    yield where, desired, deploy_batch(desired, asg_max), percent


@pytest.mark.parametrize("config", ["default.yaml", "prime-day.yaml"])
def test_a_bad_image_trips_the_breaker_within_one_batch_and_strays_do_not(config):
    """At every desired count of every fleet, its own bounds and the events': a bad image fails the whole
    batch, which reaches the threshold (the rollback comes after one cold start, not several); the threshold
    is at least 3 and, on a peak's batches, a tenth of the batch (stray failures: a few in a hundred)."""
    from cdk_constructs.fleet.service import failed_task_percent, failed_tasks_to_roll_back

    seen = []
    for where, desired, batch, surge_percent in _deploy_batches(config):
        threshold = failed_tasks_to_roll_back(desired, failed_task_percent(surge_percent))
        seen.append((batch, threshold))
        assert threshold <= max(batch, 3), (where, desired, batch, threshold)
        assert threshold >= 3
        if batch >= 50:
            assert threshold >= batch / 10, (where, desired, batch, threshold)
    if config == "prime-day.yaml":
        peak = [(batch, threshold) for batch, threshold in seen if batch >= 50]
        assert max(batch for batch, _ in peak) >= 127 and min(t for _, t in peak) > 3


def test_the_threshold_at_a_prime_day_cells_peak_deploy():
    """A us-east-1 cell's inf2 fleet at Prime Day: 145-217 tasks, batches of 127 down to 55."""
    from cdk_constructs.fleet.rollout import deploy_batch
    from cdk_constructs.fleet.service import failed_task_percent, failed_tasks_to_roll_back

    percent = failed_task_percent(25)
    assert (deploy_batch(145, 217 + 55), failed_tasks_to_roll_back(145, percent)) == (127, 18)
    assert (deploy_batch(217, 217 + 55), failed_tasks_to_roll_back(217, percent)) == (55, 27)
    assert failed_tasks_to_roll_back(3, percent) == 3  # off-peak: ECS's floor, one whole batch


def test_the_alarm_reads_the_series_the_container_writes():
    """The metric and revision dimension the serving container publishes (container/assistant/metrics.py)
    are the ones the deployment alarm reads; a rename on one side would leave the alarm without data."""
    from assistant import metrics
    from cdk_constructs.fleet.neuron_health import REVISION_DIMENSION
    from cdk_constructs.fleet.service import SERVING_ERROR_METRIC

    assert metrics.REVISION_DIMENSION == REVISION_DIMENSION
    assert metrics.SERVING_ERROR == SERVING_ERROR_METRIC
    _, sets = metrics.serving_dimensions("assistant", {"INSTANCE_TYPE": "inf2.48xlarge"}, revision="3")
    assert ["Model", "InstanceType", REVISION_DIMENSION] in sets


def test_a_deploy_rolls_back_on_the_new_revisions_late_first_tokens_alone(inf2):
    """On main nothing judged a revision that answers correctly but slowly: a half-speed build passed every
    health check, failed no request, and reached every cell while target tracking added hosts for it. The
    third deployment alarm reads the share of the new revision's first tokens later than the objective."""
    fleet, template = inf2
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    names = [name["Ref"] for name in service["Properties"]["DeploymentConfiguration"]["Alarms"]["AlarmNames"]]
    assert stack_id(fleet.serving.slow_deployment_alarm) in names
    task_definition = service["Properties"]["TaskDefinition"]
    alarm = template.to_json()["Resources"][stack_id(fleet.serving.slow_deployment_alarm)]["Properties"]
    inputs = {m["Id"]: m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert {key: (stat["Metric"]["MetricName"], stat["Stat"]) for key, stat in inputs.items()} == {
        "slow": ("SlowFirstToken", "Sum"),
        "requests": ("SlowFirstToken", "SampleCount"),
    }
    for stat in inputs.values():
        assert {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]} == {
            "Model": "assistant",
            "InstanceType": "inf2.48xlarge",
            "TaskDefinitionRevision": {"Fn::Select": [6, {"Fn::Split": [":", task_definition]}]},
        }
    (expression,) = [m["Expression"] for m in alarm["Metrics"] if "Expression" in m]
    assert expression == "IF(requests >= 20, slow / requests, 0)"
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0.05, "GreaterThanThreshold")
    assert (alarm["DatapointsToAlarm"], alarm["EvaluationPeriods"], alarm["TreatMissingData"]) == (
        2,
        3,
        "notBreaching",
    )
    assert re.fullmatch(r"Test-inf2\.48xlarge-deploy-slow-first-tokens-[0-9a-f]{8}", alarm["AlarmName"])
    assert fleet.serving.slow_deployment_alarm not in fleet.alarms
