"""Forecast file -> Forecast: the traffic a peak event brings to each region, and the SLO to keep.

The format is a public interface (docs/planner.md); every mistake is reported with its file,
line and key by the same formatter as config errors."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from planner.simulate import LogNormal
from settings.loader import Document, load_model
from settings.schema import EventConfig, EventTime, RegionName

# The config's rule for an event name, read from its schema so the two cannot drift apart.
EVENT_NAME = EventConfig.model_fields["name"].metadata[0].pattern


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class EventWindow(_Model):
    """The event's name and window, in the form and with the rules of the config's `events:` entries."""

    name: Annotated[str, Field(pattern=EVENT_NAME)]
    start: EventTime
    end: EventTime

    @model_validator(mode="after")
    def _ends_after_start(self) -> Self:
        if self.end <= self.start:
            raise ValueError(f"end {self.end.isoformat()} is not after start {self.start.isoformat()}")
        return self


class Slo(_Model):
    ttft_p99_ms: Annotated[float, Field(gt=0)]


class TokenCounts(_Model):
    mean: Annotated[float, Field(gt=0)]
    p99: Annotated[float, Field(gt=0)]

    @model_validator(mode="after")
    def _fits_a_lognormal(self) -> Self:
        if self.p99 < self.mean:
            raise ValueError(f"p99 ({self.p99:g}) is below the mean ({self.mean:g})")
        if self.p99 / self.mean > LogNormal.MAX_P99_OVER_MEAN:
            raise ValueError(
                f"p99 ({self.p99:g}) is more than {LogNormal.MAX_P99_OVER_MEAN:.1f}x the mean "
                f"({self.mean:g}); no lognormal distribution has that tail"
            )
        return self

    def distribution(self) -> LogNormal:
        return LogNormal.fit(self.mean, self.p99)


def _positive_rate(rate: float) -> float:
    if rate < 0:
        raise ValueError(f"a rate cannot be negative, got {rate:g}")
    if rate == 0:
        raise ValueError("a peak of 0 has nothing to plan: leave the region out of the forecast")
    return rate


Rate = Annotated[float, AfterValidator(_positive_rate)]


class RegionForecast(_Model):
    """The peak as requests per second, or as tokens per minute (prompt + output tokens, the way published
    figures often count) converted with the mean tokens per request."""

    peak_requests_per_second: Rate | None = None
    peak_tokens_per_minute: Rate | None = None
    prompt_tokens: TokenCounts
    output_tokens: TokenCounts

    @model_validator(mode="after")
    def _one_peak(self) -> Self:
        if (self.peak_requests_per_second is None) == (self.peak_tokens_per_minute is None):
            raise ValueError("give exactly one of peak_requests_per_second and peak_tokens_per_minute")
        return self

    @property
    def requests_per_second(self) -> float:
        if self.peak_requests_per_second is not None:
            return self.peak_requests_per_second
        assert self.peak_tokens_per_minute is not None
        return self.peak_tokens_per_minute / 60 / (self.prompt_tokens.mean + self.output_tokens.mean)


class PublishedFleet(_Model):
    """A published deployment the forecast restates, to compare its chips with the plan's."""

    chips: Annotated[int, Field(gt=0)]
    source: Annotated[str, Field(min_length=1)]


class Forecast(_Model):
    event: EventWindow
    slo: Slo
    regions: Annotated[dict[RegionName, RegionForecast], Field(min_length=1)]
    # The other regions can take the largest region's traffic (any one region's, in fact) if it is lost.
    survive_region_loss: bool = False
    # Answers longer than the config's model.max_output_tokens are an error unless this says the engine
    # may cut them there: the plan (and its cost per million tokens) then counts the tokens it generates.
    clip_output_to_max: bool = False
    # Load above a region's failover traffic it is sized for: without it a region that takes a lost
    # region's share runs at the knee of its p99 curve, where +2% more load doubles the p99.
    failover_headroom: Annotated[float, Field(ge=0, le=1)] = 0.1
    published: PublishedFleet | None = None

    @field_validator("survive_region_loss")
    @classmethod
    def _another_region_to_fail_over_to(cls, survive: bool, info: ValidationInfo) -> bool:
        regions = info.data.get("regions")
        if survive and regions is not None and len(regions) < 2:
            raise ValueError(
                f"a forecast of one region ({', '.join(regions)}) has no other region to take its "
                "traffic if it is lost; add the regions that would, or set it to false"
            )
        return survive


def load_forecast(path: str | Path) -> tuple[Forecast, Document]:
    """Raises settings.loader.ConfigError with one 'file:line: key: problem' line per mistake."""
    return load_model(path, Forecast)
