"""The web ACL in front of the ALB: rules that suit a JSON/gRPC inference API, logged, secrets redacted."""

import pytest
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk.assertions import Match, Template

from cdk_constructs.log_encryption import EncryptedLogs, LogProps
from cdk_constructs.web_acl import COMMON_RULES_COUNTED, ServingWebAcl, WebAclProps

PROPS = WebAclProps(name="kit-us-east-1", rate_limit_per_ip=750, rate_limit_window_seconds=120)


@pytest.fixture
def template(stack, vpc):
    logs = EncryptedLogs(stack, "Logs", props=LogProps(retention_days=30))
    alb = elbv2.ApplicationLoadBalancer(stack, "Alb", vpc=vpc, internet_facing=True)
    ServingWebAcl(stack, "Waf", props=PROPS, logs=logs, load_balancer=alb)
    return Template.from_stack(stack)


def _rules(template):
    acl = next(iter(template.find_resources("AWS::WAFv2::WebACL").values()))["Properties"]
    assert acl["Scope"] == "REGIONAL" and acl["DefaultAction"] == {"Allow": {}}
    return {rule["Name"]: rule for rule in acl["Rules"]}


def test_rate_limit_blocks_one_client_ip_above_the_configured_budget(template):
    rule = _rules(template)["RateLimitPerClientIp"]
    assert rule["Action"] == {"Block": {}}
    assert rule["Statement"]["RateBasedStatement"] == {
        "AggregateKeyType": "IP",
        "Limit": 750,
        "EvaluationWindowSec": 120,
    }


def _build(stack, vpc, props):
    logs = EncryptedLogs(stack, "Logs", props=LogProps(retention_days=30))
    alb = elbv2.ApplicationLoadBalancer(stack, "Alb", vpc=vpc, internet_facing=True)
    ServingWebAcl(stack, "Waf", props=props, logs=logs, load_balancer=alb)
    return Template.from_stack(stack)


def test_a_cdn_or_proxy_in_front_rate_limits_on_the_forwarded_address(stack, vpc):
    """A shop backend, NAT or CDN calls from a few addresses: keyed on the connecting address, all its
    users would share one budget and be blocked together."""
    props = WebAclProps(
        "kit-us-east-1", 750, 120, rate_limit_key="forwarded_ip", rate_limit_header="X-Forwarded-For"
    )
    rules = _rules(_build(stack, vpc, props))
    assert "RateLimitPerClientIp" not in rules
    assert rules["RateLimitPerClient"]["Statement"]["RateBasedStatement"] == {
        "AggregateKeyType": "FORWARDED_IP",
        "ForwardedIPConfig": {"HeaderName": "X-Forwarded-For", "FallbackBehavior": "MATCH"},
        "Limit": 750,
        "EvaluationWindowSec": 120,
    }
    assert sorted(rule["Priority"] for rule in rules.values()) == [0, 1, 2, 3]


def test_a_custom_header_key_with_a_per_address_backstop_for_requests_without_it(stack, vpc):
    props = WebAclProps(
        "kit-us-east-1",
        750,
        300,
        rate_limit_key="header",
        rate_limit_header="x-shopper-id",
        source_ip_backstop_limit=50_000,
    )
    rules = _rules(_build(stack, vpc, props))
    keyed = rules["RateLimitPerClient"]
    assert (keyed["Priority"], keyed["Action"]) == (0, {"Block": {}})
    assert keyed["Statement"]["RateBasedStatement"] == {
        "AggregateKeyType": "CUSTOM_KEYS",
        "CustomKeys": [
            {"Header": {"Name": "x-shopper-id", "TextTransformations": [{"Priority": 0, "Type": "NONE"}]}}
        ],
        "Limit": 750,
        "EvaluationWindowSec": 300,
    }
    backstop = rules["RateLimitPerSourceIp"]
    assert backstop["Priority"] == 1 and backstop["Action"] == {"Block": {}}
    assert backstop["Statement"]["RateBasedStatement"] == {
        "AggregateKeyType": "IP",
        "Limit": 50_000,
        "EvaluationWindowSec": 300,
    }
    assert sorted(rule["Priority"] for rule in rules.values()) == [0, 1, 2, 3, 4]


def test_managed_groups_for_an_api_run_after_the_rate_limit(template):
    rules = _rules(template)
    managed = {
        name: rule["Statement"]["ManagedRuleGroupStatement"]
        for name, rule in rules.items()
        if "ManagedRuleGroupStatement" in rule["Statement"]
    }
    assert set(managed) == {
        "AWSManagedRulesAmazonIpReputationList",
        "AWSManagedRulesKnownBadInputsRuleSet",
        "AWSManagedRulesCommonRuleSet",
    }
    assert all(statement["VendorName"] == "AWS" for statement in managed.values())
    assert "AWSManagedRulesSQLiRuleSet" not in rules  # no SQL behind the endpoint; prompts mention SQL
    assert sorted(rule["Priority"] for rule in rules.values()) == [0, 1, 2, 3]
    assert rules["RateLimitPerClientIp"]["Priority"] == 0
    for name in managed:
        assert rules[name]["OverrideAction"] == {"None": {}}  # the groups' own actions apply


def test_core_rules_that_read_the_body_only_count(template):
    """Prompts are free text and gRPC bodies are binary: body rules would block legitimate requests (and
    SizeRestrictions_BODY every prompt over 8 KB)."""
    statement = _rules(template)["AWSManagedRulesCommonRuleSet"]["Statement"]["ManagedRuleGroupStatement"]
    overrides = {o["Name"]: o["ActionToUse"] for o in statement["RuleActionOverrides"]}
    assert set(overrides) == set(COMMON_RULES_COUNTED)
    assert "SizeRestrictions_BODY" in overrides
    assert all(name.endswith("_BODY") for name in overrides)
    assert set(map(str, overrides.values())) == {str({"Count": {}})}


def test_every_rule_publishes_metrics_and_samples(template):
    for rule in _rules(template).values():
        assert rule["VisibilityConfig"]["CloudWatchMetricsEnabled"] is True
        assert rule["VisibilityConfig"]["SampledRequestsEnabled"] is True


def test_web_acl_is_associated_with_the_load_balancer(template):
    template.has_resource_properties(
        "AWS::WAFv2::WebACLAssociation",
        {
            "ResourceArn": {"Ref": Match.string_like_regexp("^Alb")},
            "WebACLArn": {"Fn::GetAtt": [Match.string_like_regexp("WafWebAcl"), "Arn"]},
        },
    )


def test_logs_go_to_an_encrypted_aws_waf_logs_group_with_credentials_redacted(template):
    (group_id, group), *_ = template.find_resources("AWS::Logs::LogGroup").items()
    group = group["Properties"]
    assert group["LogGroupName"] == "aws-waf-logs-kit-us-east-1"
    assert "KmsKeyId" in group
    logging = next(iter(template.find_resources("AWS::WAFv2::LoggingConfiguration").values()))
    properties = logging["Properties"]
    assert properties["RedactedFields"] == [
        {"SingleHeader": {"Name": "authorization"}},
        {"SingleHeader": {"Name": "cookie"}},
    ]
    destination = properties["LogDestinationConfigs"][0]
    text = str(destination)
    assert "log-group:aws-waf-logs-kit-us-east-1" in text and not text.endswith(":*']}")
    assert logging["DependsOn"] == [group_id]  # the group exists before WAF delivers to it
