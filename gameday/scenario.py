"""The game-day scenario file (a public interface, docs/gameday.md), validated with the same
'file:line: key.path: problem' errors as a config."""

from __future__ import annotations

import itertools
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from settings.loader import ConfigError, Document, read_document, validation_messages

Minute = Annotated[int, Field(ge=0)]
Share = Annotated[float, Field(ge=0, le=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tokens(_Strict):
    mean: Annotated[float, Field(gt=0)]
    p99: Annotated[float, Field(gt=0)]

    @model_validator(mode="after")
    def _p99_not_below_mean(self) -> Tokens:
        if self.p99 < self.mean:
            raise ValueError(f"p99 {self.p99:g} is below the mean {self.mean:g}")
        return self


class Requests(_Strict):
    prompt_tokens: Tokens = Tokens(mean=900, p99=3000)
    output_tokens: Tokens = Tokens(mean=250, p99=900)


class Dns(_Strict):
    ttl_seconds: Annotated[int, Field(ge=0, le=86400)] = 60
    stale_share: Share = 0.05


class Slo(_Strict):
    ttft_p99_ms: Annotated[float, Field(gt=0)] | None = None
    error_share: Share | None = None


class Page(_Strict):
    """A page the day must raise: a paging alarm (one with the alarm topic as its action) of `target` (a
    region, or a cell `us-east-1/2`) in ALARM on `metric` (one of the alarms it rests on) by minute `by`."""

    target: str
    metric: str
    by: Minute


class Judge(_Strict):
    """The verdict's thresholds for this scenario (docs/gameday.md, "Verdict")."""

    # Requests served within the objective over min(offered, the fleets' capacity), over the day: each
    # region's and all regions' together must reach this.
    goodput: Share = 0.99
    lost_requests: Annotated[int, Field(ge=0)] = 0  # the most requests the day may lose, all regions
    # After a fault starts (and after it ends), the region or cell it names may miss the SLO this long.
    grace_minutes: Annotated[int, Field(ge=0, le=120)] = 15
    # Pages an operator must get: overload and latency page rather than drain, so a page that never comes
    # is a failure of its own.
    pages: list[Page] = []


class Metrics(_Strict):
    # How long after its minute ends a one-minute datapoint is readable. AWS gives no bound; 2 minutes is
    # the figure commonly cited (docs/gameday.md, "Metrics delay").
    delay_minutes: Annotated[int, Field(ge=0, le=15)] = 2


Measure = Literal["slo_minutes", "requests_lost"]


class Counterfactual(_Strict):
    """Run the day a second time with the orchestrator off; each measure named must be strictly smaller
    with it on (it made the day better)."""

    must_improve: Annotated[list[Measure], Field(min_length=1)] = ["slo_minutes", "requests_lost"]


class _Fault(_Strict):
    at: Minute
    until: Minute | None = None

    @model_validator(mode="after")
    def _until_after_at(self) -> _Fault:
        if self.until is not None and self.until <= self.at:
            raise ValueError(f"until ({self.until}) must be after at ({self.at})")
        return self

    def active(self, minute: int) -> bool:
        return self.at <= minute and (self.until is None or minute < self.until)


class RegionDown(_Fault):
    kind: Literal["region_down"]
    region: str


class EngineDeaths(_Fault):
    kind: Literal["engine_deaths"]
    region: str
    share: Annotated[float, Field(gt=0, le=1)]


class CapacityShortage(_Fault):
    kind: Literal["capacity_shortage"]
    region: str
    instance_type: str


class FrontDoorDown(_Fault):
    """Clients cannot reach the region's (or cell's) load balancer: a listener, certificate, WAF or network
    fault in front of targets that stay healthy. Every request sent there is lost; the ALB and the
    containers see none of them."""

    kind: Literal["front_door_down"]
    region: str


class Slowdown(_Fault):
    """Every engine of the region (or cell) serves at `factor` of its speed (a bad driver, AMI or model
    build; thermal throttling): no target fails a health check. With `ramp_minutes`, the speed falls
    linearly from 1 to `factor` over that time from `at`."""

    kind: Literal["slowdown"]
    region: str
    factor: Annotated[float, Field(gt=0, lt=1)]
    ramp_minutes: Annotated[int, Field(ge=0)] = 0

    def speed(self, minute: int) -> float:
        if not self.active(minute):
            return 1.0
        if self.ramp_minutes and minute - self.at < self.ramp_minutes:
            return 1 - (1 - self.factor) * (minute - self.at) / self.ramp_minutes
        return self.factor


class ServingErrors(_Fault):
    """A `share` of the region's (or cell's) requests fail on the server's side (a bad model build, a
    dependency of the request path failing) while every target passes its health checks. With `every` 2
    it strikes on alternate minutes from `at` (a fault that flaps: never N bad minutes in a row)."""

    kind: Literal["serving_errors"]
    region: str
    share: Annotated[float, Field(gt=0, le=1)]
    every: Annotated[int, Field(ge=1, le=60)] = 1
    # False: the requests fail before the containers' request metrics are written (the server's HTTP layer
    # answering 5xx, a sidecar in the request path failing), so ServingError and RequestFailed never count
    # them and neither do the checks and orchestrator signals built on them; only the ALB's target 5xx
    # count (the region-unfit composite's Target5xxShare alarm) sees them.
    counted: bool = True

    def striking(self, minute: int) -> bool:
        return self.active(minute) and (minute - self.at) % self.every == 0


class ApiErrors(_Fault):
    kind: Literal["api_errors"]
    service: Literal["route53", "cloudwatch", "ssm"]


class DuplicateRuns(_Fault):
    kind: Literal["duplicate_runs"]


class MetricsDelay(_Fault):
    kind: Literal["metrics_delay"]
    minutes: Annotated[int, Field(ge=1, le=60)]


Fault = Annotated[
    RegionDown
    | FrontDoorDown
    | EngineDeaths
    | Slowdown
    | ServingErrors
    | CapacityShortage
    | ApiErrors
    | DuplicateRuns
    | MetricsDelay,
    Field(discriminator="kind"),
]
TrafficPoint = tuple[Minute, Annotated[float, Field(ge=0)]]


class Revision(_Strict):
    """What the deployed change does once its tasks (or hosts, for an AMI) run: nothing wrong (the default),
    fail a share of the requests they serve, serve `slower` times slower, or crash on start before their
    health check ever passes. At most one fault: a revision wrong in two ways tests nothing more."""

    name: str = "next"
    errors: Annotated[float, Field(gt=0, le=1)] | None = None
    slower: Annotated[float, Field(gt=1, le=10)] | None = None
    crashes: bool = False

    @model_validator(mode="after")
    def _one_fault(self) -> Revision:
        faults = [k for k in ("errors", "slower") if getattr(self, k) is not None] + (
            ["crashes"] if self.crashes else []
        )
        if len(faults) > 1:
            raise ValueError(f"one of errors, slower, crashes at most, got {', '.join(faults)}")
        return self

    @property
    def good(self) -> bool:
        return self.errors is None and self.slower is None and not self.crashes

    @property
    def speed(self) -> float:
        """The new tasks' engines' share of their normal speed (a Slowdown's factor)."""
        return 1.0 / self.slower if self.slower else 1.0


class Deploy(_Strict):
    """A change `make deploy` (ops/deploy_waves.py, the real code) rolls out from minute `at`: a new container
    `image`, a new host `ami`, a `config` change that moves no task, or a `new_cell` (`cell`, a cell of the
    config that is not deployed before `at`)."""

    kind: Literal["deploy"]
    at: Minute
    change: Literal["image", "ami", "config", "new_cell"]
    revision: Revision = Revision()
    cell: str | None = None
    # Arguments for `python -m ops.deploy_waves` beyond the config (e.g. ["--bake-minutes", "10"]).
    args: list[str] = []

    @model_validator(mode="after")
    def _cell_for_a_new_cell(self) -> Deploy:
        if self.change == "new_cell" and self.cell is None:
            raise ValueError("a new_cell deploy names its `cell` (e.g. us-east-1/2)")
        if self.change != "new_cell" and self.cell is not None:
            raise ValueError(f"`cell` is for a new_cell deploy; a {self.change} change goes to every cell")
        if self.change in ("config", "new_cell") and not self.revision.good:
            raise ValueError(f"a {self.change} change has no tasks of a new revision to be bad")
        if self.change == "ami" and self.revision.crashes:
            raise ValueError("an AMI whose hosts crash their tasks is not modelled; give it errors or slower")
        return self


class Scenario(_Strict):
    config: str
    start: datetime
    minutes: Annotated[int, Field(ge=1, le=7 * 24 * 60)]
    traffic: Annotated[dict[str, Annotated[list[TrafficPoint], Field(min_length=1)]], Field(min_length=1)]
    requests: Requests = Requests()
    dns: Dns = Dns()
    faults: list[Fault] = []
    slo: Slo = Slo()
    judge: Judge = Judge()
    metrics: Metrics = Metrics()
    counterfactual: Counterfactual | None = None
    # Changes rolled out during the day by the real deploy code (docs/gameday.md, "Deploy days").
    deploys: list[Deploy] = []
    # The day starts from an empty account: `make compile` then `make deploy` at minute 0, no serving before.
    day_zero: bool = False

    @field_validator("deploys")
    @classmethod
    def _one_at_a_time(cls, value: list[Deploy]) -> list[Deploy]:
        minutes = [deploy.at for deploy in value]
        if minutes != sorted(set(minutes)):
            raise ValueError(f"one deploy at a time, in order of their minutes, got {minutes}")
        return value

    @field_validator("start")
    @classmethod
    def _with_offset(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("needs an offset or Z, e.g. 2027-07-08T00:00:00-07:00")
        return value

    @field_validator("traffic")
    @classmethod
    def _increasing_minutes(cls, value: dict[str, list[TrafficPoint]]) -> dict[str, list[TrafficPoint]]:
        for region, points in value.items():
            minutes = [minute for minute, _ in points]
            if minutes != sorted(set(minutes)):
                raise ValueError(f"{region}: the points' minutes must increase, got {minutes}")
        return value

    def offered(self, region: str, minute: float) -> float:
        """Requests per second, linear between the points and flat beyond the first and last."""
        points = self.traffic.get(region, [])
        if not points:
            return 0.0
        if minute <= points[0][0]:
            return points[0][1]
        for (m0, r0), (m1, r1) in itertools.pairwise(points):
            if minute <= m1:
                return r0 + (r1 - r0) * (minute - m0) / (m1 - m0)
        return points[-1][1]


def _config_path(document: Document, scenario: Scenario) -> Path:
    path = Path(scenario.config)
    if path.is_absolute() or path.exists():
        return path
    return document.path.parent / path


def load_scenario(path: str | Path) -> tuple[Scenario, Document, Path]:
    """The scenario, its parsed document (for locating later problems) and the config file it names.
    Raises ConfigError with 'file:line: key.path: problem' lines."""
    document = read_document(Path(path))
    try:
        scenario = Scenario.model_validate(document.data)
    except ValidationError as error:
        raise ConfigError(
            "\n".join(validation_messages(error, document.data, [document], Scenario))
        ) from None
    config = _config_path(document, scenario)
    if not config.is_file():
        line = document.lines.get(("config",))
        raise ConfigError(f"{document.path}:{line}: config: file {scenario.config!r} not found")
    return scenario, document, config
