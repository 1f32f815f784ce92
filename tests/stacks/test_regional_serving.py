"""The default config's stacks, read from one synthesized app: what bites real users, asserted per region."""

from __future__ import annotations

import json
import re

from syrupy.extensions.json import JSONSnapshotExtension

from cdk_constructs.fleet.service import failed_task_percent
from settings.instances import INSTANCES
from stacks.props import global_stack_name, stack_name
from stacks.routing_names import orchestrator_config
from stacks.serving_app import build_app
from tests.stacks.conftest import keys, resources

ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")
# A deployment alarm's name digests its task definition, the image's asset hash included (alarm_names.py).
DEPLOY_ALARM_DIGEST = re.compile(r"(-deploy-[a-z-]+-)[0-9a-f]{8}\b")


def serving_container(task: dict) -> dict | None:
    """A task definition's serving container; None for a fleet's compile task definition."""
    return next((c for c in task["Properties"]["ContainerDefinitions"] if c["Name"] == "serving"), None)


def test_one_stack_per_region_bound_to_the_configured_account(settings, synthesized):
    _, assembly = synthesized
    stacks = {stack.stack_name: stack.environment for stack in assembly.stacks}
    regional = {stack_name(settings, region) for region in settings.regions}
    assert set(stacks) == regional | {global_stack_name(settings)}
    for region in settings.regions:
        environment = stacks[stack_name(settings, region)]
        assert (environment.account, environment.region) == (settings.account, region)


def test_no_desired_capacity_in_any_template(templates):
    for region, template in templates.items():
        assert "DesiredCapacity" not in set(keys(template)), region
        for service in resources(template, "AWS::ECS::Service").values():
            assert "DesiredCount" not in service["Properties"], region


def test_every_fleet_maps_every_neuron_device_of_its_type(settings, templates):
    for region, template in templates.items():
        tasks = resources(template, "AWS::ECS::TaskDefinition").values()
        mapped = {}
        for task in tasks:
            container = serving_container(task)
            if container is None:  # the fleet's compile task definition
                continue
            environment = {e["Name"]: e["Value"] for e in container["Environment"]}
            mapped[environment["INSTANCE_TYPE"]] = [
                d["HostPath"] for d in container["LinuxParameters"]["Devices"]
            ]
        for fleet in settings.regions[region].fleets:
            assert mapped[fleet.instance_type] == list(INSTANCES[fleet.instance_type].device_paths)


def test_target_groups_use_lor_without_slow_start(templates):
    for template in templates.values():
        groups = resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
        assert len(groups) == 2
        for group in groups:
            attributes = {a["Key"]: a["Value"] for a in group["Properties"]["TargetGroupAttributes"]}
            assert attributes["load_balancing.algorithm.type"] == "least_outstanding_requests"
            assert "slow_start.duration_seconds" not in attributes


