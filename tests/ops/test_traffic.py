"""The operator command against moto: show, pin (read back by the orchestrator's own parser), clear."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from ops.traffic import main, parse_duration
from orchestrator.routing.override import OverrideError, parse_override

REPO = Path(__file__).resolve().parents[2]
REGIONS = {"us-east-1", "us-west-2", "us-east-2"}
# Where the default config's orchestrator keeps its state and override: not the largest region (us-east-1).
HOME = "us-west-2"


def client(service: str, region: str):
    return boto3.client(service, region_name=region)


@pytest.fixture
def config(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        route53 = client("route53", "us-east-1")
        zone = route53.create_hosted_zone(Name="example.com", CallerReference="z")["HostedZone"]["Id"].split(
            "/"
        )[-1]
        changes = [
            {
                "Action": "CREATE",
                "ResourceRecordSet": {
                    "Name": "assistant.example.com",
                    "Type": "A",
                    "SetIdentifier": region,
                    "Weight": weight,
                    "AliasTarget": {
                        "HostedZoneId": "Z35SXDOTRQ7X7K",
                        "DNSName": f"dualstack.alb.{region}.elb.amazonaws.com",
                        "EvaluateTargetHealth": True,
                    },
                },
            }
            for region, weight in (("us-east-1", 45), ("us-west-2", 35))
        ]
        route53.change_resource_record_sets(HostedZoneId=zone, ChangeBatch={"Changes": changes})
        state = {
            "decisions": [
                {"time": "2027-07-08T12:00:00+00:00", "weights": {"us-east-1": 45}, "reason": "steady"}
            ]
        }
        client("ssm", HOME).put_parameter(
            Name="/shopping-assistant/routing/state", Value=json.dumps(state), Type="String"
        )
        path = tmp_path / "config.yaml"
        path.write_text(f"base: {REPO / 'config' / 'default.yaml'}\ntls:\n  hosted_zone_id: {zone}\n")
        yield path


def test_show_lists_weights_shares_override_and_last_decisions(config, capsys):
    assert main(["--config", str(config), "show"], client) == 0
    out = capsys.readouterr().out
    assert "us-east-1       weight  45 (56.2%)" in out
    assert "us-east-2       no record yet (configured initial weight 20)" in out
    assert "override: none" in out
    assert "steady" in out


def test_pin_writes_what_the_orchestrator_reads_and_clear_removes_it(config, capsys):
    assert (
        main(["--config", str(config), "pin", "us-east-1=0", "--for", "90m", "--reason", "patching"], client)
        == 0
    )
    ssm = client("ssm", HOME)
    text = ssm.get_parameter(Name="/shopping-assistant/routing/override")["Parameter"]["Value"]
    override = parse_override(text, REGIONS)
    assert override is not None and override.weights == {"us-east-1": 0} and override.reason == "patching"
    remaining = override.expires_at - datetime.now(UTC)
    assert timedelta(minutes=89) < remaining <= timedelta(minutes=90)
    assert main(["--config", str(config), "show"], client) == 0
    assert "override: us-east-1=0 until" in capsys.readouterr().out
    assert main(["--config", str(config), "clear"], client) == 0
    text = ssm.get_parameter(Name="/shopping-assistant/routing/override")["Parameter"]["Value"]
    assert parse_override(text, REGIONS) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pin", "eu-west-9=0"], "unknown region 'eu-west-9'"),
        (["pin", "us-east-1=0", "us-west-2=0", "us-east-2=0"], "send no traffic anywhere"),
        (["pin", "us-east-1=300"], "integer 0-255"),
        (["pin", "us-east-1"], "write REGION=WEIGHT"),
        (["pin", "us-east-1=0", "--for", "30d"], "at most 7 days"),
    ],
)
def test_a_bad_pin_is_refused_with_the_reason(config, capsys, args, message):
    assert main(["--config", str(config), *args], client) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_durations():
    assert parse_duration("90m") == timedelta(minutes=90)
    assert parse_duration("1d") == timedelta(days=1)
    with pytest.raises(OverrideError):
        parse_duration("soon")


def test_no_credentials_is_one_line_naming_what_to_set(tmp_path, monkeypatch, capsys):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # boto3's default session keeps the credentials an earlier test's client found: start a new one
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    # the real boto3 client: it finds no credentials before it would send anything
    assert main(["--config", str(REPO / "config" / "default.yaml"), "show"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("make traffic: no AWS credentials found") and "AWS_PROFILE" in line


def test_a_second_pin_merges_with_the_active_one_instead_of_ending_it(config, capsys):
    assert main(["--config", str(config), "pin", "us-east-1=0", "--reason", "patching"], client) == 0
    assert main(["--config", str(config), "pin", "us-west-2=10", "--reason", "load test"], client) == 0
    out = capsys.readouterr().out
    assert "kept from the active pin: us-east-1" in out
    ssm = client("ssm", HOME)
    override = parse_override(
        ssm.get_parameter(Name="/shopping-assistant/routing/override")["Parameter"]["Value"], REGIONS
    )
    assert override.weights == {"us-east-1": 0, "us-west-2": 10}
    assert override.reason == "patching; load test"
    assert main(["--config", str(config), "pin", "us-east-2=5", "--replace"], client) == 0
    override = parse_override(
        ssm.get_parameter(Name="/shopping-assistant/routing/override")["Parameter"]["Value"], REGIONS
    )
    assert override.weights == {"us-east-2": 5}


def test_an_expired_pin_is_not_merged(config):
    ssm = client("ssm", HOME)
    old = {"weights": {"us-east-1": 0}, "expires_at": "2020-01-01T00:00:00Z", "reason": "long ago"}
    ssm.put_parameter(Name="/shopping-assistant/routing/override", Value=json.dumps(old), Type="String")
    assert main(["--config", str(config), "pin", "us-west-2=10"], client) == 0
    override = parse_override(
        ssm.get_parameter(Name="/shopping-assistant/routing/override")["Parameter"]["Value"], REGIONS
    )
    assert override.weights == {"us-west-2": 10}


def test_show_lists_a_record_whose_region_left_config(config, capsys):
    route53 = client("route53", "us-east-1")
    zone = route53.list_hosted_zones()["HostedZones"][0]["Id"].split("/")[-1]
    record = {
        "Name": "assistant.example.com",
        "Type": "A",
        "SetIdentifier": "eu-west-1",
        "Weight": 20,
        "AliasTarget": {
            "HostedZoneId": "Z32O12XQLNTSW2",
            "DNSName": "dualstack.alb.eu-west-1.elb.amazonaws.com",
            "EvaluateTargetHealth": True,
        },
    }
    route53.change_resource_record_sets(
        HostedZoneId=zone, ChangeBatch={"Changes": [{"Action": "CREATE", "ResourceRecordSet": record}]}
    )
    assert main(["--config", str(config), "show"], client) == 0
    out = capsys.readouterr().out
    assert "eu-west-1       weight  20 (20.0%)  not in config, 0 runs: set to 0 after 10 runs" in out
    assert "us-east-1       weight  45 (45.0%)" in out  # shares count every record


def test_pins_name_the_cells_of_a_region_of_several():
    """Prime Day runs us-east-1 in two cells: each has its own record, so a pin names a cell."""
    from ops.traffic import build_override
    from settings import load_settings

    settings = load_settings(REPO / "config" / "prime-day.yaml")
    now = datetime(2027, 7, 8, tzinfo=UTC)
    override = build_override(settings, ["us-east-1/2=0"], "1h", "cell 2 patch", now)
    assert override.weights == {"us-east-1/2": 0}
    with pytest.raises(
        OverrideError, match="unknown region 'us-east-1'; configured: us-east-1/1, us-east-1/2"
    ):
        build_override(settings, ["us-east-1=0"], "1h", "", now)
