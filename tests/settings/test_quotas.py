"""What a config takes from the account's quotas (settings/quotas.py), judged against AWS's defaults by
`make validate`; and who the alarms page, which `make validate --strict` (what `make deploy` runs) demands."""

from __future__ import annotations

from pathlib import Path

import pytest

from settings.__main__ import main as validate_main
from settings.aws_limits import (
    ELASTIC_IPS,
    INTERNET_GATEWAYS_PER_REGION,
    NAT_GATEWAYS_PER_ZONE,
    VPCS_PER_REGION,
)
from settings.loader import ConfigError, load_config
from settings.quotas import network_needs, orchestrator_needs, quota_needs

REPO = Path(__file__).resolve().parents[2]
PRIME_DAY = REPO / "config" / "prime-day.yaml"
DEFAULT = REPO / "config" / "default.yaml"
SIX_CELLS = "regions:\n  us-east-1: {cells: 6}\n"


def overlay(tmp_path: Path, text: str, base: Path = PRIME_DAY) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"base: {base}\n{text}")
    return path


def needs_of(settings, region: str) -> dict[str, int]:
    return {need.quota.code: need.needed for need in network_needs(settings, region)}


def test_the_prime_day_config_fits_a_new_accounts_default_quotas():
    """us-east-1 in 2 cells took 6 NAT gateway EIPs (2 cells x 3 zones), above the default 5: the second
    cell's stack failed to create. The cells now share the region's 5 between them."""
    loaded = load_config(PRIME_DAY)
    assert loaded.quota_warnings == ()
    needs = needs_of(loaded.settings, "us-east-1")
    assert needs[ELASTIC_IPS.code] <= ELASTIC_IPS.default
    assert needs[VPCS_PER_REGION.code] == needs[INTERNET_GATEWAYS_PER_REGION.code] == 2
    assert loaded.settings.nat_gateways("us-east-1") == 2  # per cell: 4 EIPs for the region
    assert loaded.settings.nat_gateways("us-west-2") == 2  # a one-cell region keeps one per zone


@pytest.mark.parametrize(
    ("text", "line", "key", "fragment"),
    [
        (
            "regions:\n  us-east-1: {cells: 3, nat_gateways: 3}\n",
            3,
            "regions.us-east-1.nat_gateways",
            "3 cell(s) x 3 NAT gateway(s), an EIP each, need 9 of EC2-VPC Elastic IPs (ec2 L-0263D0A3), "
            "AWS's default is 5",
        ),
        (
            SIX_CELLS,
            3,
            "regions.us-east-1.cells",
            "need 6 of VPCs per Region (vpc L-F678F1CE), AWS's default is 5",
        ),
        (
            SIX_CELLS,
            3,
            "regions.us-east-1.cells",
            "need 6 of Internet gateways per Region (vpc L-A4707A72)",
        ),
        (
            SIX_CELLS,
            3,
            "regions.us-east-1.cells",
            "need 6 of NAT gateways per Availability Zone (vpc L-FE5A380F)",
        ),
    ],
)
def test_a_config_past_the_default_quotas_says_what_to_raise_at_its_line(tmp_path, text, line, key, fragment):
    loaded = load_config(overlay(tmp_path, text, DEFAULT))
    assert any(
        warning.startswith(f"{tmp_path / 'config.yaml'}:{line}: {key}: ") and fragment in warning
        for warning in loaded.quota_warnings
    ), loaded.quota_warnings


def test_quota_warnings_print_but_do_not_fail_strict_since_the_account_may_have_raised_them(tmp_path, capsys):
    path = overlay(
        tmp_path,
        "observability: {alarm_email: oncall@example.com}\nmodel: {revision: abc123}\n"
        "regions:\n  us-east-1: {cells: 3, nat_gateways: 3}\n",
    )
    assert validate_main([str(path), "--strict"]) == 0
    err = capsys.readouterr().err
    assert "account quotas: this config needs more than AWS's defaults" in err and "Elastic IPs" in err


def test_six_cells_take_one_nat_gateway_each_and_then_need_more_eips(tmp_path):
    settings = load_config(overlay(tmp_path, SIX_CELLS, DEFAULT)).settings
    assert settings.nat_gateways("us-east-1") == 1
    assert needs_of(settings, "us-east-1")[ELASTIC_IPS.code] == 6
    assert needs_of(settings, "us-east-1")[NAT_GATEWAYS_PER_ZONE.code] == 6


def test_no_nat_gateways_take_no_eips(tmp_path):
    settings = load_config(overlay(tmp_path, "regions:\n  us-east-1: {nat_gateways: 0}\n")).settings
    assert ELASTIC_IPS.code not in needs_of(settings, "us-east-1")


def test_reserved_concurrency_needs_101_of_the_accounts_concurrency(tmp_path):
    settings = load_config(overlay(tmp_path, "routing: {reserved_concurrency: true}\n")).settings
    (need,) = orchestrator_needs(settings)
    # Where the orchestrator runs: the shipped configs name no region, so the second-largest (us-west-2).
    assert (need.quota.code, need.needed, need.region) == ("L-B99A9384", 101, settings.orchestrator_region)
    assert settings.orchestrator_region == "us-west-2"
    default = load_config(PRIME_DAY).settings
    assert orchestrator_needs(default) == []
    assert len(quota_needs(default)) == 3 * 4


def test_a_config_that_pages_no_one_fails_strict_and_only_warns_otherwise(tmp_path, capsys):
    assert validate_main([str(PRIME_DAY)]) == 0
    assert "observability: alarms page no one" in capsys.readouterr().err
    assert validate_main([str(PRIME_DAY), "--strict"]) == 1
    err = capsys.readouterr().err
    assert "config error (--strict)" in err and "alarm_email" in err and "alarm_topic_arn" in err
    paged = overlay(
        tmp_path,
        "observability: {alarm_topic_arn: 'arn:aws:sns:{region}:123456789012:pager'}\n"
        "model: {revision: abc}\n",
    )
    assert validate_main([str(paged), "--strict"]) == 0


def test_a_topic_of_one_region_cannot_take_another_regions_alarms(tmp_path):
    path = overlay(tmp_path, "observability: {alarm_topic_arn: 'arn:aws:sns:us-east-1:123456789012:pager'}\n")
    with pytest.raises(
        ConfigError, match=r"observability.alarm_topic_arn: the topic is in us-east-1, but alarms"
    ):
        load_config(path)


def test_the_region_placeholder_is_filled_per_region(tmp_path):
    path = overlay(tmp_path, "observability: {alarm_topic_arn: 'arn:aws:sns:{region}:123456789012:pager'}\n")
    settings = load_config(path).settings
    assert settings.observability.alarm_topic("us-west-2") == "arn:aws:sns:us-west-2:123456789012:pager"


def test_the_shipped_configs_show_where_to_set_who_is_paged():
    text = (REPO / "config" / "default.yaml").read_text()
    assert "# alarm_email:" in text and "# alarm_topic_arn:" in text


def test_an_unset_model_revision_fails_strict_naming_the_key(tmp_path, capsys):
    """The stacks never set MODEL_REVISION, so every key's revision was empty in production."""
    paged = "observability: {alarm_email: oncall@example.com}\n"
    assert validate_main([str(overlay(tmp_path, paged)), "--strict"]) == 1
    assert "model: revision is not set" in capsys.readouterr().err
    assert validate_main([str(overlay(tmp_path, paged + "model: {revision: 0e9e39f}\n")), "--strict"]) == 0
