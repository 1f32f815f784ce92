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
- RequestBodyTooLarge (our own, blocking, before the managed groups): a body larger than the largest question
  needs. Triton 2.51 has no body limit and an 8 MB body in small chunks crashes it (container/README.md,
  "Limits"); the host's edge caps bodies too, this rule stops them before they cost a host anything.
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
# AWS WAF sees at most the first 8 KB (8,192 bytes) of a body behind an Application Load Balancer, a fixed
# limit (AWS WAF API reference, Body: "For Application Load Balancer and AWS AppSync, the limit is fixed at
# 8 KB"). OversizeHandling MATCH makes a body past it match the size rule, i.e. blocked: without it WAF
# compares the first 8 KB only and passes a body of any size.
# gRPC requests skip body-inspection rules altogether (AWS WAF developer guide, "Considerations for
# managing body inspection"), so a long-lived ModelStreamInfer stream is never blocked by this rule: each
# gRPC message is capped on the host instead (container/edge, grpc.max_receive_message_length).
ALB_BODY_INSPECTION_LIMIT_BYTES = 8_192
# The question limit the container enforces (container/assistant/request.py, RequestLimits.max_prompt_chars);
# a test keeps the two equal.
MAX_QUESTION_CHARS = 4_000
# UTF-8 spends at most 4 bytes on a character; around the question: tensor names, the stream flag and the
# sampling parameters clients send (a few hundred bytes of JSON), with room to spare.
UTF8_MAX_BYTES_PER_CHAR = 4
REQUEST_ENVELOPE_BYTES = 2_048
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
    # The longest question the container accepts: it sizes the body rule (request_body_limit_bytes).
    max_question_chars: int = MAX_QUESTION_CHARS


def request_body_limit_bytes(max_question_chars: int) -> int:
    """The largest body a valid question needs, as far as WAF can count on an ALB. Past the 8 KB WAF sees,
    every body is blocked (OversizeHandling MATCH): with the default 4,000-character limit that is the
    bound, so a question of 4,000 ASCII characters passes and one of over ~2,000 in a 3-byte script (CJK)
    is blocked at the edge (the host's own cap, container/edge, allows the full limit in any script)."""
    needed = max_question_chars * UTF8_MAX_BYTES_PER_CHAR + REQUEST_ENVELOPE_BYTES
    return min(needed, ALB_BODY_INSPECTION_LIMIT_BYTES)


def body_size_rule(props: WebAclProps, priority: int) -> wafv2.CfnWebACL.RuleProperty:
    return wafv2.CfnWebACL.RuleProperty(
        name="RequestBodyTooLarge",
        priority=priority,
        action=wafv2.CfnWebACL.RuleActionProperty(block={}),
        statement=wafv2.CfnWebACL.StatementProperty(
            size_constraint_statement=wafv2.CfnWebACL.SizeConstraintStatementProperty(
                comparison_operator="GT",
                size=request_body_limit_bytes(props.max_question_chars),
                field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(
                    body=wafv2.CfnWebACL.BodyProperty(oversize_handling="MATCH")
                ),
                text_transformations=[wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")],
            )
        ),
        visibility_config=_visibility(f"{props.name}-body-too-large"),
    )


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
        rules.append(body_size_rule(props, priority=len(rules)))
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
