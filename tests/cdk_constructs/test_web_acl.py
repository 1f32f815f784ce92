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
