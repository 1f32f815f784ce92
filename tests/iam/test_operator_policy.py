"""The operator policy the kit ships (iam/operator-policy.json, rendered for a config by
ops/operator_policy.py) proven against the operator tools' own AWS calls, with moto enforcing IAM:

- every call the tools make (`make deploy`'s waves, with their healthy-targets and first-run waits and the
  hosts' AMI roll, and its preflight, `make traffic`, `make destroy`'s release, `make compile`) is granted;
- each granted action is needed: taken away, some tool's call is refused;
- each granted action is exercised by some tool, or named below as one AWS checks on the operator's behalf
  (beside a call the kit makes, or inside the CDK CLI), with its source;
- a Resource "*" only on actions whose IAM documentation allows no resource-level scoping (listed with the
  source) or that an AWS rule needs on "*" (settings/aws_rules.py), and no action wildcards;
- DescribeAlarms sees the composite alarms the deploy's waves watch (rule (a) of settings/aws_rules.py).

moto authorizes requests of services other than S3 against resource "*" only (tests/iam/policies.py), so the
non-S3 statements are widened to "*" to prove the ACTIONS, and their resources are asserted on the rendered
policy itself; the S3 statements keep their resources, which moto checks. Route 53 runs through the
Unenforced WORKAROUND (moto 5.2.5 refuses every enforced Route 53 request); its grant is asserted by its
exercise and its resource."""

from __future__ import annotations

import contextlib
import fnmatch
import io
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.iam.access_control import IAMRequest, S3IAMRequest

from ops import deploy_readiness, deploy_waves, host_roll, release_capacity, stack_state, traffic
from ops.compile import fleet_artifacts, fleet_resources, manifest_exists, start_compile
from ops.operator_policy import TEMPLATE, render
from ops.preflight import aws as preflight_aws
from ops.preflight.checks import (
    ECS_CONTAINER_INSTANCES,
    ELB_SERVICE_CODE,
    ELB_TARGETS_PER_TARGET_GROUP,
    AmiDrift,
)
from settings import load_settings
from settings.aws_limits import INTERNET_GATEWAYS_PER_REGION, NAT_GATEWAYS_PER_ZONE, VPCS_PER_REGION
from settings.aws_rules import DESCRIBE_ALARMS_COMPOSITES_NEED_STAR, Rule, describe_alarms_sees_composites
from stacks.routing_names import neuron_ami_parameter, powertools_layer_parameter, stack_name
from tests.iam.policies import ACCOUNT, Unenforced, assumed_session, enforced, suspended
from tests.ops.compile_fleet import compile_fleet, resource_names
from tests.ops.test_deploy_waves import load_balancer, run_orchestrator, serve_global

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"