def test_idle_timeout_and_deregistration_delay_cover_the_longest_stream(settings, templates):
    longest = settings.longest_stream_seconds
    for template in templates.values():
        for group in resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup").values():
            attributes = {a["Key"]: a["Value"] for a in group["Properties"]["TargetGroupAttributes"]}
            assert int(attributes["deregistration_delay.timeout_seconds"]) >= longest
        balancer = next(iter(resources(template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()))
        attributes = {a["Key"]: a["Value"] for a in balancer["Properties"]["LoadBalancerAttributes"]}
        assert int(attributes["idle_timeout.timeout_seconds"]) >= longest


def test_health_check_grace_covers_the_cold_start_budget(settings, templates):
    for template in templates.values():
        for service in resources(template, "AWS::ECS::Service").values():
            grace = service["Properties"]["HealthCheckGracePeriodSeconds"]
            assert grace == settings.serving.health_check_grace_seconds
            assert grace >= settings.serving.cold_start_budget_seconds


def test_alb_checks_model_readiness_on_the_traffic_port(settings, templates):
    for template in templates.values():
        groups = resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
        http = next(g for g in groups if g["Properties"]["ProtocolVersion"] == "HTTP1")["Properties"]
        assert http["HealthCheckPath"] == f"/v2/models/{settings.model.name}/ready"
        assert {g["Properties"]["HealthCheckPort"] for g in groups} == {"traffic-port"}


def test_tasks_get_shared_memory_and_the_maximum_stop_timeout(settings, templates):
    for template in templates.values():
        for task in resources(template, "AWS::ECS::TaskDefinition").values():
            container = serving_container(task)
            if container is None:  # the fleet's compile task definition: it stops when its compile ends
                continue
            assert container["LinuxParameters"]["SharedMemorySize"] == settings.serving.shared_memory_mib
            assert container["StopTimeout"] == 120


def test_no_cross_region_or_cross_stack_references(templates):
    for region, template in templates.items():
        text = json.dumps(template)
        assert "Fn::ImportValue" not in text, region
        assert "Outputs" not in template or not any("Export" in o for o in template["Outputs"].values())
        assert not [r for r in template["Resources"].values() if "CrossRegion" in r["Type"]], region
        others = [other for other in templates if other != region]
        assert not any(other in text for other in others), f"{region} names another region"


def test_stack_resources_are_tagged_for_the_release_script(settings, templates):
    for region, template in templates.items():
        for resource_type in ("AWS::AutoScaling::AutoScalingGroup", "AWS::ECS::Cluster"):
            for resource in resources(template, resource_type).values():
                tags = {t.get("Key"): t.get("Value") for t in resource["Properties"]["Tags"]}
                assert tags["project"] == settings.project and tags["region"] == region


def test_task_logs_and_flow_logs_are_encrypted(templates):
    for template in templates.values():
        for group in resources(template, "AWS::Logs::LogGroup").values():
            assert "KmsKeyId" in group["Properties"]


def _normalized(template):
    """Asset hashes change whenever container/ changes; the snapshot is about the infrastructure."""
    return json.loads(
        DEPLOY_ALARM_DIGEST.sub(
            r"\1<digest>", ASSET_HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True))
        )
    )


def _alarm_dimensions(alarm) -> list[dict]:
    """Each metric's dimensions, of a plain alarm or of a metric-math one's inputs."""
    properties = alarm["Properties"]
    if "Metrics" not in properties:
        return [{d["Name"]: d["Value"] for d in properties["Dimensions"]}]
    return [
        {d["Name"]: d["Value"] for d in query["MetricStat"]["Metric"]["Dimensions"]}
        for query in properties["Metrics"]
        if "MetricStat" in query
    ]


def test_every_service_rolls_back_on_its_fleets_alarms_beside_the_circuit_breaker(settings, templates):
    percent = failed_task_percent(settings.serving.deployment.max_surge_percent)
    for region, template in templates.items():
        alarms = resources(template, "AWS::CloudWatch::Alarm")
        for service in resources(template, "AWS::ECS::Service").values():
            deployment = service["Properties"]["DeploymentConfiguration"]
            assert deployment["DeploymentCircuitBreaker"] == {
                "Enable": True,
                "Rollback": True,
                "ThresholdConfiguration": {"Type": "BOUNDED_PERCENT", "Value": percent},
            }, region
            names = deployment["Alarms"]["AlarmNames"]
            # The new revision's failed requests, its late first tokens and its hosts' Neuron hardware errors.
            assert len(names) == 3 and all(name["Ref"] in alarms for name in names), region
            # Judged on the service's own task definition revision, not the fleet (service.py,
            # neuron_health.py), under a name resolved at synth that changes with the revision.
            for name in names:
                alarm = alarms[name["Ref"]]
                assert re.fullmatch(
                    rf"{settings.project}-{region}-[a-z0-9.]+-deploy-[a-z-]+-[0-9a-f]{{8}}",
                    alarm["Properties"]["AlarmName"],
                ), region
                for dimensions in _alarm_dimensions(alarm):
                    assert dimensions["TaskDefinitionRevision"] == {
                        "Fn::Select": [6, {"Fn::Split": [":", service["Properties"]["TaskDefinition"]]}]
                    }, region


def _deployment_alarms(template) -> set[str]:
    """A deploy's judges: the fleet-wide hardware alarm they are a subset of pages instead."""
    return {
        name["Ref"]
        for service in resources(template, "AWS::ECS::Service").values()
        for name in service["Properties"]["DeploymentConfiguration"]["Alarms"]["AlarmNames"]
    }


def test_hosts_surge_above_each_services_maximum(settings, templates):
    for region, template in templates.items():
        maxima = sorted(
            int(g["Properties"]["MaxSize"])
            for g in resources(template, "AWS::AutoScaling::AutoScalingGroup").values()
        )
        services = sorted(
            t["Properties"]["MaxCapacity"]
            for t in resources(template, "AWS::ApplicationAutoScaling::ScalableTarget").values()
        )
        # 25% of 14 and of 28, rounded up
        assert [m - s for m, s in zip(maxima, services, strict=True)] == [4, 7], region


