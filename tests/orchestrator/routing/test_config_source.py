"""The orchestrator's config from its SSM parameter: read once per cold start, refused when it is not the
config the function was deployed with, and the handler running on it (moto's SSM)."""

from __future__ import annotations

from datetime import timedelta

import boto3
import pytest

from orchestrator.routing import handler as lambda_handler
from orchestrator.routing.config_source import (
    DIGEST_VARIABLE,
    PARAMETER_VARIABLE,
    ConfigCache,
    ConfigSourceError,
    decode,
    digest,
    encode,
    load,
)
from tests.orchestrator.routing.test_handler import (
    FAILING,
    HEALTHY,
    MIN_HOSTS,
    START,
    WEIGHTS,
    Context,
    event,
    make_config,
    publish_for_run,
    weights_in_route53,
)
from tests.orchestrator.routing.test_handler import aws as aws

NAME = "/kit/routing/config-0123456789abcdef"


class CountingSsm:
    """moto's SSM client, counting GetParameter calls (how many reads a warm container makes)."""

    def __init__(self) -> None:
        self.inner = boto3.client("ssm", region_name="us-east-1")
        self.exceptions = self.inner.exceptions
        self.reads = 0

    def get_parameter(self, **kwargs):
        self.reads += 1
        return self.inner.get_parameter(**kwargs)


@pytest.fixture
def config(aws):
    return make_config(WEIGHTS, MIN_HOSTS)


def deployed(config_json: str) -> dict[str, str]:
    boto3.client("ssm", region_name="us-east-1").put_parameter(
        Name=NAME, Value=encode(config_json), Type="String", Overwrite=True
    )
    return {PARAMETER_VARIABLE: NAME, DIGEST_VARIABLE: digest(config_json)}


def test_round_trip_gives_the_config_back(config):
    assert decode(encode(config.to_json()), digest(config.to_json()), "p") == config


def test_a_parameter_of_another_deploy_is_refused_naming_both_digests(config):
    other = config.to_json().replace('"remove_after_runs":10', '"remove_after_runs":11')
    with pytest.raises(ConfigSourceError, match="deployed with"):
        decode(encode(other), digest(config.to_json()), "SSM parameter p")


@pytest.mark.parametrize("value", ["not base64!", encode("not json"), encode('{"regions": []}')])
def test_a_value_that_is_not_a_config_is_refused_naming_the_parameter(value):
    text = zlib_text(value)
    with pytest.raises(ConfigSourceError, match="SSM parameter p"):
        decode(value, digest(text) if text is not None else "0" * 64, "SSM parameter p")


def zlib_text(value: str) -> str | None:
    import base64
    import zlib

    try:
        return zlib.decompress(base64.b64decode(value, validate=True)).decode()
    except Exception:
        return None


def test_a_missing_parameter_or_environment_is_named(aws):
    with pytest.raises(ConfigSourceError, match="must be set"):
        load({}, lambda: boto3.client("ssm", region_name="us-east-1"))
    environment = {PARAMETER_VARIABLE: NAME, DIGEST_VARIABLE: "0" * 64}
    with pytest.raises(ConfigSourceError, match=f"SSM parameter {NAME}: not found"):
        load(environment, lambda: boto3.client("ssm", region_name="us-east-1"))


def test_read_once_per_cold_start(config):
    environment = deployed(config.to_json())
    ssm = CountingSsm()
    cache = ConfigCache()
    for _ in range(5):
        assert cache.get(environment, lambda: ssm) == config
    assert ssm.reads == 1


def test_a_failed_read_is_tried_again_on_the_next_run(config):
    environment = {PARAMETER_VARIABLE: NAME, DIGEST_VARIABLE: digest(config.to_json())}
    ssm = CountingSsm()
    cache = ConfigCache()
    with pytest.raises(ConfigSourceError):
        cache.get(environment, lambda: ssm)
    deployed(config.to_json())
    assert cache.get(environment, lambda: ssm) == config
    assert ssm.reads == 2


def test_the_handler_runs_on_the_config_in_its_parameter(config, monkeypatch):
    """No ORCHESTRATOR_CONFIG in the environment: the handler reads the parameter the stack wrote."""
    monkeypatch.delenv("ORCHESTRATOR_CONFIG", raising=False)
    for key, value in deployed(config.to_json()).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "kit/Routing")
    lambda_handler._boto3_client.cache_clear()
    lambda_handler._config.clear()
    try:
        for offset in range(4):
            run = START + timedelta(minutes=offset)
            publish_for_run(run, {"us-east-1": FAILING, "us-west-2": HEALTHY, "us-east-2": HEALTHY})
            result = lambda_handler.handler(event(run), Context())
        assert result["weights"] == weights_in_route53(config)
        assert weights_in_route53(config)["us-east-1"] < 50  # the config's regions were read and drained
    finally:
        lambda_handler._boto3_client.cache_clear()
        lambda_handler._config.clear()
