"""The web ACL in front of the ALB: rules that suit a JSON/gRPC inference API, logged, secrets redacted."""

import pytest
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk.assertions import Match, Template

from assistant.request import RequestLimits
from cdk_constructs.log_encryption import EncryptedLogs, LogProps
from cdk_constructs.web_acl import (
    ALB_BODY_INSPECTION_LIMIT_BYTES,
    COMMON_RULES_COUNTED,
    MAX_QUESTION_CHARS,
    ServingWebAcl,
    WebAclProps,
    request_body_limit_bytes,
)

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
    assert sorted(rule["Priority"] for rule in rules.values()) == [0, 1, 2, 3, 4]


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
    assert sorted(rule["Priority"] for rule in rules.values()) == [0, 1, 2, 3, 4, 5]


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
    assert sorted(rule["Priority"] for rule in rules.values()) == [0, 1, 2, 3, 4]
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


def test_a_body_larger_than_a_question_needs_is_blocked_even_past_what_waf_can_see(template):
    """Triton 2.51 takes any body (an 8 MB one crashed it): the size rule blocks, and a body past the 8 KB WAF
    inspects on an ALB matches (OversizeHandling MATCH) instead of passing on its first 8 KB."""
    rules = _rules(template)
    rule = rules["RequestBodyTooLarge"]
    assert rule["Action"] == {"Block": {}}
    statement = rule["Statement"]["SizeConstraintStatement"]
    assert statement["FieldToMatch"] == {"Body": {"OversizeHandling": "MATCH"}}
    assert statement["ComparisonOperator"] == "GT"
    assert (
        statement["Size"] == request_body_limit_bytes(MAX_QUESTION_CHARS) == ALB_BODY_INSPECTION_LIMIT_BYTES
    )
    # Before the managed groups: a large body costs them nothing.
    managed = [r["Priority"] for r in rules.values() if "ManagedRuleGroupStatement" in r["Statement"]]
    assert rule["Priority"] < min(managed)


def test_the_body_limit_follows_the_question_limit_up_to_what_waf_can_see(stack, vpc):
    short = WebAclProps("kit-us-east-1", 750, 120, max_question_chars=1_000)
    statement = _rules(_build(stack, vpc, short))["RequestBodyTooLarge"]["Statement"][
        "SizeConstraintStatement"
    ]
    # 1,000 characters of 4-byte UTF-8 and the request around them.
    assert statement["Size"] == 1_000 * 4 + 2_048 < ALB_BODY_INSPECTION_LIMIT_BYTES
    assert request_body_limit_bytes(100_000) == ALB_BODY_INSPECTION_LIMIT_BYTES


def test_the_question_limit_is_the_one_the_container_enforces():
    assert RequestLimits().max_prompt_chars == MAX_QUESTION_CHARS
