"""Config files -> Settings: every mistake a user can make is named with its file, line and key."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from settings import ConfigError, load_settings
from settings.__main__ import main as validate_main
from settings.loader import load_config, merge

REPO = Path(__file__).resolve().parents[2]

MINIMAL = """\
model:
  artifacts_s3_uri: s3://bucket/model/
regions:
  us-east-1:
    weight: 1
    fleets:
      - {instance_type: inf2.48xlarge, tensor_parallel: 24, min: 1, max: 2}
"""

# Valid, but EC2 offers no Trn1 in eu-west-1: a warning, not an error.
TRN1_IN_EU_WEST_1 = (
    MINIMAL.replace("us-east-1", "eu-west-1")
    .replace("inf2.48xlarge", "trn1.32xlarge")
    .replace("tensor_parallel: 24", "tensor_parallel: 32")
)


TRN1_FLEET = "      - {instance_type: trn1.32xlarge, tensor_parallel: 32, min: 0, max: 4}\n"
EVENT = """\
events:
  - name: prime-day
    start: "2027-07-08T00:00:00-07:00"
    end: "2027-07-10T00:00:00-07:00"
    regions:
      us-east-1:
        inf2.48xlarge: {min: 12, max: 60}
"""
LATER_EVENT = """\
  - name: cyber-monday
    start: "2027-07-09T12:00:00Z"
    end: "2027-07-11T00:00:00Z"
    regions:
      us-east-1:
        inf2.48xlarge: {min: 6, max: 30}