# Actions that take no resource-level scoping in IAM: the Service Authorization Reference lists no resource
# type for them (https://docs.aws.amazon.com/service-authorization/latest/reference/, one page per service:
# list_amazonec2.html, list_amazonelasticcontainerservice.html, list_awslambda.html,
# list_servicequotas.html, list_awselasticloadbalancingv2.html, list_amazonec2autoscaling.html,
# list_applicationautoscaling.html, list_amazoncloudwatch.html; each page: "If there is no value for this
# column, you must specify all resources ("*")"). EC2's user guide says the same of every Describe action
# ("Describe actions do not support resource-level permissions"), and so do ELBv2's Describe actions (the
# target-health wait's reads) and Auto Scaling's (DescribeInstanceRefreshes: the AMI roll's watch).
NO_RESOURCE_SCOPE = {
    "application-autoscaling:DescribeScalableTargets": "list_applicationautoscaling.html",
    "autoscaling:DescribeAutoScalingGroups": "list_amazonec2autoscaling.html",
    "autoscaling:DescribeInstanceRefreshes": "list_amazonec2autoscaling.html",
    "cloudwatch:GetMetricData": "list_amazoncloudwatch.html",
    "ec2:DescribeAccountAttributes": "list_amazonec2.html (Describe*: no resource-level permissions)",
    "ec2:DescribeAddresses": "list_amazonec2.html",
    "ec2:DescribeCapacityReservations": "list_amazonec2.html",
    "ec2:DescribeInstanceTypeOfferings": "list_amazonec2.html",
    "ec2:DescribeInstances": "list_amazonec2.html",
    "ec2:DescribeInternetGateways": "list_amazonec2.html",
    "ec2:DescribeLaunchTemplateVersions": "list_amazonec2.html",
    "ec2:DescribeNatGateways": "list_amazonec2.html",
    "ec2:DescribeSubnets": "list_amazonec2.html",
    "ec2:DescribeVpcs": "list_amazonec2.html",
    "ecs:ListClusters": "list_amazonelasticcontainerservice.html",
    "ecs:ListServices": "list_amazonelasticcontainerservice.html (only the ecs:cluster condition key)",
    "elasticloadbalancing:DescribeAccountLimits": "list_awselasticloadbalancingv2.html",
    "elasticloadbalancing:DescribeLoadBalancers": "list_awselasticloadbalancingv2.html",
    "elasticloadbalancing:DescribeTags": "list_awselasticloadbalancingv2.html",
    "elasticloadbalancing:DescribeTargetGroups": "list_awselasticloadbalancingv2.html",
    "elasticloadbalancing:DescribeTargetHealth": "list_awselasticloadbalancingv2.html",
    "lambda:GetAccountSettings": "list_awslambda.html",
    "servicequotas:GetAWSDefaultServiceQuota": "list_servicequotas.html",
    "servicequotas:GetServiceQuota": "list_servicequotas.html",
    "servicequotas:ListAWSDefaultServiceQuotas": "list_servicequotas.html",
    "servicequotas:ListServiceQuotas": "list_servicequotas.html",
}
# Granted on "*" though IAM could scope them, because an AWS rule needs "*".
STAR_BY_AN_AWS_RULE: dict[str, Rule] = {"cloudwatch:DescribeAlarms": DESCRIBE_ALARMS_COMPOSITES_NEED_STAR}
# Granted, though no kit code calls them: AWS checks them for the operator on a call the kit makes, or the
# CDK CLI makes the call.
CHECKED_ON_THE_OPERATORS_BEHALF = {
    # `cdk deploy` / `cdk diff` (make deploy, make compile APPROVE=1) assume the bootstrap's roles; the
    # deploy itself runs as the deploy role (CDK developer guide, "Bootstrapping": the roles it creates).
    "sts:AssumeRole": "CDK CLI",
    # RunTask with a task role or execution role: "the user must have iam:PassRole" for them (ECS
    # developer guide, "Amazon ECS task IAM role" and "task execution IAM role").
    "iam:PassRole": "ecs:RunTask",
    # RunTask with tags: ECS authorizes ecs:TagResource on the task it creates (ECS developer guide, "Grant
    # permission to tag resources on creation", condition ecs:CreateAction).
    "ecs:TagResource": "ecs:RunTask",
}
# The IAM action a call is authorized as, where it is not the operation's own name.
AUTHORIZED_AS = {"s3:HeadObject": "s3:GetObject"}  # S3 API reference, HeadObject: "you need s3:GetObject"


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def _resources(statement: dict[str, Any]) -> list[str]:
    resource = statement["Resource"]
    return resource if isinstance(resource, list) else [resource]


def granted(policy: dict[str, Any]) -> set[str]:
    return {a for s in policy["Statement"] for a in _actions(s)}


