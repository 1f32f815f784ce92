import pytest
from aws_cdk.assertions import Match, Template

from cdk_constructs.load_balancer import (
    ADMIN_KEY_GRPC_HEADER,
    ADMIN_KEY_HEADER,
    DEFAULT_HEALTH_CHECK,
    GRPC_READY_PATH,
    CertificateFromArn,
    CertificateFromDns,
    HealthCheckTiming,
    LoadBalancerProps,
    ServingLoadBalancer,
)
from cdk_constructs.log_encryption import EncryptedLogs, LogProps
from cdk_constructs.web_acl import WebAclProps

DNS = CertificateFromDns("assistant.example.com", "Z123EXAMPLE", "example.com")
ARN = "arn:aws:acm:us-east-1:111111111111:certificate/abc-123"


def _props(certificate=DNS, **overrides):
    values = dict(
        certificate=certificate,
        http_port=8000,
        grpc_port=8001,
        ready_path="/v2/models/assistant/ready",
        served_models=("assistant",),
        idle_timeout_seconds=235,
        deregistration_delay_seconds=235,
    )
    values.update(overrides)
    return LoadBalancerProps(**values)


def _build(stack, vpc, props):
    logs = EncryptedLogs(stack, "Logs", props=LogProps(retention_days=30))
    balancer = ServingLoadBalancer(stack, "Lb", props=props, vpc=vpc, logs=logs)
    return balancer, Template.from_stack(stack)


@pytest.fixture
def template(stack, vpc):
    return _build(stack, vpc, _props())[1]


def _attributes(resource):
    return {a["Key"]: a["Value"] for a in resource["Properties"].get("TargetGroupAttributes", [])}


def _target_groups(template):
    return template.find_resources("AWS::ElasticLoadBalancingV2::TargetGroup")


def test_both_target_groups_use_least_outstanding_requests_without_slow_start(template):
    groups = _target_groups(template)
    assert len(groups) == 2
    for group in groups.values():
        attributes = _attributes(group)
        assert attributes["load_balancing.algorithm.type"] == "least_outstanding_requests"
        assert attributes.get("slow_start.duration_seconds", "0") == "0"


def test_deregistration_delay_and_idle_timeout_cover_the_longest_stream(template):
    for group in _target_groups(template).values():
        assert int(_attributes(group)["deregistration_delay.timeout_seconds"]) >= 235
    template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::LoadBalancer",
        {
            "LoadBalancerAttributes": Match.array_with(
                [{"Key": "idle_timeout.timeout_seconds", "Value": "235"}]
            )
        },
    )


def test_http_group_checks_model_readiness_on_the_traffic_port(template):
    template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::TargetGroup",
        {
            "ProtocolVersion": "HTTP1",
            "Port": 8000,
            "TargetType": "ip",
            "HealthCheckPath": "/v2/models/assistant/ready",
            "HealthCheckPort": "traffic-port",
            "Matcher": {"HttpCode": "200"},
        },
    )


def test_grpc_group_checks_triton_readiness_with_grpc_codes(template):
    template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::TargetGroup",
        {
            "ProtocolVersion": "GRPC",
            "Port": 8001,
            "HealthCheckPath": GRPC_READY_PATH,
            "HealthCheckPort": "traffic-port",
            "Matcher": {"GrpcCode": "0"},
        },
    )


def test_a_dead_target_leaves_both_groups_within_10_seconds(template):
    """Engine death fails the target's readiness at once, and least outstanding requests sends a target that
    fails every request at once most of the group's requests until the ALB sees it: both groups check at
    the ALB's floor, 5 s x 2 (out 5-10 s after readiness fails), and come back after two passes."""
    for group in _target_groups(template).values():
        properties = group["Properties"]
        assert properties["HealthCheckIntervalSeconds"] == 5, properties
        assert properties["UnhealthyThresholdCount"] == 2, properties
        assert properties["HealthCheckTimeoutSeconds"] == 4, properties
        assert properties["HealthyThresholdCount"] == 2, properties
    assert DEFAULT_HEALTH_CHECK.dead_target_seconds == 10


def test_the_health_check_timing_is_the_props_own(stack, vpc):
    timing = HealthCheckTiming(
        interval_seconds=10, timeout_seconds=5, healthy_threshold=3, unhealthy_threshold=5
    )
    _, template = _build(stack, vpc, _props(health_check=timing))
    for group in _target_groups(template).values():
        properties = group["Properties"]
        assert properties["HealthCheckIntervalSeconds"] == 10
        assert properties["HealthCheckTimeoutSeconds"] == 5
        assert properties["HealthyThresholdCount"] == 3
        assert properties["UnhealthyThresholdCount"] == 5


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"interval_seconds": 4}, "interval_seconds 4"),
        ({"interval_seconds": 301}, "interval_seconds 301"),
        ({"timeout_seconds": 1}, "timeout_seconds 1"),
        ({"unhealthy_threshold": 1}, "unhealthy_threshold 1"),
        ({"healthy_threshold": 11}, "healthy_threshold 11"),
        ({"timeout_seconds": 5}, "must be below interval_seconds 5"),
    ],
)
def test_health_timing_outside_the_alb_limits_is_refused_by_name(values, named):
    fields = dict(interval_seconds=5, timeout_seconds=4, healthy_threshold=2, unhealthy_threshold=2)
    fields.update(values)
    with pytest.raises(ValueError, match=named):
        HealthCheckTiming(**fields)