"""


def with_fleet_option(option: str, fleet: str = TRN1_FLEET) -> str:
    """MINIMAL plus a trn1 fleet carrying `option` (flow-style YAML inside the fleet's braces)."""
    return MINIMAL + fleet.replace("}", f", {option}}}")


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load_error(path: Path) -> str:
    with pytest.raises(ConfigError) as raised:
        load_settings(path)
    return str(raised.value)


BAD_CONFIGS = [
    pytest.param(
        MINIMAL.replace("tensor_parallel", "tensor_paralel"),
        [
            "config.yaml:7",
            "fleets[instance_type=inf2.48xlarge].tensor_paralel",
            "did you mean 'tensor_parallel'",
        ],
        id="typo-in-key",
    ),
    pytest.param(
        MINIMAL.replace("    weight: 1\n", "    weight: 1\n    weight: 2\n"),
        ["config.yaml:6", "regions.us-east-1.weight", "duplicate key (first set on line 5)"],
        id="duplicate-key",
    ),
    pytest.param(
        MINIMAL.replace("tensor_parallel: 24", "tensor_parallel: 32"),
        ["config.yaml:7", "tensor_parallel 32 exceeds the 24 NeuronCores of inf2.48xlarge"],
        id="tp-above-cores",
    ),
    pytest.param(
        MINIMAL.replace("tensor_parallel: 24", "tensor_parallel: 5"),
        ["tensor_parallel 5 does not divide the 24 NeuronCores", "[1, 2, 3, 4, 6, 8, 12, 24]"],
        id="tp-not-divisor",
    ),
    pytest.param(
        MINIMAL.replace("min: 1, max: 2", "min: 3, max: 2"),
        ["fleets[instance_type=inf2.48xlarge]", "min (3) is above max (2)"],
        id="min-above-max",
    ),
    pytest.param(
        MINIMAL.replace("inf2.48xlarge", "g5.48xlarge"),
        [
            "fleets[instance_type=g5.48xlarge].instance_type",
            "'g5.48xlarge' has no Neuron devices",
            "inf2.48xlarge",
        ],
        id="no-neuron-devices",
    ),
    pytest.param(
        MINIMAL.replace("inf2.48xlarge", "inf2.96xlarge"),
        ["unknown size 'inf2.96xlarge'"],
        id="unknown-neuron-size",
    ),
    pytest.param(
        MINIMAL.replace("us-east-1", "us-east-7"),
        ["config.yaml:4", "regions.us-east-7: unknown region 'us-east-7'"],
        id="unknown-region",
    ),
    pytest.param(
        MINIMAL.replace("weight: 1", "weight: 0"),
        ["every region has weight 0"],
        id="no-traffic-anywhere",
    ),
    pytest.param(
        MINIMAL.replace("weight: 1", "weight: -4"),
        ["regions.us-east-1.weight", "greater than or equal to 0"],
        id="negative-weight",
    ),
    pytest.param(
        MINIMAL.replace("weight: 1", 'weight: "50"'),
        ["regions.us-east-1.weight", "valid integer", "got '50' (str)"],
        id="weight-as-string",
    ),
    pytest.param(
        MINIMAL.split("    fleets:")[0] + "    fleets: []\n",
        ["regions.us-east-1.fleets", "at least 1 item"],
        id="empty-fleet-list",
    ),
    pytest.param(
        MINIMAL.split("    fleets:")[0],
        ["regions.us-east-1.fleets", "required key is missing"],
        id="missing-fleets",
    ),
    pytest.param(
        MINIMAL + "      - {instance_type: inf2.48xlarge, tensor_parallel: 12, min: 1, max: 2}\n",
        ["two fleets of inf2.48xlarge"],
        id="two-fleets-same-type",
    ),
    pytest.param(
        MINIMAL + "serving:\n  cold_start_budget_seconds: 1800\n  health_check_grace_seconds: 900\n",
        ["health_check_grace_seconds (900) is shorter than cold_start_budget_seconds (1800)"],
        id="grace-shorter-than-cold-start",
    ),
    pytest.param(
        MINIMAL + "serving:\n  cold_start_budget_seconds: 4000\n  health_check_grace_seconds: 4000\n",
        ["serving.cold_start_budget_seconds", "less than or equal to 3300"],
        id="cold-start-beyond-health-check-reach",
    ),
    pytest.param(
        MINIMAL + "serving:\n  instance_warmup_seconds: 20000\n",
        ["config.yaml:9", "serving.instance_warmup_seconds", "less than or equal to 10000"],
        id="instance-warmup-beyond-ecs-range",
    ),
    pytest.param(
        MINIMAL + "serving:\n  max_queued_per_replica: -1\n",
        ["config.yaml:9", "serving.max_queued_per_replica", "greater than or equal to 0"],
        id="negative-queue-bound",
    ),
    pytest.param(
        MINIMAL + "serving:\n  queue_wait_budget_ms: 1000\n",
        ["serving.queue_wait_budget_ms (1000)", "observability.ttft_p99_threshold_ms (1000)"],
        id="queue-wait-budget-not-below-the-objective",
    ),
    pytest.param(
        MINIMAL.replace("s3://bucket/model/", "bucket/model"),
        ["model.artifacts_s3_uri", "must be an S3 URI"],
        id="artifacts-not-s3",
    ),
    pytest.param(
        MINIMAL.replace("s3://bucket/model/\n", "s3://bucket/model/\n  max_output_tokens: 30000\n"),
        ["longest stream", "3600 s deregistration delay"],
        id="stream-longer-than-deregistration-delay",
    ),
    pytest.param(
        "account: 123456789012\n" + MINIMAL,
        ["config.yaml:1", "account", "put it in quotes"],
        id="unquoted-account",
    ),
    pytest.param(
        MINIMAL.replace(
            "    weight: 1\n",
            "    weight: 1\n    certificate_arn: arn:aws:acm:eu-west-1:123456789012:certificate/abc\n",
        ),
        ["certificate_arn is in eu-west-1", "its own region"],
        id="certificate-from-another-region",
    ),
    pytest.param(
        MINIMAL.replace(
            "    weight: 1\n", "    weight: 1\n    availability_zones: [us-west-2a, us-west-2b]\n"
        ),
        ["are not zones of us-east-1"],
        id="zones-of-another-region",
    ),
    pytest.param(
        MINIMAL + "container:\n  image_uris:\n    gpu: repo/image:1\n",
        ["unknown Neuron family 'gpu'"],
        id="image-for-unknown-family",
    ),
    pytest.param(
        MINIMAL + EVENT.replace('end: "2027-07-10T00:00:00-07:00"', 'end: "2027-07-07T00:00:00-07:00"'),
        ["config.yaml:11", "events[name=prime-day].end", "is not after start"],
        id="event-ends-before-it-starts",
    ),
    pytest.param(
        MINIMAL + EVENT.replace('"2027-07-08T00:00:00-07:00"', '"2027-07-08T00:00:00"'),
        ["config.yaml:10", "events[name=prime-day].start", "has no UTC offset"],
        id="event-time-without-offset",
    ),
    pytest.param(
        MINIMAL + EVENT.replace('"2027-07-08T00:00:00-07:00"', '"July 8th"'),
        ["events[name=prime-day].start", "'July 8th' is not an ISO 8601 time"],
        id="event-time-not-iso",
    ),
    pytest.param(
        MINIMAL + EVENT.replace("name: prime-day", "name: Prime_Day"),
        ["config.yaml:9", "events[name=Prime_Day].name", "should match pattern"],
        id="event-name-not-lowercase",
    ),
    pytest.param(
        MINIMAL + EVENT.replace("us-east-1:\n        inf2", "us-west-2:\n        inf2"),
        [
            "config.yaml:13",
            "events[name=prime-day].regions.us-west-2",
            "region us-west-2 is not in the config",
        ],
        id="event-region-not-in-config",
    ),
    pytest.param(
        MINIMAL + EVENT.replace("inf2.48xlarge: {min", "trn1.32xlarge: {min"),
        ["config.yaml:14", "regions.us-east-1.trn1.32xlarge", "us-east-1 has no trn1.32xlarge fleet"],
        id="event-fleet-not-in-region",
    ),
    pytest.param(
        MINIMAL + EVENT.replace("{min: 12, max: 60}", "{min: 70, max: 60}"),
        ["config.yaml:14", "regions.us-east-1.inf2.48xlarge", "min (70) is above max (60)"],
        id="event-min-above-max",
    ),
    pytest.param(
        MINIMAL + EVENT + LATER_EVENT,
        [
            "config.yaml:20",
            "events[name=cyber-monday].regions.us-east-1.inf2.48xlarge",
            "overlaps event 'prime-day'",
            "60 min pre-warm lead",
        ],
        id="overlapping-events-on-one-fleet",
    ),
    pytest.param(
        MINIMAL
        + EVENT.replace(
            'end: "2027-07-10T00:00:00-07:00"\n',
            'end: "2027-07-10T00:00:00-07:00"\n    scale_in_after_minutes: 0\n',
        ),
        [
            "config.yaml:12",
            "events[name=prime-day].scale_in_after_minutes",
            "greater than or equal to 1",
        ],
        id="event-maximums-lowered-with-the-minimums",
    ),
    pytest.param(
        # Ramps 30 min after prime-day's end (07:00Z), inside its 120 min before the maximums come down.
        MINIMAL
        + EVENT
        + LATER_EVENT.replace("2027-07-09T12:00:00Z", "2027-07-10T08:30:00Z").replace(
            "2027-07-11T00", "2027-07-12T00"
        ),
        [
            "config.yaml:20",
            "events[name=cyber-monday].regions.us-east-1.inf2.48xlarge",
            "overlaps event 'prime-day'",
            "scale_in_after_minutes after the end",
        ],
        id="event-ramping-before-the-previous-ones-scale-in",
    ),
    pytest.param(
        MINIMAL + EVENT + EVENT.removeprefix("events:\n"),
        ["events[name=prime-day].name", "a second event named 'prime-day'"],
        id="two-events-one-name",
    ),
    pytest.param(
        with_fleet_option("capacity_block: {id: cr-0123456789abcdef0, availability_zone: us-east-1a}")
        + EVENT.replace("inf2.48xlarge: {min: 12, max: 60}", "trn1.32xlarge: {min: 12, max: 65}"),
        ["regions.us-east-1.trn1.32xlarge.max", "max 65 is above the 64 instances one Capacity Block holds"],
        id="event-above-a-capacity-block",
    ),
    pytest.param(
        MINIMAL.replace(
            "min: 1, max: 2}",
            "min: 0, max: 2, capacity_block: {id: cr-0123456789abcdef0, availability_zone: us-east-1a}}",
        ),
        ["a Capacity Block cannot hold inf2.48xlarge", "trn1.32xlarge, trn2.48xlarge"],
        id="capacity-block-on-inf2",
    ),
    pytest.param(
        with_fleet_option(
            "capacity_block: {id: cr-0123456789abcdef0, availability_zone: us-east-1a}"
        ).replace("min: 0, max: 4", "min: 2, max: 4"),
        ["min is 2 on a Capacity Block fleet", "set min 0"],
        id="capacity-block-fleet-with-a-floor",
    ),
    pytest.param(
        with_fleet_option(
            "capacity_block: {id: cr-0123456789abcdef0, availability_zone: us-east-1a}, "
            "warm_pool: {min_size: 1}"
        ),
        ["a Capacity Block fleet takes no warm_pool"],
        id="capacity-block-with-warm-pool",
    ),
    pytest.param(
        with_fleet_option(
            "capacity_block: {id: cr-0123456789abcdef0, availability_zone: us-east-1f}"
        ).replace("    weight: 1\n", "    weight: 1\n    availability_zones: [us-east-1a, us-east-1b]\n"),
        ["config.yaml:9", "capacity_block.availability_zone", "us-east-1f is not one of the stack's zones"],
        id="capacity-block-outside-the-stack-zones",
    ),
    pytest.param(
        with_fleet_option("capacity_block: {id: reservation-1, availability_zone: us-east-1a}"),
        ["capacity_block.id", "'reservation-1' is not a capacity reservation id"],
        id="capacity-block-bad-id",
    ),
    pytest.param(
        with_fleet_option(
            "capacity_reservation: {ids: [cr-0123456789abcdef0], "
            "resource_group_arn: 'arn:aws:resource-groups:us-east-1:111111111111:group/peak'}"
        ),
        ["capacity_reservation", "exactly one of ids or resource_group_arn"],
        id="reservation-ids-and-group",
    ),
    pytest.param(
        with_fleet_option("capacity_reservation: {ids: [cr-0123456789abcdef0], preference: open}"),
        ["capacity_reservation.preference", "'capacity-reservations-first' or 'capacity-reservations-only'"],
        id="reservation-unknown-preference",
    ),
    pytest.param(
        MINIMAL + "routing:\n  orchestrator_region: us-west-2\n",
        ["routing.orchestrator_region 'us-west-2' is not one of the configured regions"],
        id="orchestrator-outside-the-regions",
    ),
    pytest.param(
        MINIMAL + "routing:\n  bad_runs_to_drain: 3\n  drain_runs: 2\n",
        ["config.yaml:8", "routing", "bad_runs_to_drain (3) exceeds drain_runs (2)"],
        id="confirmation-longer-than-drain",
    ),
    pytest.param(
        MINIMAL + "routing:\n  error_share: 0.1\n  dns_error_share: 0.05\n",
        ["config.yaml:8", "routing", "dns_error_share (0.05) is below error_share (0.1)"],
        id="dns-bar-below-the-drain-bar",
    ),
    pytest.param(
        MINIMAL + "routing:\n  slow_first_token_share: 1.5\n",
        ["config.yaml:9", "routing.slow_first_token_share", "less than 1"],
        id="share-above-one",
    ),
    pytest.param(
        MINIMAL + "routing:\n  flor: 5\n",
        ["routing.flor", "did you mean 'floor'"],
        id="routing-typo",
    ),
    pytest.param(
        MINIMAL.replace(
            "    weight: 1\n",
            "    weight: 1\n    availability_zones: [us-east-1a, us-east-1b]\n    nat_gateways: 3\n",
        ),
        ["config.yaml:4", "regions.us-east-1", "nat_gateways 3 is more than the 2 availability zones"],
        id="more-nat-gateways-than-configured-zones",
    ),
    pytest.param(
        MINIMAL.replace("    weight: 1\n", "    weight: 1\n    nat_gateways: 4\n"),
        ["config.yaml:6", "regions.us-east-1.nat_gateways: 4 is more than the region's 3 availability zones"],
        id="more-nat-gateways-than-default-zones",
    ),
    pytest.param(
        MINIMAL.replace("    weight: 1\n", "    weight: 1\n    nat_gateways: -1\n"),
        ["regions.us-east-1.nat_gateways", "greater than or equal to 0"],
        id="negative-nat-gateways",
    ),
    pytest.param(
        MINIMAL.replace(
            "    weight: 1\n", "    weight: 1\n    nat_gateways: 0\n    interface_endpoints: false\n"
        ),
        ["regions.us-east-1", "no way to reach ECR, ECS or CloudWatch Logs"],
        id="no-nat-and-no-endpoints",
    ),
    pytest.param(
        MINIMAL.replace("    weight: 1\n", "    weight: 1\n    nat_gateways: 0\n")
        + "container:\n  image_uris:\n    inf2: public.ecr.aws/neuron/vllm:0.13\n",
        [
            "config.yaml:6",
            "regions.us-east-1.nat_gateways: 0 NAT gateways, so the hosts cannot pull "
            "public.ecr.aws/neuron/vllm:0.13",
            "image_uris.inf2",
        ],
        id="no-nat-with-a-public-image",
    ),
    pytest.param(
        MINIMAL.replace(
            "    weight: 1\n",
            "    weight: 1\n    nat_gateways: 0\n    image_uris:\n"
            "      inf2: 123456789012.dkr.ecr.us-west-2.amazonaws.com/serving:1\n",
        ),
        ["regions.us-east-1.nat_gateways: 0 NAT gateways", "replicate it to ECR in us-east-1"],
        id="no-nat-with-an-image-in-another-region",
    ),
    pytest.param(
        MINIMAL.replace("    weight: 1\n", "    weight: 1\n    artifacts_s3_uri: bucket/model\n"),
        ["config.yaml:6", "regions.us-east-1.artifacts_s3_uri", "must be an S3 URI"],
        id="region-artifacts-not-s3",
    ),
    pytest.param(
        MINIMAL.replace("    weight: 1\n", "    weight: 1\n    image_uris: {gpu: repo/image:1}\n"),
        ["regions.us-east-1.image_uris", "unknown Neuron family 'gpu'"],
        id="region-image-for-unknown-family",
    ),
    pytest.param(
        MINIMAL + "load_balancer:\n  waf:\n    rate_limit_per_ip: 5\n",
        ["config.yaml:10", "load_balancer.waf.rate_limit_per_ip", "greater than or equal to 10"],
        id="waf-rate-limit-below-aws-minimum",
    ),
    pytest.param(
        MINIMAL + "load_balancer:\n  waf:\n    rate_limit_window_seconds: 30\n",
        ["load_balancer.waf.rate_limit_window_seconds", "60, 120, 300 or 600"],
        id="waf-window-aws-does-not-offer",
    ),
    pytest.param(
        MINIMAL + "load_balancer:\n  waf:\n    rate_limit_key: header\n",
        ["config.yaml:9", "load_balancer.waf.rate_limit_header", "rate_limit_key header needs the header"],
        id="waf-header-key-without-its-header",
    ),
    pytest.param(
        MINIMAL + "load_balancer:\n  waf:\n    rate_limit_header: X-Shopper\n",
        ["config.yaml:10", "load_balancer.waf.rate_limit_header", "the key here is ip"],
        id="waf-header-for-the-ip-key",
    ),
    pytest.param(
        MINIMAL + "load_balancer:\n  waf:\n    rate_limit_key: header\n    rate_limit_header: x shopper\n",
        ["config.yaml:11", "load_balancer.waf.rate_limit_header", "not an HTTP header name"],
        id="waf-header-name-with-a-space",
    ),
    pytest.param(
        MINIMAL + "load_balancer:\n  waf:\n    rate_limit_key: client\n",
        ["config.yaml:10", "load_balancer.waf.rate_limit_key", "'ip', 'forwarded_ip' or 'header'"],
        id="waf-key-waf-does-not-offer",
    ),
    pytest.param(
        MINIMAL + "load_balancer:\n  deletion_protection: 'no'\n",
        ["load_balancer.deletion_protection", "valid boolean"],
        id="deletion-protection-not-a-boolean",
    ),
    pytest.param(
        MINIMAL + "operations:\n  session_manger: true\n",
        ["operations.session_manger", "did you mean 'session_manager'"],
        id="typo-in-operations",
    ),
    pytest.param(
        MINIMAL.replace("inf2.48xlarge, tensor_parallel: 24", "trn2.48xlarge, tensor_parallel: 64"),
        ["regions.us-east-1.fleets[0] is a trn2.48xlarge fleet", "container.image_uris.trn2 is not set"],
        id="trn2-without-its-image",
    ),
    pytest.param(
        MINIMAL + "container:\n  neuron_ami_release: latest\n",
        ["container.neuron_ami_release", "not an ECS AL2023 Neuron AMI release name"],
        id="ami-release-not-a-release-name",
    ),
    pytest.param(
        MINIMAL + "serving:\n  deployment:\n    max_surge_percent: 0\n",
        ["serving.deployment.max_surge_percent"],
        id="deploy-without-surge",
    ),
    pytest.param(
        MINIMAL.replace(
            "  artifacts_s3_uri: s3://bucket/model/\n",
            "  artifacts_s3_uri: s3://bucket/model/\n  catalog_index_s3_uri: s3://elsewhere/index/\n",
        ),
        ["model", "must lie under artifacts_s3_uri s3://bucket/model/", "may read that prefix only"],
        id="catalog-index-outside-the-readable-prefix",
    ),
    pytest.param(
        MINIMAL.replace(
            "  artifacts_s3_uri: s3://bucket/model/\n",
            "  artifacts_s3_uri: s3://bucket/model/\n  sampling_defaults:\n    temperature: 3\n",
        ),
        ["config.yaml:", "model.sampling_defaults.temperature", "less than or equal to 2"],
        id="sampling-default-out-of-range",
    ),
    pytest.param(
        MINIMAL.replace(
            "  artifacts_s3_uri: s3://bucket/model/\n",
            "  artifacts_s3_uri: s3://bucket/model/\n  sampling_defaults:\n    max_tokens: 10\n",
        ),
        ["config.yaml:", "model.sampling_defaults.max_tokens"],
        id="sampling-default-not-a-sampling-key",
    ),
    pytest.param(
        MINIMAL.replace(
            "  artifacts_s3_uri: s3://bucket/model/\n",
            "  artifacts_s3_uri: s3://bucket/model/\n  catalog_follow_seconds: -5\n",
        ),
        ["config.yaml:", "model.catalog_follow_seconds"],
        id="catalog-follow-negative",
    ),
    pytest.param("regions: [\n", ["config.yaml:2", "not valid YAML"], id="yaml-syntax"),
    pytest.param("- a\n- b\n", ["the top level must be a mapping"], id="top-level-list"),
    pytest.param("", ["config file is empty"], id="empty-file"),
]


@pytest.mark.parametrize(("yaml_text", "fragments"), BAD_CONFIGS)
def test_bad_config_names_file_key_and_problem(tmp_path: Path, yaml_text: str, fragments: list[str]) -> None:
    message = load_error(write(tmp_path, yaml_text))
    assert str(tmp_path / "config.yaml") in message
    for fragment in fragments:
        assert fragment in message


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = MINIMAL.replace("tensor_parallel: 24", "tensor_parallel: 48").replace("us-east-1", "mars-1")
    text = text.replace("s3://bucket/model/", "nowhere")
    lines = load_error(write(tmp_path, text)).splitlines()
    assert len(lines) == 3
    assert any("mars-1" in line for line in lines)
    assert any("artifacts_s3_uri" in line for line in lines)
    assert any("tensor_parallel 48" in line for line in lines)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    assert "config file not found" in load_error(tmp_path / "nope.yaml")


def test_default_config_has_three_regions_with_inf2_and_trn1() -> None:
    settings = load_settings(REPO / "config" / "default.yaml")
    assert list(settings.regions) == ["us-east-1", "us-west-2", "us-east-2"]
    for name in settings.regions:
        assert settings.warnings() == [], name  # every default fleet is offered where it runs
    for region in settings.regions.values():
        assert [(f.instance_type, f.tensor_parallel) for f in region.fleets] == [
            ("inf2.48xlarge", 8),
            ("trn1.32xlarge", 8),
        ]


def test_an_overlay_raises_minimums_and_keeps_the_rest(tmp_path: Path) -> None:
    raised = "\n".join(
        f"  {region}:\n    fleets:\n"
        "      - {instance_type: inf2.48xlarge, min: 12, max: 60}\n"
        "      - {instance_type: trn1.32xlarge, min: 6, max: 30}"
        for region in ("us-east-1", "us-west-2", "us-east-2")
    )
    overlay = write(tmp_path, f"base: {REPO / 'config' / 'default.yaml'}\nregions:\n{raised}\n", "peak.yaml")
    default = load_settings(REPO / "config" / "default.yaml")
    peak = load_settings(overlay)
    assert peak.model == default.model
    assert peak.serving == default.serving
    for name, region in peak.regions.items():
        base_region = default.regions[name]
        assert region.weight == base_region.weight
        assert [f.instance_type for f in region.fleets] == [f.instance_type for f in base_region.fleets]
        for fleet, base_fleet in zip(region.fleets, base_region.fleets, strict=True):
            assert fleet.tensor_parallel == base_fleet.tensor_parallel
            assert fleet.min > base_fleet.min
            assert fleet.max >= base_fleet.max


def test_overlay_error_points_into_the_overlay_file(tmp_path: Path) -> None:
    write(tmp_path, MINIMAL, "base.yaml")
    overlay = write(
        tmp_path,
        """\
        base: base.yaml
        regions:
          us-east-1:
            fleets:
              - {instance_type: inf2.48xlarge, min: 9}
        """,
        "peak.yaml",
    )
    message = load_error(overlay)
    assert message.startswith(f"{overlay}:5: regions.us-east-1.fleets[instance_type=inf2.48xlarge]")
    assert "min (9) is above max (2)" in message


def test_overlay_can_add_a_fleet_and_a_region(tmp_path: Path) -> None:
    write(tmp_path, MINIMAL, "base.yaml")
    overlay = write(
        tmp_path,
        """\
        base: base.yaml
        container:
          image_uris: {trn2: registry.example.com/serving:trn2}
        regions:
          us-east-1:
            fleets:
              - {instance_type: trn1.32xlarge, tensor_parallel: 32, min: 0, max: 4}
          us-west-2:
            weight: 3
            fleets:
              - {instance_type: trn2.48xlarge, tensor_parallel: 64, min: 0, max: 4}
        """,
        "peak.yaml",
    )
    settings = load_settings(overlay)
    assert [f.instance_type for f in settings.regions["us-east-1"].fleets] == [
        "inf2.48xlarge",
        "trn1.32xlarge",
    ]
    assert settings.regions["us-west-2"].fleets[0].instance.neuron_cores == 64


def test_base_loop_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "base: b.yaml\n", "a.yaml")
    write(tmp_path, "base: a.yaml\n", "b.yaml")
    assert "base files form a loop" in load_error(tmp_path / "a.yaml")


