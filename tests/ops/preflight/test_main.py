"""`python -m ops.preflight`: tables, exit codes and messages. EC2 from moto (zone offerings, its Elastic IP
limit, the VPCs, gateways and addresses in use); Service Quotas, ELBv2's account limits, Lambda's account
settings and the public SSM parameters through botocore's Stubber with AWS-shaped responses (moto 5.2.5 has no
Service Quotas `ec2` or `ecs` quotas, its own ELB limit figures, no GetAccountSettings and no public
parameters of pinned releases)."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from ops.compile import fleet_artifacts
from ops.preflight.__main__ import main
from ops.preflight.checks import ELB_TARGETS_PER_TARGET_GROUP as TARGETS_PER_GROUP
from settings import load_settings
from settings.serving import DEFAULT_NEURON_AMI_RELEASE
from stacks.routing_names import neuron_ami_parameter, powertools_layer_parameter
from tests.ops.preflight.conftest import REPO

DEFAULT_CONFIG = str(REPO / "config" / "default.yaml")
AWS_ELB_DEFAULTS = {"targets-per-application-load-balancer": "1000", "targets-per-target-group": "1000"}


class MotoWithStubbedQuotas:
    """A boto3 session stand-in: moto's EC2; Service Quotas answering `quotas` and ECS's container
    instances per cluster, ELBv2 answering `elb_limits`, SSM answering whether the Powertools layer's
    parameter exists (it is read in the orchestrator's region only)."""

    def __init__(
        self,
        quotas: dict[str, float],
        elb_limits: dict[str, str] | None = None,
        layer_published: bool = True,
        network_quotas: dict[str, float] | None = None,
        concurrency: tuple[int, int] = (1000, 1000),
        ami_published: bool = True,
        home: str = "us-west-2",  # the shipped configs' orchestrator region (routing.orchestrator_region)
    ) -> None:
        self.quotas = quotas
        self.elb_limits = AWS_ELB_DEFAULTS if elb_limits is None else elb_limits
        self.layer_published = layer_published
        # Service Quotas `vpc` codes with an applied value (others: never raised, NoSuchResourceException).
        self.network_quotas = network_quotas or {}
        self.concurrency = concurrency
        self.ami_published = ami_published
        self.home = home
        self.stubs: list[Stubber] = []

    def client(self, service: str, region_name: str):
        client = boto3.client(service, region_name=region_name)
        if service in ("ec2", "s3"):
            return client
        stub = Stubber(client)
        if service == "service-quotas":
            for code in sorted(self.quotas):
                stub.add_response(
                    "get_service_quota",
                    {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "Value": self.quotas[code]}},
                    {"ServiceCode": "ec2", "QuotaCode": code},
                )
            ecs = {
                "ServiceCode": "ecs",
                "QuotaCode": "L-0000EXAMPLE",
                "QuotaName": "Container instances per cluster",
            }
            stub.add_response(
                "list_service_quotas", {"Quotas": [{**ecs, "Value": 5000.0}]}, {"ServiceCode": "ecs"}
            )
            elb = {
                "ServiceCode": "elasticloadbalancing",
                "QuotaCode": "L-0000EXAMPLE",
                "QuotaName": TARGETS_PER_GROUP,
            }
            stub.add_response(
                "list_service_quotas",
                {"Quotas": [{**elb, "Value": 1000.0}]},
                {"ServiceCode": "elasticloadbalancing"},
            )
            for code in ("L-F678F1CE", "L-FE5A380F", "L-A4707A72"):  # VPCs, NAT per zone, internet gateways
                request = {"ServiceCode": "vpc", "QuotaCode": code}
                if code in self.network_quotas:
                    quota = {**request, "Value": self.network_quotas[code]}
                    stub.add_response("get_service_quota", {"Quota": quota}, request)
                else:
                    stub.add_client_error(
                        "get_service_quota", "NoSuchResourceException", expected_params=request
                    )
        elif service == "elbv2":
            limits = [{"Name": name, "Max": value} for name, value in self.elb_limits.items()]
            stub.add_response("describe_account_limits", {"Limits": limits}, {})
        elif service == "lambda":
            limit, unreserved = self.concurrency
            settings = {"ConcurrentExecutions": limit, "UnreservedConcurrentExecutions": unreserved}
            stub.add_response("get_account_settings", {"AccountLimit": settings, "AccountUsage": {}}, {})
        elif service == "ssm":
            ami = neuron_ami_parameter(DEFAULT_NEURON_AMI_RELEASE)
            if self.ami_published:
                parameter = {"Name": ami, "Type": "String", "Value": "ami-0123456789abcdef0"}
                stub.add_response("get_parameter", {"Parameter": parameter}, {"Name": ami})
            else:
                stub.add_client_error("get_parameter", "ParameterNotFound", expected_params={"Name": ami})
            name = powertools_layer_parameter()
            if region_name != self.home:
                pass
            elif self.layer_published:
                parameter = {"Name": name, "Type": "String", "Value": "arn:aws:lambda:x:1:layer:p:1"}
                stub.add_response("get_parameter", {"Parameter": parameter}, {"Name": name})
            else:
                stub.add_client_error("get_parameter", "ParameterNotFound", expected_params={"Name": name})
        stub.activate()
        self.stubs.append(stub)
        return client