def _listener(template, port):
    return next(
        v
        for v in template.find_resources("AWS::ElasticLoadBalancingV2::Listener").values()
        if v["Properties"]["Port"] == port
    )


def _rules(template):
    return [
        rule["Properties"]
        for rule in template.find_resources("AWS::ElasticLoadBalancingV2::ListenerRule").values()
    ]


def _group_id(template, version):
    groups = _target_groups(template)
    return next(k for k, v in groups.items() if v["Properties"]["ProtocolVersion"] == version)


def _forwarded(template, target_group_id):
    """Every path a rule forwards to the group (and that rule has no other condition)."""
    paths = []
    for rule in _rules(template):
        if rule["Actions"][0].get("TargetGroupArn") == {"Ref": target_group_id}:
            (condition,) = rule["Conditions"]
            assert condition["Field"] == "path-pattern"
            paths += condition["PathPatternConfig"]["Values"]
    return paths


def test_https_listener_answers_404_to_anything_not_on_the_allow_list(template):
    properties = _listener(template, 443)["Properties"]
    assert properties["Protocol"] == "HTTPS" and properties["Port"] == 443
    assert properties["SslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06"  # TLS 1.3, 1.2 fallback
    assert properties["DefaultActions"] == [
        {
            "Type": "fixed-response",
            "FixedResponseConfig": {
                "StatusCode": "404",
                "ContentType": "text/plain",
                "MessageBody": "Not found",
            },
        }
    ]


def test_only_the_serving_rpcs_reach_the_grpc_group(template):
    assert sorted(_forwarded(template, _group_id(template, "GRPC"))) == sorted(
        f"/inference.GRPCInferenceService/{method}"
        for method in ("ModelInfer", "ModelStreamInfer", "ServerReady", "ModelReady", "ModelMetadata")
    )


def test_only_the_served_models_paths_reach_the_http_group(stack, vpc):
    _, template = _build(stack, vpc, _props(served_models=("assistant", "other")))
    forwarded = _forwarded(template, _group_id(template, "HTTP1"))
    expected = [
        f"/v2/models/{model}{suffix}"
        for model in ("assistant", "other")
        for suffix in ("/infer", "/generate", "/generate_stream", "/ready", "")
    ]
    assert sorted(forwarded) == sorted(expected)
    # ALB's limit: five condition values per rule; exact paths, so no wildcard opens a neighbour path.
    for rule in _rules(template):
        for condition in rule["Conditions"]:
            values = condition.get("PathPatternConfig", {}).get("Values", [])
            assert len(values) <= 5
            assert not any("*" in value or "?" in value for value in values)


@pytest.mark.parametrize(
    "path",
    [
        "/v2/repository/models/assistant/unload",
        "/v2/repository/models/assistant/load",
        "/v2/repository/index",
        "/v2/systemsharedmemory/region/x/register",
        "/v2/cudasharedmemory/status",
        "/v2/models/assistant/config",
        "/v2/models/assistant/stats",
        "/v2/models/assistant/trace/setting",
        "/v2/logging",
        "/v2/trace/setting",
        "/inference.GRPCInferenceService/RepositoryModelUnload",
        "/inference.GRPCInferenceService/RepositoryModelLoad",
        "/inference.GRPCInferenceService/SystemSharedMemoryRegister",
        "/inference.GRPCInferenceService/ModelConfig",
        "/inference.GRPCInferenceService/ModelStatistics",
        "/inference.GRPCInferenceService/LogSettings",
        "/inference.GRPCInferenceService/TraceSetting",
    ],
)
def test_admin_paths_match_no_forwarding_rule(template, path):
    for rule in _rules(template):
        if rule["Actions"][0]["Type"] == "forward":
            (condition,) = rule["Conditions"]
            assert path not in condition["PathPatternConfig"]["Values"]


def test_a_request_carrying_the_admin_key_header_is_refused_before_any_forward(template):
    from entrypoint import admin_api

    assert (ADMIN_KEY_HEADER, ADMIN_KEY_GRPC_HEADER) == (admin_api.HTTP_HEADER, admin_api.GRPC_HEADER)
    refusals = {}
    forwards = []
    for rule in _rules(template):
        action = rule["Actions"][0]
        if action["Type"] == "fixed-response":
            (condition,) = rule["Conditions"]
            refusals[condition["HttpHeaderConfig"]["HttpHeaderName"]] = (
                condition["HttpHeaderConfig"]["Values"],
                rule["Priority"],
                action["FixedResponseConfig"]["StatusCode"],
            )
        else:
            forwards.append(rule["Priority"])
    assert set(refusals) == {ADMIN_KEY_HEADER, ADMIN_KEY_GRPC_HEADER}
    for values, priority, status in refusals.values():
        assert values == ["*"] and status == "404"
        assert priority < min(forwards)


def test_only_https_and_the_redirect_port_are_open_to_clients(template):
    group = next(
        v
        for v in template.find_resources("AWS::EC2::SecurityGroup").values()
        if "ALB" in v["Properties"]["GroupDescription"]
    )
    ingress = group["Properties"]["SecurityGroupIngress"]
    assert sorted((rule["FromPort"], rule["ToPort"]) for rule in ingress) == [(80, 80), (443, 443)]


def test_http_on_port_80_is_permanently_redirected_to_https(template):
    listener = _listener(template, 80)["Properties"]
    assert listener["Protocol"] == "HTTP"
    assert listener["DefaultActions"] == [
        {
            "Type": "redirect",
            "RedirectConfig": {"Port": "443", "Protocol": "HTTPS", "StatusCode": "HTTP_301"},
        }
    ]
    template.resource_count_is("AWS::ElasticLoadBalancingV2::Listener", 2)


def _balancer_attributes(template):
    balancer = next(iter(template.find_resources("AWS::ElasticLoadBalancingV2::LoadBalancer").values()))
    return {a["Key"]: a["Value"] for a in balancer["Properties"]["LoadBalancerAttributes"]}


def test_deletion_protection_is_on_by_default(template):
    assert _balancer_attributes(template)["deletion_protection.enabled"] == "true"


def test_deletion_protection_can_be_turned_off_for_teardown(stack, vpc):
    _, template = _build(stack, vpc, _props(deletion_protection=False))
    assert _balancer_attributes(template).get("deletion_protection.enabled", "false") == "false"


def test_web_acl_is_associated_with_the_alb_when_configured(stack, vpc):
    waf = WebAclProps(name="kit-us-east-1", rate_limit_per_ip=500, rate_limit_window_seconds=300)
    balancer, template = _build(stack, vpc, _props(web_acl=waf))
    assert balancer.web_acl is not None
    template.has_resource_properties(
        "AWS::WAFv2::WebACLAssociation",
        {
            "ResourceArn": {"Ref": Match.string_like_regexp("LbAlb")},
            "WebACLArn": {"Fn::GetAtt": [Match.string_like_regexp("LbWafWebAcl"), "Arn"]},
        },
    )


def test_no_web_acl_when_waf_is_off(template):
    template.resource_count_is("AWS::WAFv2::WebACL", 0)
    template.resource_count_is("AWS::WAFv2::WebACLAssociation", 0)


def test_access_logs_go_to_an_encrypted_private_bucket(template):
    template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::LoadBalancer",
        {"LoadBalancerAttributes": Match.array_with([{"Key": "access_logs.s3.enabled", "Value": "true"}])},
    )
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                ]
            },
            "PublicAccessBlockConfiguration": Match.object_like({"BlockPublicAcls": True}),
        },
    )