def test_missing_base_is_reported_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "# peak\nbase: gone.yaml\n")
    assert f"{path}:2: base: file 'gone.yaml' not found" in load_error(path)


def test_settings_are_frozen() -> None:
    settings = load_settings(REPO / "config" / "default.yaml")
    with pytest.raises(ValueError, match="frozen"):
        settings.regions["us-east-1"].fleets[0].min = 99  # type: ignore[misc]


def test_longest_stream_covers_prefill_and_slowest_decode() -> None:
    settings = load_settings(REPO / "config" / "default.yaml")
    # 1024 tokens at 5 tok/s after a 30 s prefill budget
    assert settings.longest_stream_seconds == 30 + 205


def test_cli_exits_non_zero_with_message_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, MINIMAL.replace("min: 1, max: 2", "min: 3, max: 2"))
    assert validate_main([str(path)]) == 1
    captured = capsys.readouterr()
    assert "min (3) is above max (2)" in captured.err
    assert "Traceback" not in captured.err


def test_a_fleet_where_ec2_does_not_offer_its_type_is_a_warning_with_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, TRN1_IN_EU_WEST_1)
    loaded = load_config(path)
    assert loaded.settings.regions["eu-west-1"].fleets[0].instance_type == "trn1.32xlarge"
    assert loaded.warnings == (
        f"{path}:7: regions.eu-west-1.fleets[instance_type=trn1.32xlarge].instance_type: trn1.32xlarge is "
        "not offered in eu-west-1 per the AWS price list (offered in us-east-1, us-east-2, us-west-2); "
        "its hosts would not launch there",
    )
    assert load_config(write(tmp_path, MINIMAL, "fine.yaml")).warnings == ()