@pytest.fixture
def aws(credentials, monkeypatch, tmp_path):
    # The default assembly is ./cdk.out: run where there is none, whatever the checkout holds.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps table cells to the terminal's width, 80 when captured
    with mock_aws():
        for config in (DEFAULT_CONFIG, str(REPO / "config" / "prime-day.yaml")):
            complete_artifacts(config)
        yield


def complete_artifacts(config: str, skip: tuple[str, ...] = ()) -> None:
    """Every fleet's compiled artifacts, as a compile leaves them: the manifest under compiled/<key>/ (the
    instance types in `skip` left without)."""
    s3 = boto3.client("s3", region_name="us-east-1")
    for artifact in fleet_artifacts(load_settings(config)):
        if artifact.instance_type in skip:
            continue
        buckets = {b["Name"] for b in s3.list_buckets()["Buckets"]}
        if artifact.bucket not in buckets:
            s3.create_bucket(Bucket=artifact.bucket)
        s3.put_object(Bucket=artifact.bucket, Key=artifact.manifest_key, Body=b"{}")


def test_a_config_that_fits_prints_a_table_per_region_and_exits_zero(aws, capsys):
    session = MotoWithStubbedQuotas({"L-1945791B": 10_000.0, "L-2C3B7624": 10_000.0})
    assert main([DEFAULT_CONFIG], session_factory=lambda: session) == 0
    captured = capsys.readouterr()
    for region in ("us-east-1", "us-west-2", "us-east-2"):
        assert region in captured.out
    assert "On-Demand Trn vCPUs (L-2C3B7624)" in captured.out
    # The default zones come from the same offerings data as moto's answers: every fleet's type is offered
    # in every zone its hosts use.
    assert "not offered" not in captured.err
    for stub in session.stubs:
        stub.assert_no_pending_responses()


def test_a_short_quota_exits_one_naming_region_and_quota(aws, capsys):
    session = MotoWithStubbedQuotas({"L-1945791B": 1000.0, "L-2C3B7624": 10_000.0})
    assert main([DEFAULT_CONFIG], session_factory=lambda: session) == 1
    err = capsys.readouterr().err
    assert "3 shortfall(s):" in err
    assert (
        "us-east-1 everyday: On-Demand Inf vCPUs quota L-1945791B is 1,000, the fleets' max hosts with "
        "deploy surge and warm pools need 6,720" in err
    )