def widened(policy: dict[str, Any], drop: str | None = None) -> dict[str, Any]:
    """Non-S3 statements with resource "*" and no condition (moto checks those against "*" only), each
    `cloudwatch:` action also granted as moto's `monitoring:`; S3 statements as shipped. `drop` removes one
    action."""
    statements = []
    for statement in policy["Statement"]:
        actions = [a for a in _actions(statement) if a != drop]
        if not actions:
            continue
        if all(a.startswith("s3:") for a in actions):
            statements.append({**statement, "Action": actions})
            continue
        aliases = [f"monitoring:{a.split(':', 1)[1]}" for a in actions if a.startswith("cloudwatch:")]
        statements.append({"Effect": "Allow", "Action": actions + aliases, "Resource": "*"})
    return {**policy, "Statement": statements}


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return load_settings(REPO / "config" / "default.yaml")


@pytest.fixture(scope="module")
def policy(settings) -> dict[str, Any]:
    return render(settings, ACCOUNT)


@pytest.fixture(scope="module")
def account(settings, tmp_path_factory) -> Iterator[Path]:
    """A deployed region as the tools find it: the project's tagged cluster, service and scalable target,
    its protected hosts (an Auto Scaling group tagged `project`, launching a launch template), its load
    balancer tagged as the stacks tag it with healthy targets in both target groups, the global stack's
    NotRunning alarm with one orchestrator run, the compiled artifacts, the routing records and state; a
    config naming moto's hosted zone."""
    monkeypatch = pytest.MonkeyPatch()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    from tests.ops.test_release_capacity import _deploy

    tmp_path = tmp_path_factory.mktemp("operator")
    with mock_aws():
        session = boto3.Session(region_name=REGION)
        _deploy(session, settings.project)
        # A fleet `make compile` can start its task on: an awsvpc compile task definition, the service's
        # subnets and security group.
        compile_fleet(session, settings.project, REGION)
        # What the waves' healthy-targets wait and first-run wait read (ops/deploy_readiness.py).
        load_balancer(session, REGION, f"{settings.project}-alb", {"project": settings.project})
        serve_global(session)
        run_orchestrator(session, datetime.now(UTC) - timedelta(minutes=5))
        # Another team's NAT gateway: the preflight counts it per zone (through its subnet).
        ec2 = session.client("ec2")
        vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.0.0/24")["Subnet"]["SubnetId"]
        address = ec2.allocate_address(Domain="vpc")["AllocationId"]
        ec2.create_nat_gateway(SubnetId=subnet, AllocationId=address)
        s3 = session.client("s3")
        for artifact in fleet_artifacts(settings):
            if artifact.bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
                s3.create_bucket(Bucket=artifact.bucket)
            s3.put_object(Bucket=artifact.bucket, Key=artifact.manifest_key, Body=b"{}")
        route53 = session.client("route53")
        zone = route53.create_hosted_zone(Name="example.com", CallerReference="z")["HostedZone"]["Id"]
        session.client("ssm").put_parameter(
            Name=f"/{settings.project}/routing/state", Value=json.dumps({"decisions": []}), Type="String"
        )
        config = tmp_path / "config.yaml"
        config.write_text(
            f"base: {REPO / 'config' / 'default.yaml'}\ntls:\n  hosted_zone_id: {zone.split('/')[-1]}\n"
        )
        yield config
    monkeypatch.undo()


class _NoAppliedQuotas:
    """A WORKAROUND for moto, not a stand-in for AWS: moto 5.2.5 authorizes ListServiceQuotas, then raises
    NotImplementedError. After moto's authorization the answer is an empty page (an account that never
    raised a quota), so the preflight goes on to ListAWSDefaultServiceQuotas as it does in AWS."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_paginator(self, operation: str) -> Any:
        paginator = self._inner.get_paginator(operation)
        if operation != "list_service_quotas":
            return paginator

        class Paginator:
            def paginate(self, **kwargs: Any) -> list[dict[str, Any]]:
                try:
                    return list(paginator.paginate(**kwargs))
                except NotImplementedError:
                    return [{"Quotas": []}]

        return Paginator()


class Refused(Exception):
    """A tool that reports AWS's refusal itself (exit status and message) rather than raising it."""