def test_configured_zones_that_miss_a_fleet_type_are_a_warning_with_file_and_line(tmp_path: Path) -> None:
    text = (
        MINIMAL.replace("us-east-1", "us-east-2")
        .replace("inf2.48xlarge", "trn1.32xlarge")
        .replace("tensor_parallel: 24", "tensor_parallel: 32")
        .replace("    weight: 1\n", "    weight: 1\n    availability_zones: [us-east-2a, us-east-2c]\n")
    )
    path = write(tmp_path, text)
    (warning,) = load_config(path).warnings
    assert warning.startswith(
        f"{path}:6: regions.us-east-2.availability_zones: trn1.32xlarge is not offered in "
    )
    assert (
        "us-east-2a per EC2's zone offerings" in warning and "us-east-2c" not in warning.split("per EC2")[0]
    )


def test_default_zones_offer_both_fleets_types_and_need_no_warning() -> None:
    settings = load_settings(REPO / "config" / "default.yaml")
    assert settings.availability_zones("us-east-1") == ["us-east-1b", "us-east-1c", "us-east-1f"]
    assert settings.availability_zones("us-west-2") == ["us-west-2b", "us-west-2d"]
    # Only us-east-2c offers trn1.32xlarge: the trn1 fleet keeps to it, the inf2 fleet spreads over both.
    inf2, trn1 = settings.regions["us-east-2"].fleets
    assert settings.availability_zones("us-east-2") == ["us-east-2a", "us-east-2c"]
    assert settings.fleet_availability_zones("us-east-2", trn1) == ["us-east-2c"]
    assert settings.fleet_availability_zones("us-east-2", inf2) == ["us-east-2a", "us-east-2c"]
    assert settings.nat_gateways("us-west-2") == 2


