"""The region's one ALB: HTTPS in, least-outstanding-requests target groups shared by every fleet.

Two target groups because ALB speaks one protocol version per group: gRPC (HTTP/2, Triton's
ModelStreamInfer stream) and HTTP/1.1 (generate_stream). The HTTPS listener forwards an allow-list and
answers everything else with a fixed 404: the served models' inference, readiness and metadata paths go
to the HTTP group, the five serving RPCs of Triton's gRPC service to the gRPC group. Triton's admin APIs
(model load/unload, shared memory, config, logging, trace, statistics) never reach a host from the
internet, and a request carrying the admin key header is refused whatever its path (the container side
restricts the same APIs behind that header: container/entrypoint/admin_api.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_constructs.log_encryption import EncryptedLogs
from cdk_constructs.nag import acknowledge
from cdk_constructs.web_acl import ServingWebAcl, WebAclProps

# Triton's gRPC readiness RPC. ALB gRPC health checks send an empty request and look only at the status
# code, so the per-model RPC (which needs a model name) cannot be used. Triton opens its endpoints only
# after its startup models have loaded (the entrypoint loads `assistant` at start and exits on error), so an
# answer at all means the model is up; the HTTP group checks the model's own readiness as well.
GRPC_READY_PATH = "/inference.GRPCInferenceService/ServerReady"
GRPC_SERVICE = "/inference.GRPCInferenceService"
# What a client of the assistant needs over gRPC: inference (unary and streaming), readiness, metadata.
GRPC_SERVING_METHODS = ("ModelInfer", "ModelStreamInfer", "ServerReady", "ModelReady", "ModelMetadata")
# The HTTP paths per served model (KServe v2 and Triton's generate extension); metadata is the bare path.
HTTP_SERVING_SUFFIXES = ("/infer", "/generate", "/generate_stream", "/ready", "")
# Triton checks the admin key in this HTTP header, and in gRPC metadata under Triton's prefix
# (docs/customization_guide/inference_protocols.md, "Limit Endpoint Access"); the container module
# entrypoint/admin_api.py holds the same names, and a test keeps the two equal.
ADMIN_KEY_HEADER = "serving-admin-key"
ADMIN_KEY_GRPC_HEADER = f"triton-grpc-protocol-{ADMIN_KEY_HEADER}"
NOT_FOUND_BODY = "Not found"
# What a serving task may do to the target groups: leave them when its engine dies.
DEREGISTER_TARGETS_ACTION = "elasticloadbalancing:DeregisterTargets"


def grpc_serving_paths() -> list[str]:
    return [f"{GRPC_SERVICE}/{method}" for method in GRPC_SERVING_METHODS]


def http_serving_paths(model: str) -> list[str]:
    return [f"/v2/models/{model}{suffix}" for suffix in HTTP_SERVING_SUFFIXES]


@dataclass(frozen=True)
class CertificateFromArn:
    arn: str


@dataclass(frozen=True)
class CertificateFromDns:
    """A certificate created in the stack and validated through records in this hosted zone."""

    domain_name: str
    hosted_zone_id: str
    hosted_zone_name: str


# The ALB's limits for a target group's health check (ELB User Guide, "Health checks for Application Load
# Balancer target groups", settings table): interval 5-300 s, timeout 2-120 s (and below the interval, or a
# slow answer would overlap the next check), healthy and unhealthy thresholds 2-10.
INTERVAL_RANGE = (5, 300)
TIMEOUT_RANGE = (2, 120)
THRESHOLD_RANGE = (2, 10)


@dataclass(frozen=True)
class HealthCheckTiming:
    """Both target groups' health-check timing, checked against the ALB's limits when built."""

    interval_seconds: int
    timeout_seconds: int
    healthy_threshold: int
    unhealthy_threshold: int

    def __post_init__(self) -> None:
        checks = {
            "interval_seconds": (self.interval_seconds, INTERVAL_RANGE),
            "timeout_seconds": (self.timeout_seconds, TIMEOUT_RANGE),
            "healthy_threshold": (self.healthy_threshold, THRESHOLD_RANGE),
            "unhealthy_threshold": (self.unhealthy_threshold, THRESHOLD_RANGE),
        }
        for name, (value, (low, high)) in checks.items():
            if not low <= value <= high:
                raise ValueError(f"health check {name} {value} is outside the ALB's range {low}-{high}")
        if self.timeout_seconds >= self.interval_seconds:
            raise ValueError(
                f"health check timeout_seconds {self.timeout_seconds} must be below "
                f"interval_seconds {self.interval_seconds}"
            )

    @property
    def dead_target_seconds(self) -> int:
        """The longest a target that answers not-ready (or refuses connections) keeps taking requests: it
        fails just after a passing check, then `unhealthy_threshold` failed checks one interval apart."""
        return self.interval_seconds * self.unhealthy_threshold


# The ALB's floor: a target whose engine died answers not-ready at once (container/README.md, "No silent
# failures"), and least outstanding requests sends a target that fails every request at once far more than
# its share (it holds none), so every second it stays in rotation costs most of the group's requests. At
# 5 s x 2 it is out 5-10 s after readiness fails (each ALB node checks on its own phase: 7.5 s on average);
# at the 10 s x 5 this kit had, 40-50 s, ~87% of a region's requests for most of a minute when a tenth of
# its engines die (docs/gameday.md, engine-deaths). The costs: every ALB node checks every target every
# 5 s, so a host answers 0.2 readiness requests a second per node per target group (each a cheap answer
# that waits for no engine); and two answers in a row slower than the timeout (4 s) take a target out. A
# flap costs little: the target is back after two passing checks (10 s), and ECS starts a replacement for
# a task the ALB finds unhealthy before it stops it (Amazon ECS, What's New, 23 October 2023).
DEFAULT_HEALTH_CHECK = HealthCheckTiming(
    interval_seconds=5, timeout_seconds=4, healthy_threshold=2, unhealthy_threshold=2
)


@dataclass(frozen=True)
class LoadBalancerProps:
    certificate: CertificateFromArn | CertificateFromDns
    http_port: int
    grpc_port: int
    ready_path: str  # Triton's per-model readiness: /v2/models/<name>/ready
    served_models: tuple[str, ...]  # the models whose serving paths the listener forwards
    # Both at least the longest stream the config allows: a stream is one request, and the prefill before
    # its first byte is silence on the connection.
    idle_timeout_seconds: int
    deregistration_delay_seconds: int
    # On unless the config turns it off for teardown (`make destroy` refuses while it is on).
    deletion_protection: bool = True
    web_acl: WebAclProps | None = None  # None: no WAF in front of the ALB
    access_log_days: int = 90
    health_check: HealthCheckTiming = DEFAULT_HEALTH_CHECK  # both target groups'


class ServingLoadBalancer(Construct):
    """ALB, HTTPS listener, the HTTP-to-HTTPS redirect, the shared target groups, the web ACL, the access-log
    bucket and the balancer's alarms."""

    def __init__(
        self, scope: Construct, id: str, *, props: LoadBalancerProps, vpc: ec2.IVpc, logs: EncryptedLogs
    ) -> None:
        super().__init__(scope, id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="Serving ALB: HTTPS from clients, HTTP only to redirect",
            allow_all_outbound=False,
        )
        self.security_group.add_ingress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS from clients")
        self.security_group.add_ingress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(80), "HTTP from clients, answered with a redirect to HTTPS"
        )
        acknowledge(
            self.security_group,
            "AwsSolutions-EC23",
            "The assistant's public endpoint: HTTPS from anywhere is its purpose, port 80 only redirects "
            "to it, and AWS WAF rate-limits and filters in front of both.",
        )
        self.alb = elbv2.ApplicationLoadBalancer(
            self,
            "Alb",
            vpc=vpc,
            internet_facing=True,
            security_group=self.security_group,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC),
            idle_timeout=Duration.seconds(props.idle_timeout_seconds),
            http2_enabled=True,
            drop_invalid_header_fields=True,
            deletion_protection=props.deletion_protection,
        )
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,  # the only encryption ALB log delivery supports
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(props.access_log_days))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        acknowledge(
            self.access_logs,
            "AwsSolutions-S1",
            "This bucket holds the ALB's access logs; logging access to it would need another log "
            "bucket without end.",
        )
        self.alb.log_access_logs(self.access_logs, "alb")

        timing = props.health_check
        self.http_targets = self._target_group(
            "HttpTargets",
            vpc,
            props,
            props.http_port,
            elbv2.ApplicationProtocolVersion.HTTP1,
            elbv2.HealthCheck(path=props.ready_path, healthy_http_codes="200", **self._timing(timing)),
        )
        self.grpc_targets = self._target_group(
            "GrpcTargets",
            vpc,
            props,
            props.grpc_port,
            elbv2.ApplicationProtocolVersion.GRPC,
            elbv2.HealthCheck(path=GRPC_READY_PATH, healthy_grpc_codes="0", **self._timing(timing)),
        )

        self.listener = self.alb.add_listener(
            "Https",
            port=443,
            protocol=elbv2.ApplicationProtocol.HTTPS,
            ssl_policy=elbv2.SslPolicy.RECOMMENDED_TLS,
            certificates=[
                elbv2.ListenerCertificate.from_certificate_manager(self._certificate(props.certificate))
            ],
            default_action=self._not_found(),
            open=False,
        )
        self._serving_rules(props.served_models)
        # Port 80 answers every request with a permanent redirect to 443 and forwards nothing; the security
        # group rule above is its only opening.
        self.redirect_listener = self.alb.add_redirect(source_port=80, target_port=443, open=False)
        self.web_acl = (
            ServingWebAcl(self, "Waf", props=props.web_acl, logs=logs, load_balancer=self.alb)
            if props.web_acl
            else None
        )
        self.alarms = self._alarms()

    def grant_deregister_targets(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let a serving task take its own target out of both target groups when its engine dies
        (container/serving/leave_target_groups.py): DeregisterTargets on these two groups, nothing else.
        IAM has no condition key for the target's id, so the grantee could deregister any target of these
        groups (docs/security.md); it cannot register one, nor touch another group or the listener."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=[DEREGISTER_TARGETS_ACTION],
            resource_arns=[self.http_targets.target_group_arn, self.grpc_targets.target_group_arn],
        )

    @staticmethod
    def _not_found() -> elbv2.ListenerAction:
        return elbv2.ListenerAction.fixed_response(
            404, content_type="text/plain", message_body=NOT_FOUND_BODY
        )

    def _serving_rules(self, models: tuple[str, ...]) -> None:
        """The allow-list. Exact paths, no wildcards: a pattern such as /v2/models/* would also match
        /v2/models/<name>/config and /stats (model-config, statistics). An ALB rule takes at most five
        condition values, hence one rule for the gRPC methods and one per model."""
        for number, header in enumerate((ADMIN_KEY_HEADER, ADMIN_KEY_GRPC_HEADER), start=1):
            self.listener.add_action(
                f"RefuseAdminKey{number}",
                priority=number,
                conditions=[elbv2.ListenerCondition.http_header(header, ["*"])],
                action=self._not_found(),
            )
        self.listener.add_action(
            "GrpcServingMethods",
            priority=10,
            conditions=[elbv2.ListenerCondition.path_patterns(grpc_serving_paths())],
            action=elbv2.ListenerAction.forward([self.grpc_targets]),
        )
        for number, model in enumerate(models):
            self.listener.add_action(
                f"HttpServing{number}",
                priority=20 + number,
                conditions=[elbv2.ListenerCondition.path_patterns(http_serving_paths(model))],
                action=elbv2.ListenerAction.forward([self.http_targets]),
            )

    @staticmethod
    def _timing(timing: HealthCheckTiming) -> dict[str, object]:
        return {
            "port": "traffic-port",
            "interval": Duration.seconds(timing.interval_seconds),
            "timeout": Duration.seconds(timing.timeout_seconds),
            "healthy_threshold_count": timing.healthy_threshold,
            "unhealthy_threshold_count": timing.unhealthy_threshold,
        }

    def _target_group(
        self,
        id: str,
        vpc: ec2.IVpc,
        props: LoadBalancerProps,
        port: int,
        version: elbv2.ApplicationProtocolVersion,
        health_check: elbv2.HealthCheck,
    ) -> elbv2.ApplicationTargetGroup:
        # No slow start: ALB refuses it together with least outstanding requests, and a host that passed
        # the readiness check is fully warm (weights and compiled graphs loaded).
        return elbv2.ApplicationTargetGroup(
            self,
            id,
            vpc=vpc,
            port=port,
            protocol=elbv2.ApplicationProtocol.HTTP,
            protocol_version=version,
            target_type=elbv2.TargetType.IP,
            load_balancing_algorithm_type=elbv2.TargetGroupLoadBalancingAlgorithmType.LEAST_OUTSTANDING_REQUESTS,
            deregistration_delay=Duration.seconds(props.deregistration_delay_seconds),
            health_check=health_check,
        )

    def _certificate(self, source: CertificateFromArn | CertificateFromDns) -> acm.ICertificate:
        if isinstance(source, CertificateFromArn):
            return acm.Certificate.from_certificate_arn(self, "Certificate", source.arn)
        zone = route53.HostedZone.from_hosted_zone_attributes(
            self, "Zone", hosted_zone_id=source.hosted_zone_id, zone_name=source.hosted_zone_name
        )
        return acm.Certificate(
            self,
            "Certificate",
            domain_name=source.domain_name,
            validation=acm.CertificateValidation.from_dns(zone),
        )

    def _alarms(self) -> list[cloudwatch.Alarm]:
        alarms = []
        for name, group in (("Http", self.http_targets), ("Grpc", self.grpc_targets)):
            alarms.append(
                cloudwatch.Alarm(
                    self,
                    f"{name}NoHealthyTargets",
                    alarm_description=f"No healthy {name} target behind the region's ALB",
                    metric=group.metrics.healthy_host_count(statistic="Minimum", period=Duration.minutes(1)),
                    threshold=1,
                    comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                    evaluation_periods=3,
                    treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
                )
            )
        alarms.append(
            cloudwatch.Alarm(
                self,
                "Elb5xxRate",
                alarm_description="More than 5% of requests fail at the ALB (no target, timeouts, resets)",
                metric=cloudwatch.MathExpression(
                    expression="IF(requests > 0, 100 * FILL(errors, 0) / requests, 0)",
                    using_metrics={
                        "errors": self.alb.metrics.http_code_elb(
                            elbv2.HttpCodeElb.ELB_5XX_COUNT, period=Duration.minutes(1)
                        ),
                        "requests": self.alb.metrics.request_count(period=Duration.minutes(1)),
                    },
                    period=Duration.minutes(1),
                ),
                threshold=5,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=5,
                datapoints_to_alarm=3,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        )
        return alarms