def _refusals(problems: list[str]) -> list[str]:
    """The problems a tool returns (the AMI roll's starts and cancels report AWS's errors as problems),
    raised where one is a refusal."""
    refused = [p for p in problems if "AccessDenied" in p or "not authorized" in p]
    if refused:
        raise Refused("; ".join(refused))
    return problems


def _refused(error: BaseException) -> bool:
    if isinstance(error, Refused):
        return True
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        return code in ("AccessDenied", "AccessDeniedException") or "not authorized" in str(error)
    return False


def tool_calls(settings, config: Path) -> dict[str, list[Callable[[Any], Any]]]:
    """Each operator tool's AWS calls, through the tools' own functions, given a session."""
    project = settings.project
    artifact = fleet_artifacts(settings)[0]
    quotas = (VPCS_PER_REGION, NAT_GATEWAYS_PER_ZONE, INTERNET_GATEWAYS_PER_REGION)
    cell = deploy_waves.Wave(stack=stack_name(settings, REGION), region=REGION)
    global_stack, home = f"{project}-global", settings.orchestrator_region  # stacks.props.global_stack_name
    hosts_group = f"{project}-inf2-hosts"  # the fixture's (tests/ops/test_release_capacity.py _deploy)
    # A group whose hosts run another AMI than its launch template boots: what the roll refreshes.
    drift = AmiDrift(hosts_group, "inf2.48xlarge", "ami-0new", {"ami-0old": 2}, 2)

    def client(session, service):
        made = session.client(service, region_name=REGION)
        return _NoAppliedQuotas(made) if service == "service-quotas" else made

    def traffic_run(session, *args):
        def factory(service, region):
            made = session.client(service, region_name=region)
            return Unenforced(made) if service == "route53" else made

        errors = io.StringIO()
        with contextlib.redirect_stderr(errors):
            status = traffic.main(["--config", str(config), *args], client=factory)
        if status != 0:
            if "AccessDenied" in errors.getvalue():
                raise Refused(errors.getvalue())
            raise AssertionError(f"make traffic {args}: exit {status}: {errors.getvalue()}")

    def hosts_running() -> None:
        """The project's hosts as deployed (an earlier release in this module may have ended them), so the
        AMI reads have instances to read."""
        with suspended():
            boto3.client("autoscaling", region_name=REGION).update_auto_scaling_group(
                AutoScalingGroupName=hosts_group, MinSize=2, DesiredCapacity=2
            )

    def fleet_groups(session, read):
        hosts_running()
        groups = read(session)
        assert groups and all(g.hosts and g.template_image for g in groups), groups  # real answers
        return groups

    def target_groups(session):
        groups = deploy_readiness.cell_target_groups(client(session, "elbv2"), project, None)
        assert len(groups) == 2 and all(g.states == ("healthy", "healthy") for g in groups), groups
        return groups

    def first_runs(session):
        cloudwatch = session.client("cloudwatch", region_name=home)
        metric = deploy_readiness.run_metric(deploy_readiness.stack_metric_alarms(cloudwatch, global_stack))
        assert metric is not None
        now = datetime.now(UTC)
        assert deploy_readiness.runs_since(cloudwatch, metric, now - timedelta(minutes=15), now) >= 1

    # moto 5.2.5 authorizes the three instance-refresh operations, then raises NotImplementedError
    # (measured): the refusal, or not, is moto's IAM check, so granted and needed are shown here as for any
    # other call; _run counts the NotImplementedError as the authorized call moto cannot answer.
    def start_refresh(session):
        policy = host_roll.roll_policy(settings, settings.deploy.bake_minutes)
        _refusals(host_roll.start_refreshes(client(session, "autoscaling"), [drift], policy)[1])

    def read_refresh(session):
        host_roll.read_refreshes(client(session, "autoscaling"), {hosts_group: "refresh-1"})

    def cancel_refresh(session):
        _refusals(host_roll.cancel_refreshes(client(session, "autoscaling"), [hosts_group]))

    def release(session):
        # As deployed: hosts running, protected from scale-in (an earlier release in this module ended them).
        with suspended():
            autoscaling = boto3.client("autoscaling", region_name=REGION)
            for group in autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]:
                autoscaling.update_auto_scaling_group(
                    AutoScalingGroupName=group["AutoScalingGroupName"],
                    MinSize=2,
                    DesiredCapacity=2,
                    NewInstancesProtectedFromScaleIn=True,
                )
            for group in autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]:
                ids = [i["InstanceId"] for i in group["Instances"]]
                autoscaling.set_instance_protection(
                    AutoScalingGroupName=group["AutoScalingGroupName"],
                    InstanceIds=ids,
                    ProtectedFromScaleIn=True,
                )
        return release_capacity.release_region(
            session, project, REGION, timeout_seconds=0, sleep=lambda _: None, log=lambda _: None
        )

    return {
        "preflight": [
            lambda s: preflight_aws.quota_values(client(s, "service-quotas"), ["L-1945791B"]),
            lambda s: preflight_aws.applied_quota(
                client(s, "service-quotas"), quotas[0].service, quotas[0].code, 5.0
            ),
            lambda s: preflight_aws.quotas_by_name(
                client(s, "service-quotas"), ELB_SERVICE_CODE, [ELB_TARGETS_PER_TARGET_GROUP]
            ),
            lambda s: preflight_aws.quotas_by_name(
                client(s, "service-quotas"), preflight_aws.ECS_SERVICE_CODE, [ECS_CONTAINER_INSTANCES]
            ),
            # A code moto holds AWS's defaults for: the preflight's second look, ListAWSDefaultServiceQuotas.
            lambda s: preflight_aws.quotas_by_name(client(s, "service-quotas"), "vpc", ["VPCs per Region"]),
            lambda s: preflight_aws.zone_offerings(client(s, "ec2"), ["inf2.48xlarge"]),
            lambda s: preflight_aws.capacity_reservations(client(s, "ec2"), ["cr-0123456789abcdef0"]),
            lambda s: preflight_aws.elb_limits(client(s, "elbv2")),
            lambda s: preflight_aws.elastic_ip_limit(client(s, "ec2")),
            lambda s: preflight_aws.network_use(client(s, "ec2"), project),
            lambda s: preflight_aws.parameter_exists(client(s, "ssm"), neuron_ami_parameter("recommended")),
            lambda s: preflight_aws.parameter_exists(client(s, "ssm"), powertools_layer_parameter()),
            lambda s: preflight_aws.lambda_concurrency(client(s, "lambda")),
            lambda s: manifest_exists(client(s, "s3"), artifact),
            # The AMI checks: each group's hosts' AMIs against its launch template version's.
            lambda s: fleet_groups(
                s, lambda s: preflight_aws.fleet_groups(client(s, "autoscaling"), client(s, "ec2"), project)
            ),
        ],
        "deploy waves": [
            lambda s: deploy_waves.region_services(s, project, REGION),
            lambda s: deploy_waves.read_alarms(
                client(s, "cloudwatch"), [f"{project}-{REGION}-region-degraded"]
            ),
            lambda s: stack_state.stack_status(client(s, "cloudformation"), stack_name(settings, REGION)),
            lambda s: stack_state.stack_alarms(client(s, "cloudwatch"), f"{project}-global"),
            # A cell's healthy-targets wait, the global stack's first-run wait and its alarms' data window.
            target_groups,
            first_runs,
            lambda s: deploy_readiness.breaching_window_seconds(
                deploy_readiness.stack_metric_alarms(s.client("cloudwatch", region_name=home), global_stack)
            ),
            # The hosts' AMI roll once a cell is stable (ops/host_roll.py): its reads, start, watch, cancel.
            lambda s: fleet_groups(s, lambda s: host_roll.wave_groups(s, project, cell)),
            start_refresh,
            read_refresh,
            cancel_refresh,
        ],
        "traffic": [
            lambda s: traffic_run(s, "show"),
            lambda s: traffic_run(s, "pin", "us-east-1=50", "--for", "1h"),
            lambda s: traffic_run(s, "clear"),
        ],
        "release capacity": [release],
        "compile": [
            lambda s: manifest_exists(client(s, "s3"), artifact),
            lambda s: fleet_resources(
                client(s, "cloudformation"), stack_name(settings, REGION), artifact.instance_type
            ),
            # DescribeServices (the service's network), then RunTask with that networkConfiguration: no
            # EC2 grant for the operator, since ECS attaches an awsvpc task's network interface through its
            # own service-linked role (ECS API reference, CreateService `role`: "The service-linked role
            # is required if your task definition uses the awsvpc network mode"; ECS developer guide,
            # "Using service-linked roles for Amazon ECS").
            lambda s: start_compile(client(s, "ecs"), resource_names(project), artifact),
        ],
    }