def test_operator_access_and_teardown_switches_default_to_safe(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, MINIMAL))
    assert settings.operations.session_manager is False and settings.operations.ecs_exec is False
    assert settings.load_balancer.deletion_protection is True
    assert settings.load_balancer.waf.enabled is True
    assert settings.regions["us-east-1"].interface_endpoints is True


def test_region_overrides_replace_the_shared_artifacts_and_images(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "    weight: 1\n",
        "    weight: 1\n    nat_gateways: 0\n    artifacts_s3_uri: s3://replica-us-east-1/model/\n"
        "    image_uris:\n      inf2: 123456789012.dkr.ecr.us-east-1.amazonaws.com/serving:1\n",
    )
    settings = load_settings(
        write(tmp_path, text + "container:\n  image_uris:\n    trn1: elsewhere/trn1:1\n")
    )
    assert settings.artifacts_s3_uri("us-east-1") == "s3://replica-us-east-1/model/"
    from settings.instances import NeuronFamily

    assert settings.image_uri("us-east-1", NeuronFamily.INF2).endswith("us-east-1.amazonaws.com/serving:1")
    assert settings.image_uri("us-east-1", NeuronFamily.TRN1) == "elsewhere/trn1:1"  # not a fleet here


def test_cli_prints_warnings_and_fails_on_them_only_when_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, TRN1_IN_EU_WEST_1)
    assert validate_main([str(path)]) == 0
    assert "config warning:" in capsys.readouterr().err
    assert validate_main([str(path), "--strict"]) == 1
    captured = capsys.readouterr()
    assert "config error (--strict):" in captured.err and "not offered in eu-west-1" in captured.err
    assert captured.out == ""