def test_hosts_boot_the_pinned_neuron_ami_release(settings, templates):
    for template in templates.values():
        defaults = {p.get("Default") for p in template["Parameters"].values()}
        assert (
            f"/aws/service/ecs/optimized-ami/amazon-linux-2023/neuron/{settings.container.neuron_ami_release}/image_id"
            in defaults
        )
        assert not any("recommended" in str(d) for d in defaults)


def _composite(template, suffix):
    (composite,) = [
        alarm
        for alarm in resources(template, "AWS::CloudWatch::CompositeAlarm").values()
        if alarm["Properties"]["AlarmName"].endswith(suffix)
    ]
    return composite["Properties"]


def _rule_alarms(template, composite) -> set[str]:
    """Logical ids of the metric alarms a composite's rule names (ALARM("<arn>") of each)."""
    rule = json.dumps(composite["AlarmRule"])
    return {logical_id for logical_id in resources(template, "AWS::CloudWatch::Alarm") if logical_id in rule}


def test_region_unfit_hears_only_the_region_wide_serving_signals(settings, templates):
    """One host's uncorrected ECC error, a NAT port-allocation error or tasks short of desired page through
    region-degraded; only a hard fault of the whole region makes it unfit, which is what the orchestrator
    drains on. Overload is not a fault: the slow-first-token, shed and rejected shares page only (on main
    the slow-first-token share drained a loaded region)."""
    for region, template in templates.items():
        unfit = _composite(template, "-region-unfit")
        assert unfit["AlarmName"] == f"{settings.project}-{region}-region-unfit"
        alarms = resources(template, "AWS::CloudWatch::Alarm")
        heard = _rule_alarms(template, unfit)
        kinds = sorted(re.sub(r"[0-9A-F]{8}$", "", logical_id).split("Alarm")[0] for logical_id in heard)
        assert kinds == [
            "LoadBalancerGrpcNoHealthyTargets",
            "LoadBalancerHttpNoHealthyTargets",
            "ObservabilityTarget5xxShare",
            "RoutingEndpointErrorShare",
        ], region
        assert not [i for i in heard if i.startswith(("Fleet", "Network"))], region
        assert "AlarmActions" not in unfit  # region-degraded pages for all of them
        share = next(
            alarm["Properties"]
            for logical_id, alarm in alarms.items()
            if logical_id.startswith("ObservabilityTarget5xxShare")
        )
        assert share["Threshold"] == settings.routing.error_share
        assert (share["DatapointsToAlarm"], share["EvaluationPeriods"]) == (3, 5)  # M of N: catches flapping
        expressions = {m["Id"]: m for m in share["Metrics"]}
        assert expressions["errors"]["MetricStat"]["Metric"]["MetricName"] == "HTTPCode_Target_5XX_Count"
        assert expressions["requests"]["MetricStat"]["Metric"]["MetricName"] == "RequestCount"
        # Every alarm still pages through region-degraded, the unfit signals included.
        degraded = _composite(template, "-region-degraded")
        assert _rule_alarms(template, degraded) == set(alarms) - _deployment_alarms(template), region
        assert degraded["AlarmActions"], region


def test_the_orchestrator_drains_on_region_unfit_not_region_degraded(settings):
    config = orchestrator_config(settings)
    assert [region.degraded_alarm for region in config.regions] == [
        f"{settings.project}-{region}-region-unfit" for region in settings.regions
    ]


def test_region_degraded_hears_every_fleets_neuron_and_task_alarms(templates):
    for region, template in templates.items():
        composite = _composite(template, "-region-degraded")
        rule = json.dumps(composite["AlarmRule"])
        metric_names = set()
        for logical_id, alarm in resources(template, "AWS::CloudWatch::Alarm").items():
            if logical_id.startswith("Fleet") and logical_id not in _deployment_alarms(template):
                assert logical_id in rule, (region, logical_id)
                metric_names.add(alarm["Properties"].get("MetricName"))
        assert {
            "NeuronHardwareErrors",
            "NeuronRuntimeFailures-inf2.48xlarge",
            "NeuronRuntimeFailures-trn1.32xlarge",
        } <= metric_names