def _recorder(session) -> list[set[str]]:
    """The IAM actions of the calls made through the session, named as IAM names them, into the set at the
    end of the returned list (append a new set to start a new record)."""
    records: list[set[str]] = [set()]

    def record(model, **_):
        prefix = {"monitoring": "cloudwatch"}.get(
            model.service_model.signing_name, model.service_model.signing_name
        )
        action = f"{prefix}:{model.name}"
        records[-1].add(AUTHORIZED_AS.get(action, action))

    session.events.register("before-call", record)
    return records


def _run(call, session) -> str | None:
    """The refusal, if AWS (moto) refused the call. A call moto answers with any other error (a feature it
    does not model, a resource the fixture does not hold) was still authorized first."""
    try:
        call(session)
    except AssertionError:
        raise
    except Exception as error:  # only a refusal counts here
        if _refused(error):
            return str(error)
    return None


@pytest.fixture(scope="module")
def usage(settings, policy, account) -> dict[tuple[str, int], tuple[set[str], str | None]]:
    """Each tool call under the whole shipped policy: the actions it made and its refusal (None)."""
    session = assumed_session(widened(policy), REGION)
    records = _recorder(session)
    found = {}
    with enforced():
        for tool, calls in tool_calls(settings, account).items():
            for index, call in enumerate(calls):
                records.append(set())
                refusal = _run(call, session)
                found[(tool, index)] = (records[-1], refusal)
    return found