def test_an_event_already_over_is_a_warning_with_its_line_and_still_validates(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + EVENT.replace("2027-07-", "2020-07-"))
    loaded = load_config(path)
    assert loaded.settings.events[0].name == "prime-day"
    assert loaded.warnings == (
        f"{path}:11: events[name=prime-day].end: event 'prime-day' ended at 2020-07-10T00:00:00-07:00 "
        "and its maximums came down at 2020-07-10T02:00:00-07:00; nothing is scheduled for it "
        "(remove it when convenient)",
    )


def test_event_times_are_read_quoted_or_as_yaml_timestamps_with_their_offset(tmp_path: Path) -> None:
    quoted = load_settings(write(tmp_path, MINIMAL + EVENT, "quoted.yaml")).events[0]
    bare = load_settings(write(tmp_path, MINIMAL + EVENT.replace('"', ""), "bare.yaml")).events[0]
    assert quoted.start == bare.start
    assert quoted.start.utcoffset() == bare.start.utcoffset()
    assert quoted.ramp_start(1800) == datetime(2027, 7, 8, 6, 0, tzinfo=UTC)  # 30 min budget + 30 min margin


def test_an_events_overlay_adds_its_events_and_keeps_the_base_ones_by_name(tmp_path: Path) -> None:
    write(tmp_path, MINIMAL + EVENT, "base.yaml")
    overlay = write(
        tmp_path,
        "base: base.yaml\n"
        + "events:\n"
        + LATER_EVENT.replace("2027-07-09T12", "2027-12-01T00").replace("2027-07-11", "2027-12-02"),
        "peak.yaml",
    )
    assert [event.name for event in load_settings(overlay).events] == ["prime-day", "cyber-monday"]


