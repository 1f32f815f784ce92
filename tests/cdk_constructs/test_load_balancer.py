import pytest
from aws_cdk.assertions import Match, Template

from cdk_constructs.load_balancer import (
    GRPC_READY_PATH,
    CertificateFromArn,
    CertificateFromDns,
    LoadBalancerProps,
    ServingLoadBalancer,
    alb_health_check_timing,
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
        cold_start_budget_seconds=1800,
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


def test_health_thresholds_come_from_the_cold_start_budget(template):
    timing = alb_health_check_timing(1800)
    for group in _target_groups(template).values():
        properties = group["Properties"]
        assert properties["HealthCheckIntervalSeconds"] == timing.interval_seconds
        assert properties["UnhealthyThresholdCount"] == timing.unhealthy_threshold
        assert properties["HealthyThresholdCount"] == 2


@pytest.mark.parametrize("budget", [60, 300, 1800, 3300])
def test_health_timing_stays_within_alb_limits(budget):
    timing = alb_health_check_timing(budget)
    assert 5 <= timing.interval_seconds <= 300
    assert 2 <= timing.timeout_seconds < timing.interval_seconds
    assert 2 <= timing.healthy_threshold <= 10 and 2 <= timing.unhealthy_threshold <= 10


def test_longer_cold_start_tolerates_longer_stalls():
    short, long = alb_health_check_timing(300), alb_health_check_timing(1800)
    assert (
        long.interval_seconds * long.unhealthy_threshold > short.interval_seconds * short.unhealthy_threshold
    )


def _listener(template, port):
    return next(
        v
        for v in template.find_resources("AWS::ElasticLoadBalancingV2::Listener").values()
        if v["Properties"]["Port"] == port
    )


def test_https_listener_forwards_http_by_default_and_grpc_by_content_type(template):
    listener = _listener(template, 443)
    properties = listener["Properties"]
    assert properties["Protocol"] == "HTTPS" and properties["Port"] == 443
    assert properties["SslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06"  # TLS 1.3, 1.2 fallback
    groups = _target_groups(template)
    http_id = next(k for k, v in groups.items() if v["Properties"]["ProtocolVersion"] == "HTTP1")
    grpc_id = next(k for k, v in groups.items() if v["Properties"]["ProtocolVersion"] == "GRPC")
    assert properties["DefaultActions"][0]["TargetGroupArn"] == {"Ref": http_id}
    template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::ListenerRule",
        {
            "Actions": [Match.object_like({"Type": "forward", "TargetGroupArn": {"Ref": grpc_id}})],
            "Conditions": [
                {
                    "Field": "http-header",
                    "HttpHeaderConfig": {
                        "HttpHeaderName": "content-type",
                        "Values": ["application/grpc", "application/grpc+*"],
                    },
                }
            ],
        },
    )


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
