"""A rehearsal scenario replayed through the orchestrator's own signal reader and policy, minute by minute.

Each scenario minute is one orchestrator run. Its figures are turned into what CloudWatch would hold for
the minute that run reads (the statistics the serving containers' EMF lines aggregate to: 0/1 per request
averaged into shares, one gauge sample per host every `gauge_interval_seconds`), and the run reads them
with `orchestrator.routing.signals.read_signals`, the function the Lambda uses against CloudWatch. So a
missing minute, a region without hosts or a drain alarm reaches the policy exactly as in production.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from ops.routing_scenario import Minute, MinuteOfRegion, Scenario
from orchestrator.routing.cells import decide_cells
from orchestrator.routing.config import OrchestratorConfig, RegionTarget
from orchestrator.routing.history import weights_requests_followed
from orchestrator.routing.policy import PolicyParams, RegionMemory, RegionSignals
from orchestrator.routing.signals import PERIOD_SECONDS, minute_to_read, read_newest
from orchestrator.routing.state import KEEP_DECISIONS
from settings.cells import region_of

# Any fixed start: the reader only needs each run's minute.
FIRST_RUN = datetime(2027, 1, 1, tzinfo=UTC)
NAMESPACE = "Rehearsal"
MODEL = "rehearsal"
REQUESTS_PER_MINUTE = 1000  # finished streams per minute behind each share (only the share is read)
# A rehearsal states requests in flight, not a rate: each request is taken to last this long, so the rate
# the policy weighs demand by is in flight over it (Little's law), the same for every region.
SECONDS_PER_REQUEST = 6.0


def requests_per_minute(figures: MinuteOfRegion) -> float:
    """RequestFailed's SampleCount for a rehearsed minute: every request that reached the region."""
    return max(figures.requests_in_flight * PERIOD_SECONDS / SECONDS_PER_REQUEST, 1.0)