def test_warm_pool_and_reservations_are_read_per_fleet(tmp_path: Path) -> None:
    text = with_fleet_option(
        "warm_pool: {min_size: 1, max_prepared: 3}, capacity_reservation: "
        "{preference: capacity-reservations-only, ids: [cr-0123456789abcdef0]}"
    )
    fleet = load_settings(write(tmp_path, text)).regions["us-east-1"].fleets[1]
    assert fleet.warm_pool is not None and (fleet.warm_pool.min_size, fleet.warm_pool.max_prepared) == (1, 3)
    assert fleet.capacity_reservation is not None
    assert fleet.capacity_reservation.ids == ["cr-0123456789abcdef0"]


def test_cli_summarizes_each_event_with_its_ramp(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate_main([str(write(tmp_path, MINIMAL + EVENT))]) == 0
    assert (
        "event prime-day: 2027-07-08T00:00:00-07:00 to 2027-07-10T00:00:00-07:00, bounds raised from "
        "2027-07-07T23:00:00-07:00, minimums restored at the end, maximums from "
        "2027-07-10T02:00:00-07:00: us-east-1 inf2.48xlarge x12-60"
    ) in capsys.readouterr().out


def test_cli_summarizes_a_good_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert validate_main([str(REPO / "config" / "default.yaml")]) == 0
    output = capsys.readouterr().out
    assert "us-east-1 weight 50: inf2.48xlarge x3-28 (TP 8)" in output
    assert "us-east-2 weight 20: " in output and "zones us-east-2a, us-east-2c; NAT gateways 2" in output


def test_cli_says_how_many_cells_a_region_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert validate_main([str(REPO / "config" / "prime-day.yaml")]) == 0
    output = capsys.readouterr().out
    assert "us-east-1 weight 50 in 2 cells: inf2.48xlarge x3-28 (TP 8)" in output
    assert "us-west-2 weight 30 in 2 cells: " in output
    assert "us-east-2 weight 20: " in output


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)


@given(
    base=st.dictionaries(st.text(max_size=3), json_values, max_size=4),
    overlay=st.dictionaries(st.text(max_size=3), json_values, max_size=4),
)
def test_merge_keeps_every_key_and_overlay_scalars_win(base: dict, overlay: dict) -> None:
    merged = merge(base, overlay)
    assert set(merged) == set(base) | set(overlay)
    for key, value in overlay.items():
        if not isinstance(value, dict | list):
            assert merged[key] == value
    for key in set(base) - set(overlay):
        assert merged[key] == base[key]


def test_routing_defaults_and_the_derived_host_floor() -> None:
    settings = load_settings(REPO / "config" / "default.yaml")
    # Not the largest serving region (us-east-1, weight 50) unless configured: the next one.
    assert settings.largest_region == "us-east-1"
    assert settings.orchestrator_region == "us-west-2"
    assert settings.routing.floor == 5 and settings.routing.drain_runs == 3
    # inf2 min 3 + trn1 min 2 = 5 hosts; half of them, rounded up, must stay healthy.
    assert settings.min_healthy_hosts("us-east-1") == 3


TWO_REGIONS = (
    MINIMAL
    + """\
  us-west-2:
    weight: 3
    fleets:
      - {instance_type: inf2.48xlarge, tensor_parallel: 24, min: 1, max: 2}
"""
)


def test_the_orchestrator_defaults_away_from_the_largest_region_and_warns_when_put_there(
    tmp_path: Path,
) -> None:
    """On main it ran in the first region, the largest by default: a CloudWatch or Lambda impairment there
    left only the alias target-health check."""
    plain = load_config(write(tmp_path, TWO_REGIONS, "plain.yaml"))
    assert plain.settings.largest_region == "us-west-2"
    assert plain.settings.orchestrator_region == "us-east-1" and plain.warnings == ()
    path = write(tmp_path, TWO_REGIONS + "routing: {orchestrator_region: us-west-2}\n", "pinned.yaml")
    pinned = load_config(path)
    assert pinned.settings.orchestrator_region == "us-west-2"
    (warning,) = pinned.warnings
    assert warning.startswith(
        f"{path}:12: routing.orchestrator_region: us-west-2 is the largest serving region"
    )


def test_bounds_read_in_plain_words_with_the_value_given(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, MINIMAL.replace("weight: 1", "weight: -4")))
    assert "regions.us-east-1.weight: must be greater than or equal to 0, got -4" in error
    assert "Input should" not in error