def test_every_operator_tool_call_is_granted_by_the_shipped_policy(usage):
    """Each call through the tool's own function (tests/iam/test_make_commands_under_the_operator_policy.py
    runs `make deploy` and `make compile` whole under the policy)."""
    assert {call: refusal for call, (_, refusal) in usage.items() if refusal} == {}
    tools = {tool for tool, _ in usage}
    assert tools == {"preflight", "deploy waves", "traffic", "release capacity", "compile"}
    assert all(actions for actions, _ in usage.values())  # every call reached AWS


def test_every_granted_action_is_exercised_by_a_tool_or_checked_on_the_operators_behalf(policy, usage):
    exercised = set().union(*(actions for actions, _ in usage.values()))
    assert granted(policy) - set(CHECKED_ON_THE_OPERATORS_BEHALF) == exercised
    assert set(CHECKED_ON_THE_OPERATORS_BEHALF) <= granted(policy)


# Granted and exercised, but moto 5.2.5 refuses them under no policy (measured), so taking them away cannot
# be shown here: Route 53 (the Unenforced workaround) and Lambda's GetAccountSettings (moto's Lambda does not
# authorize it). Their exercise is asserted above, their resources below.
MOTO_NEVER_REFUSES = ("route53:ListResourceRecordSets", "lambda:GetAccountSettings")


def _provable() -> list[str]:
    """Each action moto can refuse: all but those AWS checks beside a call (moto does not) and those moto
    never refuses."""
    policy = json.loads(TEMPLATE.read_text())
    return sorted(
        a for a in granted(policy) if a not in CHECKED_ON_THE_OPERATORS_BEHALF and a not in MOTO_NEVER_REFUSES
    )


