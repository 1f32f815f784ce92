"""`python -m ops.preflight`: tables, exit codes and messages. EC2 from moto; Service Quotas through
botocore's Stubber (moto 5.2.5 has no Service Quotas `ec2` service)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from ops.preflight.__main__ import main
from tests.ops.preflight.conftest import REPO

DEFAULT_CONFIG = str(REPO / "config" / "default.yaml")


class MotoWithStubbedQuotas:
    """A boto3 session stand-in: moto's EC2, and Service Quotas answering `quotas` per region."""

    def __init__(self, quotas: dict[str, float]) -> None:
        self.quotas = quotas
        self.stubs: list[Stubber] = []

    def client(self, service: str, region_name: str):
        client = boto3.client(service, region_name=region_name)
        if service == "service-quotas":
            stub = Stubber(client)
            for code in sorted(self.quotas):
                stub.add_response(
                    "get_service_quota",
                    {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "Value": self.quotas[code]}},
                    {"ServiceCode": "ec2", "QuotaCode": code},
                )
            stub.activate()
            self.stubs.append(stub)
        return client


@pytest.fixture
def aws(credentials, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps table cells to the terminal's width, 80 when captured
    with mock_aws():
        yield


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
        "us-east-1 everyday: On-Demand Inf vCPUs quota L-1945791B is 1,000, the fleets' max hosts need 3,840"
        in err
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