def test_a_region_past_the_alb_target_quota_with_its_surge_is_a_warning_at_the_event(tmp_path: Path) -> None:
    """Each task is an HTTP and a gRPC target: 400 inf2 hosts plus a 25% surge (100) are 1,000 targets on
    the one ALB, at the default quota; 401 pass it."""
    at_quota = load_config(
        write(tmp_path, MINIMAL + EVENT.replace("{min: 12, max: 60}", "{min: 12, max: 400}"))
    )
    assert at_quota.warnings == ()
    # A cell of more than cell_max_hosts (400) is an error unless the user raised it with their quotas.
    path = write(
        tmp_path,
        "cell_max_hosts: 500\n" + MINIMAL + EVENT.replace("{min: 12, max: 60}", "{min: 12, max: 401}"),
    )
    (warning,) = load_config(path).warnings
    assert warning.startswith(
        f"{path}:14: events[name=prime-day].regions.us-east-1: during event 'prime-day'"
    )
    assert "us-east-1 may run 502 hosts (max plus deploy surge)" in warning
    assert "1004 targets on its one ALB" in warning and "default 1,000 targets per ALB" in warning


def test_fleets_past_the_target_group_and_cluster_quotas_warn_at_the_regions_fleets(tmp_path: Path) -> None:
    path = write(tmp_path, "cell_max_hosts: 5000\n" + MINIMAL.replace("min: 1, max: 2", "min: 1, max: 4001"))
    warnings = load_config(path).warnings
    assert len(warnings) == 3
    assert all(w.startswith(f"{path}:7: regions.us-east-1.fleets: at the fleets' max") for w in warnings)
    assert "5002 hosts" in warnings[0]  # 4,001 + a 25% surge of 1,001
    assert "targets per ALB" in warnings[0]
    assert "5002 targets in each target group" in warnings[1]
    assert "5,000 container instances per cluster" in warnings[2]


CELLS = MINIMAL.replace("    weight: 1\n", "    weight: 1\n    cells: 2\n")


@pytest.mark.parametrize(
    ("yaml_text", "fragments"),
    [
        pytest.param(
            MINIMAL.replace("min: 1, max: 2", "min: 1, max: 401"),
            [
                "config.yaml:4: regions.us-east-1.cells: at the fleets' max, us-east-1 runs up to 401 hosts",
                "above cell_max_hosts 400; set regions.us-east-1.cells to at least 2",
            ],
            id="region-past-cell-max-hosts",
        ),
        pytest.param(
            MINIMAL + EVENT.replace("{min: 12, max: 60}", "{min: 12, max: 900}"),
            [
                "config.yaml:13: events[name=prime-day].regions.us-east-1: during event 'prime-day'",
                "set regions.us-east-1.cells to at least 3",
            ],
            id="event-past-cell-max-hosts",
        ),
        pytest.param(
            CELLS.replace("min: 1, max: 2", "min: 0, max: 1"),
            [
                "config.yaml:8: regions.us-east-1.fleets[instance_type=inf2.48xlarge].max",
                "below the region's 2",
            ],
            id="fleet-max-below-cells",
        ),
        pytest.param(
            CELLS + EVENT.replace("{min: 12, max: 60}", "{min: 0, max: 1}"),
            [
                "config.yaml:15: events[name=prime-day].regions.us-east-1.inf2.48xlarge.max",
                "max 1 is below us-east-1's 2 cells",
            ],
            id="event-max-below-cells",
        ),
        pytest.param(
            "cell_max_hosts: 0\n" + MINIMAL,
            ["config.yaml:1: cell_max_hosts: must be greater than 0"],
            id="cell-max-hosts-zero",
        ),
        pytest.param(
            CELLS.replace("cells: 2", "cells: 0"),
            ["config.yaml:6: regions.us-east-1.cells: must be greater than or equal to 1"],
            id="no-cells",
        ),
    ],
)
def test_cells_are_sized_against_cell_max_hosts(tmp_path: Path, yaml_text: str, fragments: list[str]) -> None:
    message = load_error(write(tmp_path, yaml_text))
    for fragment in fragments:
        assert fragment.replace("config.yaml", str(tmp_path / "config.yaml")) in message, message


def test_cells_split_every_bound_and_the_first_takes_the_remainder(tmp_path: Path) -> None:
    text = CELLS.replace("min: 1, max: 2", "min: 3, max: 9") + EVENT.replace(
        "{min: 12, max: 60}", "{min: 5, max: 7}"
    )
    settings = load_config(write(tmp_path, text)).settings
    fleet = settings.regions["us-east-1"].fleets[0]
    first, second = settings.cells("us-east-1")
    assert (first.name, second.name, second.slug) == ("us-east-1/1", "us-east-1/2", "us-east-1-cell2")
    assert settings.cell_bounds(first, fleet) == (2, 5) and settings.cell_bounds(second, fleet) == (1, 4)
    event = settings.events[0]
    assert settings.cell_bounds(first, fleet, event) == (3, 4)
    assert settings.cell_bounds(second, fleet, event) == (2, 3)
    assert settings.cell_metrics_namespace(second) == "LLMServing/cell2"
    assert settings.min_healthy_hosts("us-east-1", 2) == 1
    # Deploy surge per cell: 4 + 1 hosts in the busiest cell at the event, not the region's 7 + 2.
    assert settings.peak_hosts("us-east-1", event) == 5


def test_one_cell_keeps_the_regions_names(tmp_path: Path) -> None:
    settings = load_config(write(tmp_path, MINIMAL)).settings
    (cell,) = settings.cells("us-east-1")
    assert (cell.name, cell.slug, cell.suffix) == ("us-east-1", "us-east-1", "")
    assert settings.cell_metrics_namespace(cell) == "LLMServing"
    fleet = settings.regions["us-east-1"].fleets[0]
    assert settings.cell_bounds(cell, fleet) == (fleet.min, fleet.max)