@pytest.mark.parametrize("action", _provable())
def test_each_granted_action_is_needed(settings, policy, account, usage, action):
    """Taken away, the calls that made it are refused (only those are run again: the rest do not use it)."""
    users = [call for call, (actions, _) in usage.items() if action in actions]
    assert users, f"no tool call made {action}"
    calls = tool_calls(settings, account)
    name = "drop-" + action.replace(":", "-")
    session = assumed_session(widened(policy, drop=action), REGION, name=name)
    with enforced():
        refusals = [_run(calls[tool][index], session) for tool, index in users]
    assert any(refusals), f"{action} taken away, and none of {users} was refused"


def test_resource_star_only_where_iam_allows_no_resource_scope_and_no_action_wildcards(policy):
    for statement in policy["Statement"]:
        for action in _actions(statement):
            assert "*" not in action, action
        if "*" in _resources(statement):
            assert _resources(statement) == ["*"], statement
            unscopable = [
                a for a in _actions(statement) if a not in NO_RESOURCE_SCOPE and a not in STAR_BY_AN_AWS_RULE
            ]
            assert unscopable == [], f"{unscopable}: IAM scopes these by resource; name the resources"
        else:
            for resource in _resources(statement):
                assert resource.startswith("arn:aws:"), resource
                assert "${" not in resource, resource
    # The list holds no action the policy does not grant without a resource (kept honest).
    star = {a for s in policy["Statement"] if _resources(s) == ["*"] for a in _actions(s)}
    assert star == set(NO_RESOURCE_SCOPE) | set(STAR_BY_AN_AWS_RULE)


def test_describe_alarms_sees_the_composite_alarms_the_deploy_waves_watch(policy):
    """On main DescribeAlarms was granted on the project's alarm ARNs only: CloudWatch then leaves composite
    alarms out of its answer, so `make deploy`'s first wave read region-degraded as missing and stopped."""
    rule = DESCRIBE_ALARMS_COMPOSITES_NEED_STAR
    assert describe_alarms_sees_composites(policy), f"{rule.says} ({rule.source})"
    # Only that read is widened: the statement on "*" for it holds nothing else.
    (statement,) = [s for s in policy["Statement"] if "cloudwatch:DescribeAlarms" in _actions(s)]
    assert _actions(statement) == ["cloudwatch:DescribeAlarms"] and _resources(statement) == ["*"]


def test_scoped_resources_name_the_account_and_the_project(settings, policy):
    """Beyond "*": every ARN is this account's (or a public parameter or an S3 object) and, where the kit
    names the resource, the project's."""
    for statement in policy["Statement"]:
        for resource in _resources(statement):
            if resource == "*":
                continue
            service = resource.split(":")[2]
            if service == "s3":
                assert resource.endswith("/compiled/*/artifact-manifest.json"), resource
            elif service == "ssm" and "::parameter/aws/service/" in resource:
                continue  # AWS's public parameters
            elif service == "route53":
                assert resource.endswith(f"hostedzone/{settings.tls.hosted_zone_id}"), resource
            else:
                assert f":{ACCOUNT}:" in resource, resource
                if service not in ("sts", "application-autoscaling") and "cluster/*" not in resource:
                    assert (
                        settings.project in resource or "cdk-" in resource or "shoppingassistant" in resource
                    ), resource


def test_a_bad_account_is_refused_in_one_line(capsys):
    from ops.operator_policy import main

    assert main([str(REPO / "config" / "default.yaml"), "--account", "12"]) == 1
    assert capsys.readouterr().err.strip() == (
        "operator policy: --account: an AWS account id is 12 digits, got '12'"
    )


def test_the_rendered_policy_is_printed_as_json(capsys):
    from ops.operator_policy import main

    assert main([str(REPO / "config" / "prime-day.yaml"), "--account", ACCOUNT]) == 0
    printed = json.loads(capsys.readouterr().out)
    manifests = next(s for s in printed["Statement"] if s["Sid"] == "CompiledArtifactManifests")
    assert manifests["Resource"] and all(r.startswith("arn:aws:s3:::") for r in manifests["Resource"])