def groups_of(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Region -> its targets as a scenario names them: `us-east-1/1` and `us-east-1/2` are cells of
    us-east-1, decided as the orchestrator decides cells; a plain region name is a one-cell region."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(region_of(name), []).append(name)
    return {region: tuple(members) for region, members in groups.items()}


def drain_alarm(region: str) -> str:
    return f"{region}-drain"


def statistics(figures: MinuteOfRegion, gauge_interval_seconds: int) -> dict[tuple[str, str], float]:
    """(metric, statistic) -> value, as CloudWatch aggregates one minute of the region's hosts. A region
    without healthy hosts publishes nothing."""
    if figures.healthy_hosts == 0:
        return {}
    samples = figures.healthy_hosts * PERIOD_SECONDS / gauge_interval_seconds
    found: dict[tuple[str, str], float] = {}
    for metric, share in (
        ("SlowFirstToken", figures.slow_first_token_share),
        ("RequestFailed", figures.error_share),
    ):
        # Average = Sum / SampleCount of the 0/1 values, as CloudWatch computes it.
        found[metric, "Average"] = share * REQUESTS_PER_MINUTE / REQUESTS_PER_MINUTE
    found["RequestFailed", "SampleCount"] = requests_per_minute(figures)
    for metric, total in (
        ("RequestsInFlight", figures.requests_in_flight),
        ("ServingSlots", figures.serving_slots),
    ):
        per_host = total / figures.healthy_hosts
        found[metric, "Sum"] = per_host * samples
        found[metric, "SampleCount"] = samples
    return found


class ScenarioCloudWatch:
    """One region's CloudWatch as the scenario describes it: GetMetricData for the minutes written so far,
    DescribeAlarms for its drain alarm in the current run. Only what read_signals calls."""

    def __init__(self, region: str, gauge_interval_seconds: int) -> None:
        self.region = region
        self.gauge_interval_seconds = gauge_interval_seconds
        self.minutes: dict[datetime, dict[tuple[str, str], float]] = {}
        self.alarm = False

    def publish(self, minute: datetime, figures: MinuteOfRegion | None) -> None:
        if figures is not None:
            self.minutes[minute] = statistics(figures, self.gauge_interval_seconds)
        self.alarm = bool(figures and figures.degraded)

    def get_metric_data(
        self, *, MetricDataQueries: list[dict[str, Any]], StartTime: datetime, EndTime: datetime, **_: Any
    ) -> dict:
        minutes = sorted(m for m in self.minutes if StartTime <= m < EndTime)
        results = []
        for query in MetricDataQueries:
            stat = query["MetricStat"]
            key = (stat["Metric"]["MetricName"], stat["Stat"])
            found = [(m, self.minutes[m][key]) for m in minutes if key in self.minutes[m]]
            results.append(
                {
                    "Id": query["Id"],
                    "Timestamps": [m for m, _ in found],
                    "Values": [v for _, v in found],
                    "StatusCode": "Complete",
                }
            )
        return {"MetricDataResults": results}

    def describe_alarms(self, *, AlarmNames: list[str], **_: Any) -> dict:
        state = "ALARM" if self.alarm else "OK"
        alarms = [
            {"AlarmName": name, "StateValue": state}
            for name in AlarmNames
            if name == drain_alarm(self.region)
        ]
        return {"CompositeAlarms": alarms, "MetricAlarms": []}


def rehearsal_config(
    scenario: Scenario, params: PolicyParams, min_hosts: dict[str, int], gauge_interval_seconds: int
) -> OrchestratorConfig:
    return OrchestratorConfig(
        domain_name="rehearsal.invalid",
        hosted_zone_id="rehearsal",
        metrics_namespace=NAMESPACE,
        model_name=MODEL,
        state_parameter="",
        override_parameter="",
        policy=params,
        regions=tuple(
            RegionTarget(name, region.weight, min_hosts.get(name, 0), "", "", drain_alarm(name))
            for name, region in scenario.regions.items()
        ),
        gauge_interval_seconds=gauge_interval_seconds,
    )


def replay(scenario: Scenario, params: PolicyParams, gauge_interval_seconds: int = 10) -> list[Minute]:
    """Each minute is one orchestrator run; weights and memory carry over as Route 53 and SSM would."""
    weights = {name: region.weight for name, region in scenario.regions.items()}
    budget = sum(weights.values())
    memory: dict[str, RegionMemory] = {}
    cloudwatch = {name: ScenarioCloudWatch(name, gauge_interval_seconds) for name in scenario.regions}
    min_hosts: dict[str, int] = {}  # a region's fleets' minimum, as config gives it; the scenario's last
    last_read: dict[str, datetime | None] = dict.fromkeys(scenario.regions)  # as the state keeps it
    decisions: list[dict[str, Any]] = []  # the runs the state remembers: what each minute's requests followed
    result = []
    for index, minute in enumerate(scenario.minutes):
        run_minute = FIRST_RUN + timedelta(minutes=index)
        for name in scenario.regions:
            figures = minute.get(name)
            cloudwatch[name].publish(minute_to_read(run_minute), figures)
            if figures is not None:
                min_hosts[name] = figures.min_hosts
        config = rehearsal_config(scenario, params, min_hosts, gauge_interval_seconds)
        signals: dict[str, RegionSignals | None] = {}
        followed: dict[str, float] = {}
        for region in config.regions:
            signals[region.name], read = read_newest(
                cloudwatch[region.name], config, region, run_minute, last_read[region.name]
            )
            last_read[region.name] = read or last_read[region.name]
            followed[region.name] = weights_requests_followed(
                decisions, read, {region.name: weights[region.name]}
            )[region.name]
        decision = decide_cells(
            params, budget, weights, signals, memory, groups_of(scenario.regions), followed=followed
        )
        time = run_minute.isoformat().replace("+00:00", "Z")
        decisions = [*decisions, {"time": time, "weights": decision.weights}][-KEEP_DECISIONS:]
        bad = frozenset(name for name, s in signals.items() if s is not None and s.problems(params))
        result.append(Minute(index, decision, bad))
        weights, memory = decision.weights, decision.memory
    return result
