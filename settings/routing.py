"""How the traffic orchestrator and the Route 53 health checks judge a region and move its weight."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, model_validator

from settings.types import RegionName, StrictModel


class RoutingConfig(StrictModel):
    """How the traffic orchestrator and the Route 53 health checks judge a region and move its weight."""

    # Where the orchestrator runs (its schedule, state and override parameters); default: the first region.
    orchestrator_region: RegionName | None = None
    # A region is bad in a minute when the share of its streams with a first token slower than
    # observability.ttft_p99_threshold_ms is above this (0.01: p99 above the threshold) ...
    slow_first_token_share: Annotated[float, Field(gt=0, lt=1)] = 0.01
    # ... or when more than this share of its requests failed ...
    error_share: Annotated[float, Field(gt=0, lt=1)] = 0.01
    # ... or when fewer hosts are healthy than this share of its fleets' summed minimums (at least one).
    min_healthy_host_share: Annotated[float, Field(gt=0, le=1)] = 0.5
    # Weight every region keeps while it is not pinned, degraded or not, so it stays warm.
    floor: Annotated[int, Field(ge=1, le=255)] = 5
    # Largest change of a healthy region's weight in one run (rebalancing and regaining weight).
    gain_step: Annotated[int, Field(ge=1, le=255)] = 10
    # Bad runs in a row before a region loses weight: a single bad minute moves nothing.
    bad_runs_to_drain: Annotated[int, Field(ge=1, le=5)] = 2
    # Runs from the first bad one until the region's weight is at the floor, from any weight.
    drain_runs: Annotated[int, Field(ge=1, le=10)] = 3
    # Healthy runs in a row before a region that was bad (or just looked bad) gains weight again.
    healthy_runs_to_recover: Annotated[int, Field(ge=1, le=60)] = 3
    # Runs (minutes) a weighted record whose region left config keeps its weight before the orchestrator
    # sets it to 0 (a region removed by mistake and put back in time loses nothing); deletion is by hand.
    remove_after_runs: Annotated[int, Field(ge=1, le=1440)] = 10

    @model_validator(mode="after")
    def _drain_after_confirming(self) -> Self:
        if self.bad_runs_to_drain > self.drain_runs:
            raise ValueError(
                f"bad_runs_to_drain ({self.bad_runs_to_drain}) exceeds drain_runs ({self.drain_runs}): "
                "a region could not reach its floor in drain_runs runs"
            )
        return self