def test_dns_validated_certificate_uses_the_configured_zone_without_lookup(template):
    template.has_resource_properties(
        "AWS::CertificateManager::Certificate",
        {
            "DomainName": "assistant.example.com",
            "ValidationMethod": "DNS",
            "DomainValidationOptions": [
                {"DomainName": "assistant.example.com", "HostedZoneId": "Z123EXAMPLE"}
            ],
        },
    )


def test_certificate_arn_from_config_is_used_as_is(stack, vpc):
    _, template = _build(stack, vpc, _props(certificate=CertificateFromArn(ARN)))
    template.resource_count_is("AWS::CertificateManager::Certificate", 0)
    template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::Listener",
        {"Port": 443, "Certificates": [{"CertificateArn": ARN}]},
    )


def test_balancer_alarms_cover_healthy_targets_and_errors(stack, vpc):
    balancer, template = _build(stack, vpc, _props())
    healthy = template.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"MetricName": "HealthyHostCount"}}
    )
    assert len(healthy) == 2
    assert len(balancer.alarms) == 3
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"Metrics": Match.array_with([Match.object_like({"Expression": Match.string_like_regexp("FILL")})])},
    )


def test_the_task_role_may_deregister_targets_of_these_two_groups_and_nothing_else(stack, vpc):
    from aws_cdk import aws_iam as iam

    logs = EncryptedLogs(stack, "Logs", props=LogProps(retention_days=30))
    balancer = ServingLoadBalancer(stack, "Lb", props=_props(), vpc=vpc, logs=logs)
    role = iam.Role(stack, "TaskRole", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    balancer.grant_deregister_targets(role)
    template = Template.from_stack(stack)
    policies = list(template.find_resources("AWS::IAM::Policy").values())
    assert len(policies) == 1
    [statement] = policies[0]["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Action"] == "elasticloadbalancing:DeregisterTargets"  # one action, no wildcard
    assert sorted(resource["Ref"] for resource in statement["Resource"]) == sorted(_target_groups(template))
    assert set(statement) == {"Action", "Effect", "Resource"}  # no condition widening or narrowing it
    assert policies[0]["Properties"]["Roles"] == [{"Ref": stack.get_logical_id(role.node.default_child)}]