def _statement(policy: dict[str, Any], sid: str) -> dict[str, Any]:
    return next(s for s in policy["Statement"] if s.get("Sid") == sid)


SNAPSHOTS = REPO / "tests" / "stacks" / "__snapshots__"


def test_the_host_groups_the_roll_and_the_release_may_change_are_the_projects(settings, policy):
    """StartInstanceRefresh and CancelInstanceRefresh (like the release's statement) are scoped to the groups
    named `<project>-*`: the stacks give their Auto Scaling groups no name, so CloudFormation names each
    `<stack>-<logical id>-<random suffix>` (CloudFormation User Guide, "Name type": a resource given no name
    gets one from the stack name, the logical id and a unique string), and every cell stack's name starts
    with `<project>-`. The synthesized templates are read from the stacks' own snapshots."""
    roll, release = (
        _statement(policy, "RollProjectHostsOntoTheirAmi"),
        _statement(policy, "ReleaseProjectHosts"),
    )
    assert set(_actions(roll)) == {"autoscaling:StartInstanceRefresh", "autoscaling:CancelInstanceRefresh"}
    groups = f"arn:aws:autoscaling:*:{ACCOUNT}:autoScalingGroup:*:autoScalingGroupName/{settings.project}-*"
    assert _resources(roll) == _resources(release) == [groups]
    templates = [SNAPSHOTS / "test_cells" / "test_cell_stack_matches_snapshot.json"]
    templates += [SNAPSHOTS / "test_regional_serving" / "test_stack_matches_snapshot.json"]
    found = 0
    for template in templates:
        for logical_id, resource in json.loads(template.read_text())["Resources"].items():
            if resource["Type"] == "AWS::AutoScaling::AutoScalingGroup":
                found += 1
                assert "AutoScalingGroupName" not in resource["Properties"], logical_id
    assert found >= 2
    for cell in settings.all_cells:
        stack = stack_name(settings, cell.region, cell.index)
        named = f"arn:aws:autoscaling:{cell.region}:{ACCOUNT}:autoScalingGroup:0a1b:autoScalingGroupName/"
        assert fnmatch.fnmatchcase(f"{named}{stack}-Fleetinf248xlargeHostsASGCA2FF88F-AbC123", groups)


def test_the_compiles_service_read_is_within_the_project_services_statement(settings, policy, account):
    """`make compile` reads its fleet's service (DescribeServices, for the network RunTask needs) by the ARN
    the stack lists: `service/<cluster>/<service>`, the cluster named by CloudFormation after the stack (see
    above), as the moto fleet's is named after the project."""
    with suspended():
        names = resource_names(settings.project)
        (service,) = boto3.client("ecs", region_name=REGION).describe_services(
            cluster=names["cluster"], services=[names["Service"]]
        )["services"]
    (scope,) = _resources(_statement(policy, "ProjectServices"))
    assert fnmatch.fnmatchcase(service["serviceArn"], scope), (service["serviceArn"], scope)
    assert not fnmatch.fnmatchcase(service["serviceArn"].replace(settings.project, "another-team"), scope)


# The statements moto cannot see being used are asserted by what they name.
def test_the_implicit_grants_are_scoped_to_what_they_serve(policy):
    by_action = {a: s for s in policy["Statement"] for a in _actions(s)}
    assert by_action["iam:PassRole"]["Condition"] == {
        "StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}
    }
    assert by_action["ecs:TagResource"]["Condition"] == {"StringEquals": {"ecs:CreateAction": "RunTask"}}
    assert _resources(by_action["sts:AssumeRole"]) == [
        f"arn:aws:iam::{ACCOUNT}:role/cdk-hnb659fds-*-role-{ACCOUNT}-*"
    ]


_ = (IAMRequest, S3IAMRequest)  # moto's enforcement classes, named for the reader: see policies.py