def test_no_credentials_is_a_clear_error_without_a_traceback(monkeypatch, tmp_path, capsys):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert main([DEFAULT_CONFIG]) == 2
    err = capsys.readouterr().err
    assert "no AWS credentials found" in err and "AWS_PROFILE" in err
    assert "Traceback" not in err


def test_a_bad_config_exits_one_with_the_config_error(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("regions: {}\n")
    assert main([str(path)]) == 1
    assert "config error" in capsys.readouterr().err


def _assembly(tmp_path: Path, start_time: str) -> Path:
    """An assembly holding the us-east-1 stack's template with one group scheduled action, as synthesized."""
    directory = tmp_path / "cdk.out"
    directory.mkdir()
    template = {
        "Resources": {
            "FleetHostsScheduled": {
                "Type": "AWS::AutoScaling::ScheduledAction",
                "Properties": {
                    "AutoScalingGroupName": {"Ref": "FleetHostsGroup"},
                    "StartTime": start_time,
                    "MinSize": 12,
                    "MaxSize": 75,
                },
            }
        }
    }
    (directory / "shopping-assistant-us-east-1.template.json").write_text(json.dumps(template))
    return directory


def test_an_assembly_synthesized_before_the_ramp_and_deployed_after_it_is_rejected(aws, tmp_path, capsys):
    session = MotoWithStubbedQuotas({"L-1945791B": 10_000.0, "L-2C3B7624": 10_000.0})
    stale = _assembly(tmp_path, "2020-07-08T06:00:00Z")
    assert main([DEFAULT_CONFIG, "--assembly", str(stale)], session_factory=lambda: session) == 1
    err = capsys.readouterr().err
    assert "FleetHostsScheduled at 2020-07-08 06:00 UTC" in err and "make synth" in err
    # Regions whose stack the assembly lacks are a warning, not a shortfall.
    assert "no template for shopping-assistant-us-west-2" in err


def test_an_unpublished_powertools_layer_is_a_shortfall_in_the_orchestrators_region(aws, tmp_path, capsys):
    """The default config runs its orchestrator in us-west-2, the largest serving region but one."""
    session = MotoWithStubbedQuotas({"L-1945791B": 10_000.0, "L-2C3B7624": 10_000.0}, layer_published=False)
    fresh = _assembly(tmp_path, "2099-07-08T06:00:00Z")
    assert main([DEFAULT_CONFIG, "--assembly", str(fresh)], session_factory=lambda: session) == 1
    err = capsys.readouterr().err
    assert "1 shortfall(s):" in err
    assert f"us-west-2: SSM parameter {powertools_layer_parameter()} does not exist" in err


def test_an_account_below_the_alb_targets_its_fleets_need_exits_one(aws, capsys):
    """Everyday, us-east-1 runs up to 35 + 18 hosts with the surge: 106 targets on its ALB."""
    session = MotoWithStubbedQuotas(
        {"L-1945791B": 10_000.0, "L-2C3B7624": 10_000.0},
        elb_limits={"targets-per-application-load-balancer": "50", "targets-per-target-group": "1000"},
    )
    assert main([DEFAULT_CONFIG], session_factory=lambda: session) == 1
    err = capsys.readouterr().err
    assert (
        "us-east-1 everyday: 53 hosts (max plus deploy surge) need 106 for "
        "targets-per-application-load-balancer" in err
    )


def test_an_unreadable_template_in_the_assembly_is_a_clear_error(aws, tmp_path, capsys):
    directory = tmp_path / "cdk.out"
    directory.mkdir()
    (directory / "shopping-assistant-us-east-1.template.json").write_text("{not json")
    session = MotoWithStubbedQuotas({"L-1945791B": 10_000.0, "L-2C3B7624": 10_000.0})
    assert main([DEFAULT_CONFIG, "--assembly", str(directory)], session_factory=lambda: session) == 2
    err = capsys.readouterr().err
    assert "cannot read the synthesized template" in err and "Traceback" not in err
