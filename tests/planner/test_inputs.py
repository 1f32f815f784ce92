"""Rules across the forecast, the config, the profiles and the prices, reported like config errors."""

from __future__ import annotations

import pytest

from planner.inputs import gather
from settings.loader import ConfigError

from .conftest import REPO, SMALL_FORECAST

DEFAULT = REPO / "config" / "default.yaml"


def gather_error(*args, **kwargs) -> str:
    with pytest.raises(ConfigError) as raised:
        gather(*args, **kwargs)
    return str(raised.value)


def test_a_forecast_region_the_config_lacks_is_named(write) -> None:
    message = gather_error(write(SMALL_FORECAST.replace("us-west-2", "eu-west-1")), DEFAULT)
    assert "forecast.yaml:8: regions.eu-west-1: not a region of" in message
    assert "us-east-1, us-west-2, us-east-2" in message


def test_an_slo_below_the_prefill_floor_of_the_longest_prompt_is_refused(write) -> None:
    message = gather_error(write(SMALL_FORECAST.replace("ttft_p99_ms: 1000", "ttft_p99_ms: 300")), DEFAULT)
    assert "forecast.yaml:2: slo.ttft_p99_ms: 300 ms is below the prefill floor in us-east-1" in message
    assert "p99 prompt of 3000 tokens alone takes 366 ms on the fastest engine" in message


def test_a_fleet_without_a_profile_says_how_to_get_one(write) -> None:
    config = write(
        f"""\
        base: {DEFAULT}
        regions:
          us-east-1:
            fleets:
              - {{instance_type: trn1.32xlarge, tensor_parallel: 32}}
        """,
        "tp32.yaml",
    )
    message = gather_error(write(SMALL_FORECAST), config)
    assert "regions.us-east-1.fleets[instance_type=trn1.32xlarge]: no performance profile" in message
    assert "at tensor_parallel 32" in message and "make bench-serving" in message


def test_a_fleet_without_a_price_is_named(write) -> None:
    prices = write(
        """\
        source: test
        effective: "2026-09-01"
        per_hour:
          us-east-1: {inf2.48xlarge: 1.0}
        """,
        "prices.yaml",
    )
    message = gather_error(write(SMALL_FORECAST), DEFAULT, prices_path=prices)
    assert "per_hour.us-east-1.trn1.32xlarge: no price for this fleet" in message
    assert "per_hour.us-west-2.inf2.48xlarge: no price" in message


def test_inputs_keep_the_configs_mix_and_replicas(write) -> None:
    inputs = gather(write(SMALL_FORECAST), DEFAULT)
    east = inputs.regions[0]
    assert east.name == "us-east-1" and east.weight == 50
    assert east.mix == (20.0, 10.0)
    assert [t.replicas for t in east.templates] == [3, 4]
    assert east.templates[0].engine.max_num_seqs == 32
