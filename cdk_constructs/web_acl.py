"""AWS WAF in front of the region's ALB: a rate limit per client IP and AWS managed rules that suit a JSON
and gRPC inference API, logged to an encrypted log group with credentials redacted.

Rule choice (all AWS managed groups without a subscription fee; 927 of the 1,500 WCUs a web ACL includes):
- AWSManagedRulesAmazonIpReputationList: sources AWS threat intelligence flags (bots, scanners, DDoS
  hosts); it reads no body, so it cannot misfire on prompts.
- AWSManagedRulesKnownBadInputsRuleSet: Log4j/Spring4Shell/Java deserialization patterns and localhost
  Host headers: exploits aimed at the stack, not at prompt text.
- AWSManagedRulesCommonRuleSet (OWASP-style core rules) with its BODY rules set to count: a prompt is free
  text (a shopper may paste "<b>", a path or a URL), gRPC bodies are binary protobuf frames that WAF scans
  as text, and SizeRestrictions_BODY would block every request over 8 KB, i.e. long prompts. Counted, they
  still show in the logs and metrics; the header, URI and query-string rules block.
- Not AWSManagedRulesSQLiRuleSet: no SQL store behind the endpoint, and its body rules would flag prompts
  that merely mention SQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from cdk_constructs.log_encryption import EncryptedLogs

# WAF accepts CloudWatch Logs destinations only under this prefix.
WAF_LOG_GROUP_PREFIX = "aws-waf-logs-"
# Core rule set rules that inspect the request body: counted, not blocking (see the module's docstring).
COMMON_RULES_COUNTED = (
    "SizeRestrictions_BODY",
    "CrossSiteScripting_BODY",
    "GenericLFI_BODY",
    "GenericRFI_BODY",
    "EC2MetaDataSSRF_BODY",
)
# Managed groups in evaluation order (after the rate limit), each with the rules that only count.
MANAGED_RULE_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("AWSManagedRulesAmazonIpReputationList", ()),
    ("AWSManagedRulesKnownBadInputsRuleSet", ()),
    ("AWSManagedRulesCommonRuleSet", COMMON_RULES_COUNTED),
)
# Kept out of the logs: bearer tokens, API keys in Authorization, session cookies.
REDACTED_HEADERS = ("authorization", "cookie")


@dataclass(frozen=True)
class WebAclProps:
    name: str  # names the web ACL, its metrics and (with the prefix) its log group
    rate_limit_per_ip: int  # per client, as rate_limit_key counts them
    rate_limit_window_seconds: int
    # "ip": the connecting address; "forwarded_ip": the first address in `rate_limit_header`; "header": the
    # header's value (settings/operations.py, WafConfig, says when each fits).
    rate_limit_key: str = "ip"
    rate_limit_header: str | None = None
    # With a key other than ip: a per-address rule beside it, for requests without the header (WAF leaves
    # those out of a keyed rate rule) and as the ceiling of any one address.
    source_ip_backstop_limit: int | None = None


def rate_based_statement(props: WebAclProps) -> wafv2.CfnWebACL.RateBasedStatementProperty:
    """What the rate rule counts per. A forwarded address without a valid value falls back to MATCH: those
    requests are counted together as one client rather than let through uncounted (AWS WAF developer
    guide, "Using forwarded IP addresses")."""
    window = props.rate_limit_window_seconds
    limit = props.rate_limit_per_ip
    if props.rate_limit_key == "forwarded_ip":
        return wafv2.CfnWebACL.RateBasedStatementProperty(
            aggregate_key_type="FORWARDED_IP",
            forwarded_ip_config=wafv2.CfnWebACL.ForwardedIPConfigurationProperty(
                header_name=props.rate_limit_header or "X-Forwarded-For", fallback_behavior="MATCH"
            ),
            limit=limit,
            evaluation_window_sec=window,
        )
    if props.rate_limit_key == "header":
        assert props.rate_limit_header is not None  # validated with the settings
        return wafv2.CfnWebACL.RateBasedStatementProperty(
            aggregate_key_type="CUSTOM_KEYS",
            custom_keys=[
                wafv2.CfnWebACL.RateBasedStatementCustomKeyProperty(
                    header=wafv2.CfnWebACL.RateLimitHeaderProperty(
                        name=props.rate_limit_header,
                        text_transformations=[
                            wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")
                        ],
                    )
                )
            ],
            limit=limit,
            evaluation_window_sec=window,
        )
    return wafv2.CfnWebACL.RateBasedStatementProperty(
        aggregate_key_type="IP", limit=limit, evaluation_window_sec=window
    )


def _visibility(metric_name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=metric_name, sampled_requests_enabled=True
    )


class ServingWebAcl(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        props: WebAclProps,
        logs: EncryptedLogs,
        load_balancer: elbv2.IApplicationLoadBalancer,
    ) -> None:
        super().__init__(scope, id)
        rate_limits = [
            ("RateLimitPerClientIp" if props.rate_limit_key == "ip" else "RateLimitPerClient",
             rate_based_statement(props), "rate-limit"),
        ]  # fmt: skip
        if props.rate_limit_key != "ip" and props.source_ip_backstop_limit is not None:
            backstop = WebAclProps(
                props.name, props.source_ip_backstop_limit, props.rate_limit_window_seconds
            )
            rate_limits.append(("RateLimitPerSourceIp", rate_based_statement(backstop), "source-ip-limit"))
        rules = [
            wafv2.CfnWebACL.RuleProperty(
                name=name,
                priority=priority,
                action=wafv2.CfnWebACL.RuleActionProperty(block={}),
                statement=wafv2.CfnWebACL.StatementProperty(rate_based_statement=statement),
                visibility_config=_visibility(f"{props.name}-{metric}"),
            )
            for priority, (name, statement, metric) in enumerate(rate_limits)
        ]
        for priority, (group, counted) in enumerate(MANAGED_RULE_GROUPS, start=len(rules)):
            rules.append(
                wafv2.CfnWebACL.RuleProperty(
                    name=group,
                    priority=priority,
                    override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                            vendor_name="AWS",
                            name=group,
                            rule_action_overrides=[
                                wafv2.CfnWebACL.RuleActionOverrideProperty(
                                    name=rule, action_to_use=wafv2.CfnWebACL.RuleActionProperty(count={})
                                )
                                for rule in counted
                            ]
                            or None,
                        )
                    ),
                    visibility_config=_visibility(f"{props.name}-{group}"),
                )
            )
        self.web_acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            name=props.name,
            scope="REGIONAL",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            rules=rules,
            visibility_config=_visibility(props.name),
        )
        wafv2.CfnWebACLAssociation(
            self,
            "Association",
            resource_arn=load_balancer.load_balancer_arn,
            web_acl_arn=self.web_acl.attr_arn,
        )
        log_group_name = f"{WAF_LOG_GROUP_PREFIX}{props.name}"
        self.log_group = logs.log_group("WafLogs", log_group_name=log_group_name)
        # WAF wants the log group's ARN without the ":*" that LogGroup.log_group_arn carries.
        destination = Stack.of(self).format_arn(
            service="logs",
            resource="log-group",
            resource_name=log_group_name,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        logging = wafv2.CfnLoggingConfiguration(
            self,
            "Logging",
            resource_arn=self.web_acl.attr_arn,
            log_destination_configs=[destination],
            redacted_fields=[
                wafv2.CfnLoggingConfiguration.FieldToMatchProperty(single_header={"Name": header})
                for header in REDACTED_HEADERS
            ],
        )
        logging.node.add_dependency(self.log_group)
