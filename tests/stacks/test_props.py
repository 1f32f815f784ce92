"""Settings -> construct props: every derived value, without synthesizing."""

from __future__ import annotations

import pytest

from cdk_constructs.load_balancer import CertificateFromArn, CertificateFromDns
from settings import load_settings
from stacks import props

ARN = "arn:aws:acm:us-west-2:111111111111:certificate/abc-123"


@pytest.fixture
def overlay(tmp_path):
    def write(text: str):
        path = tmp_path / "overlay.yaml"
        path.write_text(f"base: {props.CONTAINER_DIRECTORY.parent / 'config' / 'default.yaml'}\n{text}")
        return load_settings(path)

    return write


def test_stream_timeouts_equal_the_longest_stream(settings):
    lb = props.load_balancer_props(settings, "us-east-1")
    assert lb.idle_timeout_seconds == lb.deregistration_delay_seconds == settings.longest_stream_seconds
    assert settings.longest_stream_seconds == 30 + 1024 // 5 + 1


def test_ready_path_names_the_configured_model(settings):
    assert props.load_balancer_props(settings, "us-east-1").ready_path == "/v2/models/assistant/ready"


def test_certificate_is_created_unless_the_region_names_one(overlay):
    settings = overlay(f"regions:\n  us-west-2:\n    certificate_arn: {ARN}\n")
    assert props.load_balancer_props(settings, "us-west-2").certificate == CertificateFromArn(ARN)
    assert isinstance(props.load_balancer_props(settings, "us-east-1").certificate, CertificateFromDns)


def test_image_comes_from_config_per_family_else_from_the_container_folder(overlay):
    settings = overlay("container:\n  image_uris:\n    trn1: registry.example.com/serving:trn1\n")
    inf2, trn1 = settings.regions["us-east-1"].fleets
    assert props.image_source(settings, trn1).image_uri == "registry.example.com/serving:trn1"
    asset = props.image_source(settings, inf2)
    assert asset.image_uri is None and asset.asset_directory.endswith("container")
    assert "**/__pycache__" in asset.asset_exclude


def test_fleet_props_carry_the_config(settings):
    fleet = settings.regions["us-east-1"].fleets[1]
    built = props.fleet_props(settings, "us-east-1", fleet)
    assert (built.instance.name, built.tensor_parallel, built.min_hosts, built.max_hosts) == (
        "trn1.32xlarge",
        8,
        1,
        10,
    )
    assert built.health_check_grace_seconds >= built.cold_start_budget_seconds
    assert built.shared_memory_mib == 4096
    environment = dict(built.environment)
    assert environment["ENGINE_MAX_NUM_SEQS"] == "32"
    assert environment["ASSISTANT_MAX_TOKENS_LIMIT"] == "1024"
    assert built.target_requests_in_flight == 24
    assert built.offered_in_region
    assert not props.fleet_props(settings, "eu-west-1", fleet).offered_in_region  # no Trn1 there
    assert fleet.engine_replicas == 4 and fleet.serving_slots(32) == 128


def test_zones_and_nat_gateways_follow_the_seeded_zones(overlay):
    settings = overlay("regions:\n  us-east-2:\n    availability_zones: [us-east-2a, us-east-2b]\n")
    assert props.network_props(settings, "us-east-2").zones == 2
    assert props.network_props(settings, "us-east-2").nat_gateways == 2
    assert props.network_props(settings, "us-east-1").cidr == "10.0.0.0/16"


def test_names_are_known_from_config_alone(settings):
    assert props.stack_name(settings, "us-east-2") == "shopping-assistant-us-east-2"
    assert props.degraded_alarm_name(settings, "us-east-2") == "shopping-assistant-us-east-2-region-degraded"
    observability = props.observability_props(settings, "us-east-2")
    assert observability.model_name == "assistant"
    assert observability.metrics_namespace == "LLMServing"


def test_container_reads_weights_and_artifacts_under_the_one_readable_prefix(settings):
    environment = dict(props.engine_environment(settings))
    prefix = "s3://shopping-assistant-model-artifacts/llama-8b-instruct/"
    assert environment["MODEL_S3_URI"] == prefix + "weights/"
    assert environment["COMPILED_ARTIFACTS_S3_URI"] == prefix + "compiled/"
    assert environment["ALLOW_COMPILE"] == "false"
    # The compiled-artifact key names the model, not the place its files happen to live.
    assert environment["MODEL_ID"] == settings.model.model_id == "llama-3.1-8b-instruct"
    assert (environment["HTTP_PORT"], environment["GRPC_PORT"], environment["METRICS_PORT"]) == (
        "8000",
        "8001",
        "8002",
    )


def test_default_generation_length_never_exceeds_the_limit(overlay):
    settings = overlay("model:\n  max_output_tokens: 100\n")
    environment = dict(props.engine_environment(settings))
    assert environment["ASSISTANT_DEFAULT_MAX_TOKENS"] == "100"