def test_stack_matches_snapshot(templates, snapshot):
    # One region: the others differ by region name and CIDR only, which the fine-grained tests cover.
    assert _normalized(templates["us-east-1"]) == snapshot.use_extension(JSONSnapshotExtension)


def test_every_region_publishes_its_endpoint_and_health_check_for_the_orchestrator(settings, templates):
    for region, template in templates.items():
        parameters = {
            p["Properties"]["Name"]: p["Properties"]["Value"]
            for p in resources(template, "AWS::SSM::Parameter").values()
        }
        endpoint = json.dumps(parameters[f"/{settings.project}/{region}/serving-endpoint"])
        for key in ("alb_dns_name", "alb_canonical_hosted_zone_id", f'\\"region\\":\\"{region}\\"'):
            assert key in endpoint, (region, key)
        health_check = parameters[f"/{settings.project}/{region}/routing-health-check"]
        (calculated,) = [
            name
            for name, check in resources(template, "AWS::Route53::HealthCheck").items()
            if check["Properties"]["HealthCheckConfig"]["Type"] == "CALCULATED"
        ]
        assert health_check == {"Fn::GetAtt": [calculated, "HealthCheckId"]}


def test_every_alb_is_behind_a_rate_limiting_web_acl_that_logs(settings, templates):
    for region, template in templates.items():
        (acl_id, acl), *_ = resources(template, "AWS::WAFv2::WebACL").items()
        rules = {rule["Name"]: rule for rule in acl["Properties"]["Rules"]}
        limit = rules["RateLimitPerClientIp"]["Statement"]["RateBasedStatement"]["Limit"]
        assert limit == settings.load_balancer.waf.rate_limit_per_ip, region
        (association,) = resources(template, "AWS::WAFv2::WebACLAssociation").values()
        (balancer_id,) = resources(template, "AWS::ElasticLoadBalancingV2::LoadBalancer")
        assert association["Properties"] == {
            "ResourceArn": {"Ref": balancer_id},
            "WebACLArn": {"Fn::GetAtt": [acl_id, "Arn"]},
        }
        assert len(resources(template, "AWS::WAFv2::LoggingConfiguration")) == 1


