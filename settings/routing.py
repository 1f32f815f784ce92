"""How the traffic orchestrator and the Route 53 health checks judge a region and move its weight."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, model_validator

from settings.types import RegionName, StrictModel


class RoutingConfig(StrictModel):
    """How the traffic orchestrator and the Route 53 health checks judge a region and move its weight."""

    # Where the orchestrator runs (its schedule, state and override parameters); default: the largest serving
    # region but one (by weight, then hosts), so an impairment there leaves the orchestrator running; set to
    # the largest region itself, validation warns.
    orchestrator_region: RegionName | None = None
    # Streams with a first token slower than observability.ttft_p99_threshold_ms above this share page
    # (0.01: p99 above the threshold). Latency rises with load: it never drains a region nor takes it out
    # of DNS; the orchestrator moves weight by spare slots instead.
    slow_first_token_share: Annotated[float, Field(gt=0, lt=1)] = 0.01
    # A region is bad (drained, and out of DNS on 3 of 5 minutes) when more than this share of its requests
    # failed on the server's side; shed requests are not failures.
    error_share: Annotated[float, Field(gt=0, lt=1)] = 0.01
    # A region leaves Route 53's answers when more than this share failed on the server's side in 3 of the
    # last 5 minutes: a hard fault, cannot serve. Above error_share, so that errors between the two drain it
    # by weight (with the orchestrator's recovery wait) instead of flapping its DNS record.
    dns_error_share: Annotated[float, Field(gt=0, lt=1)] = 0.05
    # Kept for configs that set it; no longer used: only no healthy host at all is a hard fault.
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
    # One orchestrator run at a time is kept by a run lock (a DynamoDB conditional write) in every account;
    # true adds reserved concurrency 1, which Lambda allows only where the account keeps 100 unreserved
    # besides it (`make preflight` reads the account's concurrency and says whether it fits).
    reserved_concurrency: bool = False

    @model_validator(mode="after")
    def _dns_bar_above_the_drain_bar(self) -> Self:
        if self.dns_error_share < self.error_share:
            raise ValueError(
                f"dns_error_share ({self.dns_error_share}) is below error_share ({self.error_share}): a "
                "region would leave DNS before the orchestrator drained it"
            )
        return self

    @model_validator(mode="after")
    def _drain_after_confirming(self) -> Self:
        if self.bad_runs_to_drain > self.drain_runs:
            raise ValueError(
                f"bad_runs_to_drain ({self.bad_runs_to_drain}) exceeds drain_runs ({self.drain_runs}): "
                "a region could not reach its floor in drain_runs runs"
            )
        return self
