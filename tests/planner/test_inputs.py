"""Rules across the forecast, the config, the profiles and the prices, reported like config errors."""

from __future__ import annotations

import json

import pytest

from planner.buckets import MODEL_JSON, prefill_buckets
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
    message = gather_error(write(SMALL_FORECAST.replace("ttft_p99_ms: 1000", "ttft_p99_ms: 250")), DEFAULT)
    assert "forecast.yaml:2: slo.ttft_p99_ms: 250 ms is below the prefill floor in us-east-1" in message
    # A 3,000-token prompt runs the 4,096-token context bucket of the container's model.json: 4,096 tokens
    # at the profiles' 14,067 tokens/s.
    assert "p99 prompt of 3000 tokens (prefilled as 4096, its bucket) alone takes 291 ms" in message


def test_a_fleet_no_profile_can_be_derived_for_is_named_with_its_line_and_profile_option(write) -> None:
    """TP 1 on inf2: half a chip's 16 GiB holds no 8B weights plus KV cache, so nothing can be derived."""
    config = write(
        f"""\
        base: {DEFAULT}
        regions:
          us-east-1:
            fleets:
              - {{instance_type: inf2.48xlarge, tensor_parallel: 1, min: 1, max: 2}}
        """,
        "tp1.yaml",
    )
    message = gather_error(write(SMALL_FORECAST), config)
    assert (
        "tp1.yaml:5: regions.us-east-1.fleets[instance_type=inf2.48xlarge]: no performance profile" in message
    )
    assert "at tensor_parallel 1" in message and "PROFILE=" in message and "make bench-serving" in message


def test_a_type_and_tp_without_a_file_get_a_profile_derived_per_chip(write) -> None:
    """The issue's example: a config that validates (eu-west-1, inf2.24xlarge) can be planned."""
    config = write(
        f"""\
        base: {DEFAULT}
        regions:
          eu-west-1:
            weight: 10
            fleets:
              - {{instance_type: inf2.24xlarge, tensor_parallel: 4, min: 1, max: 4}}
        """,
        "eu.yaml",
    )
    forecast = write(SMALL_FORECAST.replace("us-west-2", "eu-west-1"))
    inputs = gather(forecast, config)
    (eu,) = [region for region in inputs.regions if region.name == "eu-west-1"]
    assert eu.derived == (True,) and eu.hourly_prices == (8.11329,)
    assert eu.templates[0].replicas == 3  # 12 NeuronCores / TP 4


def test_prompt_p99_plus_output_above_max_model_len_is_refused(write) -> None:
    forecast = write(SMALL_FORECAST.replace("{mean: 900, p99: 3000}", "{mean: 900, p99: 7800}", 1))
    message = gather_error(forecast, DEFAULT)
    assert "forecast.yaml:6: regions.us-east-1.prompt_tokens.p99" in message
    assert (
        "7800 tokens plus a p99 output of 900 is 8700 tokens, above the model's max_model_len of 8192"
        in message
    )


def test_prefill_buckets_are_read_from_the_containers_engine_settings(write, tmp_path) -> None:
    shipped = gather(write(SMALL_FORECAST), DEFAULT)
    assert shipped.regions[0].templates[0].engine.prefill_buckets == (512, 1024, 2048, 4096, 8192)
    settings = json.loads(MODEL_JSON.read_text())
    settings["additional_config"]["override_neuron_config"]["context_encoding_buckets"] = [2048, 8192]
    other = tmp_path / "model.json"
    other.write_text(json.dumps(settings))
    inputs = gather(write(SMALL_FORECAST), DEFAULT, engine_settings=other)
    assert inputs.regions[0].templates[0].engine.prefill_buckets == (2048, 8192)
    settings["additional_config"]["override_neuron_config"]["enable_bucketing"] = False
    other.write_text(json.dumps(settings))
    inputs = gather(write(SMALL_FORECAST), DEFAULT, engine_settings=other)
    assert inputs.regions[0].templates[0].engine.prefill_buckets == ()


def test_a_broken_bucket_list_is_named(tmp_path) -> None:
    bad = tmp_path / "model.json"
    bad.write_text(
        json.dumps(
            {
                "additional_config": {
                    "override_neuron_config": {
                        "enable_bucketing": True,
                        "context_encoding_buckets": [512, "x"],
                    }
                }
            }
        )
    )
    with pytest.raises(ConfigError, match=r"context_encoding_buckets: expected a list of positive"):
        prefill_buckets(bad)


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
    assert 'PLAN_ARGS="--prices FILE"' in message
    assert "default.yaml:" in message and "regions.us-east-1.fleets[instance_type=trn1.32xlarge]" in message