def test_every_alb_redirects_http_and_is_protected_from_deletion(templates):
    for region, template in templates.items():
        listeners = {
            listener["Properties"]["Port"]: listener["Properties"]
            for listener in resources(template, "AWS::ElasticLoadBalancingV2::Listener").values()
        }
        assert set(listeners) == {80, 443}, region
        assert listeners[80]["DefaultActions"][0]["RedirectConfig"]["Protocol"] == "HTTPS"
        balancer = next(iter(resources(template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()))
        attributes = {a["Key"]: a["Value"] for a in balancer["Properties"]["LoadBalancerAttributes"]}
        assert attributes["deletion_protection.enabled"] == "true", region


def _interface_endpoints(template):
    return [
        e
        for e in resources(template, "AWS::EC2::VPCEndpoint").values()
        if e["Properties"]["VpcEndpointType"] == "Interface"
    ]


def test_default_regions_have_a_nat_gateway_per_zone_and_the_serving_endpoints(settings, templates):
    for region, template in templates.items():
        zones = settings.availability_zones(region)
        assert len(resources(template, "AWS::EC2::NatGateway")) == len(zones), region
        assert len(_interface_endpoints(template)) == 8, region
        assert "ssmmessages" not in json.dumps(template)  # operator access is off by default
        assert not resources(template, "AWS::SSM::Document")


def test_default_zones_are_the_ones_offering_both_types(settings, templates):
    for region, template in templates.items():
        zones = {
            s["Properties"]["AvailabilityZone"] for s in resources(template, "AWS::EC2::Subnet").values()
        }
        assert zones == set(settings.availability_zones(region)), region
    # us-east-2: only us-east-2c offers trn1.32xlarge, so that fleet's group has one subnet.
    groups = resources(templates["us-east-2"], "AWS::AutoScaling::AutoScalingGroup")
    subnet_counts = {
        key.split("Hosts")[0]: len(g["Properties"]["VPCZoneIdentifier"]) for key, g in groups.items()
    }
    assert sorted(subnet_counts.values()) == [1, 2]


def test_switched_config_builds_isolated_hosts_operator_access_and_regional_replicas(switched_templates):
    no_nat = switched_templates["us-east-1"]
    assert not resources(no_nat, "AWS::EC2::NatGateway")
    assert len(_interface_endpoints(no_nat)) == 11  # + ssmmessages, ec2messages, kms for sessions
    assert not resources(no_nat, "AWS::WAFv2::WebACL")
    one_nat = switched_templates["us-west-2"]
    assert len(resources(one_nat, "AWS::EC2::NatGateway")) == 1 and not _interface_endpoints(one_nat)
    for region, template in switched_templates.items():
        (cluster,) = resources(template, "AWS::ECS::Cluster").values()
        assert cluster["Properties"]["Configuration"]["ExecuteCommandConfiguration"]["Logging"] == "OVERRIDE"
        for service in resources(template, "AWS::ECS::Service").values():
            assert service["Properties"]["EnableExecuteCommand"] is True, region
        assert len(resources(template, "AWS::SSM::Document")) == 1, region
        balancer = next(iter(resources(template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()))
        attributes = {a["Key"]: a["Value"] for a in balancer["Properties"]["LoadBalancerAttributes"]}
        assert attributes.get("deletion_protection.enabled", "false") == "false"
    replica = json.dumps(switched_templates["us-east-2"])
    assert "s3://replica-us-east-2/llama-8b-instruct/weights/" in replica
    assert "123456789012.dkr.ecr.us-east-2." in replica and "/serving:trn1" in replica
    assert "replica-us-east-2" not in json.dumps(switched_templates["us-east-1"])


def _differences(before, after, path=()):
    """Key paths where two JSON values differ."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            yield from _differences(before.get(key), after.get(key), (*path, key))
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (one, other) in enumerate(zip(before, after, strict=True)):
            yield from _differences(one, other, (*path, index))
    elif before != after:
        yield path, before, after


def test_the_first_create_assembly_is_unprotected_and_at_zero_tasks(settings, templates, tmp_path):
    """A stack created for the first time (a bootstrap: `make compile`, or a wave's first creation) comes
    from this assembly: its load balancer without deletion protection (a failed first creation rolls back
    instead of ending in ROLLBACK_FAILED) and its fleets at zero tasks (nothing needs the compiled artifacts
    before the compile). The next deploy turns protection on and raises the bounds: nothing else differs."""
    app = build_app(settings, outdir=str(tmp_path), nag=False, first_create=True)
    first = app.synth().get_stack_by_name(stack_name(settings, "us-east-1")).template
    normal = templates["us-east-1"]
    changed = {
        (normal["Resources"][path[1]]["Type"], *path[2:]) for path, _, _ in _differences(normal, first)
    }
    assert changed == {
        ("AWS::ElasticLoadBalancingV2::LoadBalancer", "Properties", "LoadBalancerAttributes", 0, "Value"),
        ("AWS::AutoScaling::AutoScalingGroup", "Properties", "MinSize"),
        ("AWS::ApplicationAutoScaling::ScalableTarget", "Properties", "MinCapacity"),
        ("AWS::ECS::Service", "Properties", "DesiredCount"),
    }
    (load_balancer,) = resources(first, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
    attributes = {a["Key"]: a["Value"] for a in load_balancer["Properties"]["LoadBalancerAttributes"]}
    assert attributes["deletion_protection.enabled"] == "false"
    for service in resources(first, "AWS::ECS::Service").values():
        assert service["Properties"]["DesiredCount"] == 0
    for group in resources(first, "AWS::AutoScaling::AutoScalingGroup").values():
        assert group["Properties"]["MinSize"] == "0"


def test_each_health_check_names_an_alarm_whose_name_digests_what_it_watches(settings, templates):
    """Route 53 copies a CLOUDWATCH_METRIC check's alarm when the check is created or pointed at another
    alarm: each alarm a check follows is named, at synth, with a digest of its settings (alarm_names.py),
    so a change of what it watches is a new alarm and the check copies it again."""
    for region, template in templates.items():
        alarms = resources(template, "AWS::CloudWatch::Alarm")
        checks = [
            c["Properties"]["HealthCheckConfig"]
            for c in resources(template, "AWS::Route53::HealthCheck").values()
            if c["Properties"]["HealthCheckConfig"]["Type"] == "CLOUDWATCH_METRIC"
        ]
        assert len(checks) == 2, region
        for config in checks:
            name = alarms[config["AlarmIdentifier"]["Name"]["Ref"]]["Properties"]["AlarmName"]
            assert re.fullmatch(
                rf"{settings.project}-{region}-routing-(serving-errors|no-healthy-hosts)-[0-9a-f]{{8}}", name
            ), region
