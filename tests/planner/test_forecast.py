"""Forecast files: the public format, and a clear file:line: key message for every mistake."""

from __future__ import annotations

import pytest

from planner.forecast import load_forecast
from settings.loader import ConfigError

from .conftest import REPO, SMALL_FORECAST

BAD_FORECASTS = [
    pytest.param(
        SMALL_FORECAST.replace("second: 40", "second: -40"),
        ["forecast.yaml:5", "regions.us-east-1.peak_requests_per_second", "cannot be negative, got -40"],
        id="negative-rate",
    ),
    pytest.param(
        SMALL_FORECAST.replace("second: 40", "second: 0"),
        ["forecast.yaml:5", "regions.us-east-1.peak_requests_per_second", "a peak of 0 has nothing to plan"],
        id="zero-rate",
    ),
    pytest.param(
        SMALL_FORECAST.replace("peak_requests_per_second: 40", "peak_tokens_per_minute: 0"),
        ["regions.us-east-1.peak_tokens_per_minute", "a peak of 0 has nothing to plan"],
        id="zero-tokens",
    ),
    pytest.param(
        SMALL_FORECAST.replace(
            "peak_requests_per_second: 40", "peak_requests_per_second: 40\n    peak_tokens_per_minute: 9"
        ),
        ["regions.us-east-1", "give exactly one of peak_requests_per_second and peak_tokens_per_minute"],
        id="two-peaks",
    ),
    pytest.param(
        SMALL_FORECAST.replace("    peak_requests_per_second: 40\n", ""),
        ["regions.us-east-1", "give exactly one of"],
        id="no-peak",
    ),
    pytest.param(
        SMALL_FORECAST + "failover_headroom: 1.5\n",
        ["failover_headroom"],
        id="failover-headroom-above-100pc",
    ),
    pytest.param(
        SMALL_FORECAST.replace("{mean: 900, p99: 3000}", "{mean: 900, p99: 300}", 1),
        ["forecast.yaml:6", "regions.us-east-1.prompt_tokens", "p99 (300) is below the mean (900)"],
        id="p99-below-mean",
    ),
    pytest.param(
        SMALL_FORECAST.replace("us-west-2", "us-wset-2"),
        ["forecast.yaml:8", "regions.us-wset-2", "unknown region 'us-wset-2'"],
        id="unknown-region",
    ),
    pytest.param(
        SMALL_FORECAST.replace("{mean: 250, p99: 900}", "{mean: 25, p99: 900}", 1),
        ["regions.us-east-1.output_tokens", "more than 15.0x the mean", "no lognormal"],
        id="tail-too-heavy",
    ),
    pytest.param(
        SMALL_FORECAST.replace("ttft_p99_ms", "ttft_p99"),
        ["forecast.yaml:2", "slo.ttft_p99", "unknown key; did you mean 'ttft_p99_ms'?"],
        id="typo",
    ),
    pytest.param(
        SMALL_FORECAST.replace('end: "2027-03-02T00:00:00Z"', 'end: "2027-02-28T00:00:00Z"'),
        ["forecast.yaml:1", "event", "is not after start"],
        id="ends-before-it-starts",
    ),
    pytest.param(
        SMALL_FORECAST.replace('"2027-03-01T00:00:00Z"', '"2027-03-01T00:00:00"'),
        ["event.start", "has no UTC offset"],
        id="no-offset",
    ),
    pytest.param(
        SMALL_FORECAST.replace("spring-sale", "Spring Sale"),
        ["event.name", "should match pattern"],
        id="bad-event-name",
    ),
    pytest.param(
        SMALL_FORECAST[: SMALL_FORECAST.index("  us-west-2:")] + "survive_region_loss: true\n",
        ["forecast.yaml:8", "survive_region_loss", "one region (us-east-1) has no other region"],
        id="region-loss-with-one-region",
    ),
    pytest.param(
        SMALL_FORECAST.replace("slo: {ttft_p99_ms: 1000}\n", ""),
        ["slo", "required key is missing"],
        id="no-slo",
    ),
]


@pytest.mark.parametrize(("text", "fragments"), BAD_FORECASTS)
def test_bad_forecast_is_named_with_file_line_and_key(write, text: str, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as raised:
        load_forecast(write(text))
    message = str(raised.value)
    for fragment in fragments:
        assert fragment in message, message


def test_unquoted_times_are_read_as_the_same_moment(write) -> None:
    forecast, _ = load_forecast(
        write(SMALL_FORECAST.replace('"2027-03-01T00:00:00Z"', "2027-03-01T00:00:00-07:00"))
    )
    assert forecast.event.start.isoformat() == "2027-03-01T00:00:00-07:00"


def test_the_shipped_forecast_is_valid() -> None:
    forecast, _ = load_forecast(REPO / "config" / "forecasts" / "prime-day.yaml")
    assert forecast.event.name == "prime-day"
    assert list(forecast.regions) == ["us-east-1", "us-west-2", "us-east-2"]
    assert forecast.survive_region_loss


def test_tokens_per_minute_become_requests_per_second_by_the_mean_tokens_per_request(write) -> None:
    forecast, _ = load_forecast(
        write(SMALL_FORECAST.replace("peak_requests_per_second: 40", "peak_tokens_per_minute: 3000000"))
    )
    east = forecast.regions["us-east-1"]
    assert east.requests_per_second == pytest.approx(3_000_000 / 60 / (900 + 250))
    assert forecast.regions["us-west-2"].requests_per_second == 20


def test_failover_headroom_defaults_to_ten_percent(write) -> None:
    forecast, _ = load_forecast(write(SMALL_FORECAST))
    assert forecast.failover_headroom == 0.1
    forecast, _ = load_forecast(write(SMALL_FORECAST + "failover_headroom: 0.25\n"))
    assert forecast.failover_headroom == 0.25


def test_the_published_case_study_is_three_million_tokens_a_minute_on_80000_chips() -> None:
    forecast, _ = load_forecast(REPO / "config" / "forecasts" / "published-case-study.yaml")
    assert sum(region.peak_tokens_per_minute or 0 for region in forecast.regions.values()) == 3_000_000
    assert forecast.published is not None and forecast.published.chips == 80_000


def test_the_scale_test_is_named_for_what_it_is() -> None:
    forecast, _ = load_forecast(REPO / "bench" / "scale-test-forecast.yaml")
    assert forecast.event.name == "scale-test"
    assert "synthetic scale test" in (REPO / "bench" / "scale-test-forecast.yaml").read_text()