def test_inputs_keep_the_configs_mix_and_replicas(write) -> None:
    inputs = gather(write(SMALL_FORECAST), DEFAULT)
    east = inputs.regions[0]
    assert east.name == "us-east-1" and east.weight == 50
    assert east.mix == (28.0, 14.0)
    assert [t.replicas for t in east.templates] == [3, 4]
    assert east.templates[0].engine.max_num_seqs == 32


def test_missing_engine_settings_are_named(write, tmp_path) -> None:
    message = gather_error(write(SMALL_FORECAST), DEFAULT, engine_settings=tmp_path / "model.json")
    assert "model.json: engine settings file not found" in message


def test_decode_buckets_are_read_from_the_containers_engine_settings(write, tmp_path) -> None:
    shipped = gather(write(SMALL_FORECAST), DEFAULT)
    engine = shipped.regions[0].templates[0].engine
    assert engine.decode_buckets == (1024, 2048, 4096, 8192)
    assert engine.decode_step(32, 3000) > engine.decode_step(32, 1500)  # the 4,096 bucket reads more
    settings = json.loads(MODEL_JSON.read_text())
    settings["additional_config"]["override_neuron_config"]["token_generation_buckets"] = [8192]
    other = tmp_path / "model.json"
    other.write_text(json.dumps(settings))
    inputs = gather(write(SMALL_FORECAST), DEFAULT, engine_settings=other)
    assert inputs.regions[0].templates[0].engine.decode_buckets == (8192,)


def test_answers_longer_than_max_output_tokens_are_refused_with_their_line(write) -> None:
    long = SMALL_FORECAST.replace("{mean: 250, p99: 900}", "{mean: 1500, p99: 4000}", 1)
    message = gather_error(write(long), DEFAULT)
    assert "forecast.yaml:7: regions.us-east-1.output_tokens.mean: 1500 tokens is above" in message
    assert "forecast.yaml:7: regions.us-east-1.output_tokens.p99: 4000 tokens is above" in message
    assert "max_output_tokens of 1024" in message and "clip_output_to_max: true" in message
    only_tail = SMALL_FORECAST.replace("{mean: 250, p99: 900}", "{mean: 600, p99: 2000}", 1)
    message = gather_error(write(only_tail), DEFAULT)
    assert "output_tokens.p99: 2000 tokens is above" in message and "output_tokens.mean" not in message


def test_clipping_on_purpose_plans_and_costs_the_clipped_tokens(write) -> None:
    """With clip_output_to_max, a mean of 1,500 against the 1,024 cap: the engine generates the clipped
    mean, and the cost per million tokens divides by those, not by 1,500."""
    # A p99 prompt of 3,000 + a p99 answer of 7,000 is over max_model_len, but answers stop at 1,024.
    text = SMALL_FORECAST.replace("{mean: 250, p99: 900}", "{mean: 1500, p99: 7000}", 1)
    inputs = gather(write(text + "clip_output_to_max: true\n"), DEFAULT)
    east = inputs.regions[0].demand
    assert east.output_mean == pytest.approx(east.output.capped_mean(1024))
    assert east.output_mean < 0.75 * 1500
    # An answer within the cap keeps nearly the forecast's mean (its tail past 1,024 is cut: -0.6%).
    assert inputs.regions[1].demand.output_mean == pytest.approx(250, rel=0.01)


def test_a_type_a_region_does_not_offer_is_named_with_the_zone_table(write) -> None:
    """trn1 in eu-west-1: EC2 has no zone offering it; the error says so, not 'no price'."""
    config = write(
        f"""\
        base: {DEFAULT}
        regions:
          eu-west-1:
            weight: 10
            fleets:
              - {{instance_type: trn1.32xlarge, tensor_parallel: 8, min: 1, max: 4}}
        """,
        "eu.yaml",
    )
    message = gather_error(write(SMALL_FORECAST.replace("us-west-2", "eu-west-1")), config)
    assert "eu.yaml:6: regions.eu-west-1.fleets[instance_type=trn1.32xlarge]" in message
    assert "EC2 does not offer trn1.32xlarge in eu-west-1" in message
    assert "settings/zone_offerings.py" in message and "inf2.48xlarge" in message
    assert "no price" not in message
