"""The closed loop, one simulated minute at a time: demand -> DNS -> serving -> metrics -> alarms ->
health checks -> the real orchestrator -> Route 53 weights, and the fleets' own control loops.

The unit the loop runs is a routing target: a one-cell region, or one cell (`us-east-1/2`) of a region of
several, each with its own stack's fleets, alarms, health checks, metrics namespace and weighted record.
A region's row is its cells' rows added up (docs/gameday.md; cells: docs/peak-events.md, "Cells")."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from gameday import alarms as cw
from gameday.aws import Orchestrator
from gameday.control import FleetState
from gameday.dns import Clients, answer_shares, propagated
from gameday.metrics import datapoints
from gameday.plan import planned_hosts
from gameday.scenario import (
    ApiErrors,
    CapacityShortage,
    DuplicateRuns,
    EngineDeaths,
    FrontDoorDown,
    MetricsDelay,
    RegionDown,
    Scenario,
    ServingErrors,
    Slowdown,
)
from gameday.serving import OVERLOAD_P99_MS, Curve, cached_curve
from gameday.templates import CACHE, Alarm, Deployment, RegionControl
from orchestrator.routing.config import parse_config
from planner.buckets import prefill_buckets
from planner.demand import Demand
from planner.profiles import load_profiles, profile_for
from planner.simulate import HostGroup
from settings.schema import Settings

PREROLL_MINUTES = 60  # run before minute 0 so fleets, alarms, metrics and the orchestrator settle first
OVERLOAD_TTFT_MS = OVERLOAD_P99_MS  # beyond the throughput bound queues grow until clients give up
# A dead engine answers a request with an error at once; a live one holds it for its time in the system.
# Least outstanding requests equalises requests in flight per target, so each target takes requests in
# inverse proportion to how long it holds them: a fast-failing target takes far more than its share.
FAIL_FAST_SECONDS = 0.05
PROFILE_ENDS = ("low", "nominal", "high")


@dataclass
class RegionMinute:
    offered_rps: float = 0.0
    served_rps: float = 0.0
    shed_rps: float = 0.0
    weight: int = 0
    hosts: int = 0
    tasks: int = 0
    ttft_p99_ms: float = 0.0
    error_share: float = 0.0
    # not in the JSON: what the checks and the plot need
    answer_share: float = 0.0
    healthy: bool = True
    down: bool = False
    targets: int = 0
    slow_share: float = 0.0
    stopped_share: float = 0.0
    stopped: int = 0
    serving_before: int = 0  # serving tasks before the minute's control step
    fleets: int = 0  # fleets behind the row (a region of cells: every cell's)
    waiting: dict[str, int] = field(default_factory=dict)
    capacity_rps: float = 0.0  # what the serving tasks serve within the objective at best (0 if unreachable)
    overload_shed_rps: float = 0.0  # of shed_rps, what the replicas refused at the edge for want of a slot
    good_rps: float = 0.0  # served with the first token within the objective
    # What the config's schedule on time would have serving within the objective (gameday/plan.py): the
    # verdict excuses sheds only beyond the larger of this and capacity_rps. 0 under a capacity shortage
    # and while the target is down or unreachable.
    planned_capacity_rps: float = 0.0
    # The target's serving curve (not in the JSON): the verdict reads from it what an even split of the
    # minute's demand would have had this target shed (gameday/verdict.py `even_shed_rps`).
    curve: Curve | None = None
    # Deploy days (not in the JSON): revision name -> the share of the target's serving tasks running it,
    # for each bad revision serving (the verdict judges those minutes as a fault's: gameday/verdict.py).
    bad_revisions: dict[str, float] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        return {
            "offered_rps": round(self.offered_rps, 1),
            "served_rps": round(self.served_rps, 1),
            "shed_rps": round(self.shed_rps, 1),
            "weight": self.weight,
            "hosts": self.hosts,
            "tasks": self.tasks,
            "ttft_p99_ms": round(self.ttft_p99_ms, 1),
            "error_share": round(self.error_share, 4),
        }


def failing_share(live: int, dead: int, hold_seconds: float) -> float:
    """The share of a target group's requests that go to its `dead` targets under least outstanding
    requests, while they are still registered: each target's requests in flight even out, so a target
    takes requests in proportion to 1 / how long it holds one (ELB User Guide, "Routing algorithms": the
    target with the lowest number of in-progress requests). A dead engine fails a request in
    FAIL_FAST_SECONDS, a live one holds it `hold_seconds`."""
    if dead <= 0:
        return 0.0
    pull_dead = dead / FAIL_FAST_SECONDS
    pull_live = live / max(hold_seconds, FAIL_FAST_SECONDS)
    return pull_dead / (pull_dead + pull_live)


def region_row(cells: list[RegionMinute]) -> RegionMinute:
    """A region's minute from its cells' (the one cell's own row for a one-cell region). Rates, weights,
    hosts and tasks add up; the p99 is the highest of the cells that served (an upper bound of the
    region's: the twin keeps no per-request latencies to merge); healthy while any cell's check is, down
    while every cell is."""
    if len(cells) == 1:
        return cells[0]
    offered = sum(c.offered_rps for c in cells)
    served = sum(c.served_rps for c in cells)
    shed = sum(c.shed_rps for c in cells)
    waiting: dict[str, int] = {}
    for cell in cells:
        for instance_type, count in cell.waiting.items():
            waiting[instance_type] = waiting.get(instance_type, 0) + count
    serving_before = sum(c.serving_before for c in cells)
    stopped = sum(c.stopped for c in cells)
    return RegionMinute(
        offered_rps=offered,
        served_rps=served,
        shed_rps=shed,
        weight=sum(c.weight for c in cells),
        hosts=sum(c.hosts for c in cells),
        tasks=sum(c.tasks for c in cells),
        ttft_p99_ms=max((c.ttft_p99_ms for c in cells if c.served_rps), default=0.0),
        error_share=shed / offered if offered else 0.0,
        answer_share=sum(c.answer_share for c in cells),
        healthy=any(c.healthy for c in cells),
        down=all(c.down for c in cells),
        targets=sum(c.targets for c in cells),
        slow_share=sum(c.slow_share * c.served_rps for c in cells) / served if served else 0.0,
        stopped_share=stopped / serving_before if serving_before else 0.0,
        stopped=stopped,
        serving_before=serving_before,
        fleets=sum(c.fleets for c in cells),
        waiting=waiting,
        capacity_rps=sum(c.capacity_rps for c in cells),
        overload_shed_rps=sum(c.overload_shed_rps for c in cells),
        good_rps=sum(c.good_rps for c in cells),
        planned_capacity_rps=sum(c.planned_capacity_rps for c in cells),
    )


@dataclass
class Minute:
    minute: int
    regions: dict[str, RegionMinute]
    events: list[str]
    # Routing target (a one-cell region, or a cell `us-east-1/2`) -> its own minute.
    cells: dict[str, RegionMinute] = field(default_factory=dict)
    fail_open: bool = False  # every record unhealthy: Route 53 answers with all of them
    # Routing target -> the metrics of its alarms in ALARM that feed a paging composite in ALARM (what the
    # page is about); a target absent is not paging. Not in the JSON.
    pages: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def public(self, with_cells: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "minute": self.minute,
            "regions": {r: m.public() for r, m in self.regions.items()},
            "events": self.events,
        }
        if with_cells:
            data["cells"] = {name: m.public() for name, m in self.cells.items()}
        return data


class DayOver(Exception):
    """The day ended while a deploy was still waiting on it."""


class CellTwin:
    """One routing target's stack: a one-cell region, or a cell of a region of several."""

    def __init__(
        self, control: RegionControl, curve: Curve, slots: dict[str, int], fleets: dict[str, FleetState]
    ):
        self.control = control
        self.name = control.name  # its routing name and record set id
        self.region = control.region
        self.namespace = control.metrics_namespace  # where its hosts publish (the template's containers)
        self.curve = curve
        self.slots = slots  # instance type -> serving slots per host
        self.fleets = fleets
        self.series: dict[str, dict[int, float | None]] = {}  # metric key -> minute -> value
        self.alarm_states: dict[str, str] = {key: cw.OK for key in control.alarms}
        self.composite_states: dict[str, str] = {c.logical_id: cw.OK for c in control.composites}
        self.checks_last: dict[str, bool] = {}
        self.published = 0  # minutes already put into CloudWatch
        self.down = False  # a region_down fault this minute: no target answers
        self.unreachable = False  # a front_door_down fault this minute: clients cannot reach the ALB
        self.healthy_targets = sum(f.in_service for f in fleets.values())  # behind the ALB, last minute
        self.utilisation = 0.0  # the live targets' load over their capacity, last minute served

    def record(self, key: str, minute: int, value: float | None) -> None:
        self.series.setdefault(key, {})[minute] = value

    def visible(self, key: str, upto: int, count: int = 30) -> list[float | None]:
        """The last `count` minutes up to `upto`, oldest first (None where nothing was recorded)."""
        values = self.series.get(key, {})
        return [values.get(minute) for minute in range(upto - count + 1, upto + 1)]

    def reads_own_metrics(self, namespace: str) -> bool:
        """An alarm or scaling policy on the containers' metrics sees data only in the namespace this
        stack's hosts publish to (a cell's `<namespace>/cell<k>`); AWS namespaces are the stack's own
        resources' (its ALB, its cluster), found by dimension."""
        return namespace.startswith(("AWS/", "ECS/")) or not namespace or namespace == self.namespace

    def tracked(self, fleet: FleetState, newest: int) -> float | None:
        """The newest datapoint of the metric the fleet's target tracking policy names, as the template
        names it (gameday/templates.py refuses a metric the twin does not produce)."""
        tracking = fleet.control.tracking
        if tracking is None or not self.reads_own_metrics(tracking.namespace):
            return None
        # RequestsInFlight is a per-host gauge and the policy's dimensions name the fleet's instance type:
        # its Average (or Maximum: least outstanding requests keeps hosts level) is the per-host value.
        return self.visible(f"inflight:{fleet.control.instance_type}", newest, 1)[0]

    def alarm_key(self, alarm: Alarm) -> str | None:
        """Which of the twin's series an alarm watches; None for metrics the twin does not produce."""
        if not self.reads_own_metrics(alarm.namespace):
            return None
        if alarm.statistic == "math":
            if "TaskDefinitionRevision" in alarm.dimensions:
                # A deployment alarm's share of the new revision's own requests (cdk_constructs/fleet/
                # service.py: Sum over SampleCount of a 0/1 metric, judged on minutes with enough requests).
                if "ServingError" in alarm.metrics:
                    return "revision_serving_error_share"
                if "SlowFirstToken" in alarm.metrics:
                    return "revision_slow_share"
            if {"DesiredTaskCount", "RunningTaskCount"} <= set(alarm.metrics):
                service = alarm.dimensions.get("ServiceName", "")
                for fleet in self.fleets.values():
                    if fleet.control.service_id in service:
                        return f"short:{fleet.control.instance_type}"
            if "HTTPCode_ELB_5XX_Count" in alarm.metrics:
                return "elb5xx_percent"
            if "HTTPCode_Target_5XX_Count" in alarm.metrics:
                return "target5xx_share"
            return None
        metric = alarm.metrics[0]
        if "TaskDefinitionRevision" in alarm.dimensions and metric == "ServingError":
            # Scoped to the revision a deployment rolls out: its own tasks' share (deploy days only).
            return "revision_serving_error_share"
        if "TaskDefinitionRevision" in alarm.dimensions and metric == "SlowFirstToken":
            return "revision_slow_share"
        keys = {
            ("SlowFirstToken", "Average"): "slow_share",
            ("RequestFailed", "Average"): "error_share",
            # Failed on the server's side and shed for want of a slot, apart (container metrics.py).
            ("ServingError", "Average"): "serving_error_share",
            ("Shed", "Average"): "shed_share",
            ("HealthyHostCount", "Minimum"): "healthy_hosts",
            ("TimeToFirstToken", "p99"): "ttft_p99_ms",
        }
        return keys.get((metric, alarm.statistic))


def slowed(curve: Curve, utilisation: float, speed: float, p99: float, slow: float) -> tuple[float, float]:
    """(p99 TTFT ms, slow share) on engines at `speed` of their nominal speed: every time stretches by
    1/speed; the slow share is the curve's own at that speed where it has it (every time stretched by
    1/speed), else read at the stretched p99's place on the curve (the share of first tokens past the
    threshold at that latency)."""
    at_speed = curve.slow_at_speed(utilisation, speed)
    p99 = min(p99 / speed, OVERLOAD_TTFT_MS)
    return p99, max(slow, curve.slow_at_p99(p99) if at_speed is None else at_speed)


def profile_speed(profile: Any, end: str) -> float:
    """The throughput factor at one end of a profile's stated range (planner/profiles.py: prefill tokens/s
    multiplied and decode steps divided by it), 1 at `nominal`."""
    if end == "nominal":
        return 1.0
    return float(getattr(profile.throughput_range, end))


def deployed_queue_bound(settings: Settings) -> int:
    """The requests a replica lets wait beyond its batch slots before it sheds at once, as deployed: the
    config's serving.max_queued_per_replica, or unset, the container's own default of one more batch
    (container/serving/streaming_model.py, DEFAULT_QUEUE_MULTIPLE x max_num_seqs)."""
    bound = settings.serving.max_queued_per_replica
    return settings.model.max_num_seqs if bound is None else bound


def _region_curve(
    settings: Settings, region: str, scenario: Scenario, profile_end: str = "nominal"
) -> tuple[Curve, dict[str, int]]:
    """The region's serving curve as deployed: the engines at the batch limit, KV-cache cap and prefill
    buckets (container/model_repository/assistant/1/model.json) the container runs with, at one end of
    each profile's throughput range."""
    profiles = load_profiles()
    buckets = prefill_buckets()
    model = settings.model
    requests = scenario.requests
    from planner.simulate import LogNormal

    demand = Demand(
        prompt=LogNormal.fit(requests.prompt_tokens.mean, requests.prompt_tokens.p99),
        output=LogNormal.fit(requests.output_tokens.mean, requests.output_tokens.p99),
        prompt_mean=requests.prompt_tokens.mean,
        output_mean=requests.output_tokens.mean,
        max_prompt=model.max_model_len - 1,
        max_output=model.max_output_tokens,
    )
    fleets = settings.regions[region].fleets
    templates = []
    for f in fleets:
        profile = profile_for(profiles, f.instance_type, f.tensor_parallel)
        speed = profile_speed(profile, profile_end)
        engine = profile.engine(model.max_num_seqs, model.max_model_len, buckets, speed)
        templates.append(HostGroup(f.instance_type, engine, f.engine_replicas, 0))
    threshold = settings.observability.ttft_p99_threshold_ms
    curve = cached_curve(
        templates,
        [float(f.max) for f in fleets],
        demand,
        threshold,
        CACHE,
        deployed_queue_bound(settings),
        settings.queue_wait_budget_ms / 1000.0,  # as the stacks set QUEUE_WAIT_BUDGET_MS
    )
    slots = {f.instance_type: f.engine_replicas * model.max_num_seqs for f in fleets}
    return curve, slots


class Twin:
    """`orchestrator_on=False` runs the same day with the traffic orchestrator stopped (the counterfactual):
    the records keep the weights they had, Route 53's health checks and alias target health still act."""

    def __init__(
        self,
        scenario: Scenario,
        settings: Settings,
        deployment: Deployment,
        orchestrator_on: bool = True,
        profile_end: str = "nominal",
    ) -> None:
        self.scenario = scenario
        self.orchestrator_on = orchestrator_on
        self.profile_end = profile_end
        config = parse_config(deployment.orchestrator_config)
        self.gauge_samples = max(1, round(60 / config.gauge_interval_seconds))
        self.settings = settings
        self.deployment = deployment
        self.start = scenario.start
        self.cells: dict[str, CellTwin] = {}
        targets = {t.name: t for t in self._orchestrator_regions()}
        curves: dict[str, tuple[Curve, dict[str, int]]] = {}
        absent = {d.cell for d in scenario.deploys if d.change == "new_cell"}
        for name, control in deployment.cells.items():
            region = control.region
            if region not in curves:  # every cell runs every fleet of its region: the same mix
                curves[region] = _region_curve(settings, region, scenario, profile_end)
            curve, slots = curves[region]
            # A cell starts with its record's share of the region's traffic (equal shares if all are 0).
            siblings = [t.initial_weight for t in targets.values() if t.group == region]
            part = targets[name].initial_weight / sum(siblings) if sum(siblings) else 1 / len(siblings)
            fleets = {}
            offered = scenario.offered(region, 0) * part
            capacity_per_host = sum(curve.per_host_rps.values()) / len(curve.per_host_rps)
            wanted = math.ceil(offered / (capacity_per_host * 0.75)) if offered else 0
            share = {f.instance_type: f.max for f in settings.regions[region].fleets}
            total = sum(share.values())
            for fleet in control.fleets:
                if name in absent:  # created by the day's deploy: no host, no task, bounds at zero
                    fleets[fleet.instance_type] = FleetState(fleet, 0, 0, 0)
                    continue
                fleets[fleet.instance_type] = FleetState.steady(
                    fleet, self.start, math.ceil(wanted * share[fleet.instance_type] / total)
                )
            self.cells[name] = CellTwin(control, curve, slots, fleets)
            if not control.metrics_namespace:  # a template without the variable: where routing reads
                self.cells[name].namespace = parse_config(deployment.orchestrator_config).namespace_of(
                    targets[name]
                )
        self.regions: dict[str, list[str]] = {}  # region -> its cells' routing names
        for name, twin in self.cells.items():
            self.regions.setdefault(twin.region, []).append(name)
        self.orchestrator: Orchestrator | None = None
        weights = {r.name: r.initial_weight for r in self._orchestrator_regions()}
        for name in absent & set(weights):  # no stack yet, so no record: Route 53 answers without it
            weights[name] = 0
        self.weights = weights
        self.answers = answer_shares(weights, {})  # what Route 53's servers answer at the minute's end
        # Alias records' EvaluateTargetHealth, as orchestrator/routing/records.py writes them.
        self.evaluate_target_health = dict.fromkeys(weights, True)
        self.clients = Clients(self.answers, scenario.dns.ttl_seconds, scenario.dns.stale_share)
        self.minutes: list[Minute] = []
        for twin in self.cells.values():
            twin.published = -PREROLL_MINUTES
        # Revision name -> what its tasks do (the scenario's deploys'); empty on a day without deploys.
        self.revisions: dict[str, Any] = {d.revision.name: d.revision for d in scenario.deploys}
        self._next = -PREROLL_MINUTES  # the next minute to step
        self._on_minute: Callable[[Minute], None] | None = None
        # Called before the minute's step with the minute, while the orchestrator runs: the deploy driver
        # (gameday/deploy_day.py) runs the day's deploys from it, stepping the twin through `advance`.
        self.before_minute: Callable[[int], None] | None = None
        # Called after each minute's step (the deploy driver mirrors the twin's state into moto).
        self.after_minute: Callable[[Minute], None] | None = None

    def _orchestrator_regions(self):
        return parse_config(self.deployment.orchestrator_config).regions

    # ---- one minute ------------------------------------------------------------------------------

    def _faults(self, kind: type, minute: int) -> list[Any]:
        return [f for f in self.scenario.faults if isinstance(f, kind) and f.active(minute)]

    def _delay(self, minute: int) -> int:
        """Minutes after its end a minute's datapoint becomes readable: the scenario's, plus faults'."""
        late = sum(f.minutes for f in self._faults(MetricsDelay, minute))
        return self.scenario.metrics.delay_minutes + late

    def _speed(self, twin: CellTwin, minute: int) -> float:
        speed = 1.0
        for fault in self.scenario.faults:
            if isinstance(fault, Slowdown) and self._hits(fault, twin):
                speed *= fault.speed(minute)
        if self.revisions:
            # A slower revision's share of the serving tasks serves at its speed: the target's capacity is
            # the tasks' average (the Slowdown machinery, per cohort of tasks).
            for share, revision in self._revision_shares(twin):
                speed *= 1 - share + share * revision.speed
        return speed

    def _newest_revision_errors(self, twin: CellTwin) -> float | None:
        """The share of its requests the revision being rolled out fails, while any of its tasks serve (no
        data otherwise: a metric scoped to a revision with no task reports nothing)."""
        shares = [
            self.revisions[f.rollout.revision].errors or 0.0 if f.rollout.revision in self.revisions else 0.0
            for f in twin.fleets.values()
            if f.rollout is not None and not f.rollout.rolling_back and f.rollout.new_serving
        ]
        return max(shares) if shares else None

    def _newest_revision_slow(self, twin: CellTwin, speed: float) -> float | None:
        """The share of late first tokens on the tasks of the revision being rolled out, while any serve:
        least outstanding requests gives its tasks as many requests in flight as the others', so they run
        at the target's utilisation, at their own speed (the curve's slow share there)."""
        shares = []
        for fleet in twin.fleets.values():
            rollout = fleet.rollout
            if rollout is None or rollout.rolling_back or not rollout.new_serving:
                continue
            revision = self.revisions.get(rollout.revision)
            at = speed * (revision.speed if revision is not None else 1.0)
            p99, slow, _ = twin.curve.at(twin.utilisation)
            if at < 1.0:
                p99, slow = slowed(twin.curve, twin.utilisation, at, p99, slow)
            shares.append(slow)
        return max(shares) if shares else None

    def _revision_shares(self, twin: CellTwin) -> list[tuple[float, Any]]:
        """(share of the target's serving tasks, the revision they run) for each bad revision serving."""
        total = sum(f.in_service for f in twin.fleets.values())
        counts: dict[str, int] = {}
        for fleet in twin.fleets.values():
            counts[fleet.revision] = counts.get(fleet.revision, 0) + fleet.serving
            if fleet.ami in self.revisions:  # the tasks on hosts booted from a new AMI
                counts[fleet.ami] = counts.get(fleet.ami, 0) + min(fleet.ami_hosts, fleet.serving)
            if fleet.rollout is not None:
                rollout = fleet.rollout
                counts[rollout.revision] = counts.get(rollout.revision, 0) + rollout.new_serving
        return [
            (count / total, self.revisions[name])
            for name, count in counts.items()
            if total and count and name in self.revisions and not self.revisions[name].good
        ]

    def _failing(self, twin: CellTwin, minute: int) -> tuple[float, float]:
        """The share of the target's requests that fail on the server's side this minute, and the share
        the containers' own metrics count (faults with `counted: false` fail requests they never see)."""
        striking = [
            f
            for f in self.scenario.faults
            if isinstance(f, ServingErrors) and self._hits(f, twin) and f.striking(minute)
        ]
        share = max((f.share for f in striking), default=0.0)
        counted = max((f.share for f in striking if f.counted), default=0.0)
        if self.revisions:
            # A failing revision's tasks fail its share of what they serve (a ServingErrors per cohort).
            for part, revision in self._revision_shares(twin):
                if revision.errors:
                    share = 1 - (1 - share) * (1 - part * revision.errors)
                    counted = 1 - (1 - counted) * (1 - part * revision.errors)
        return share, counted

    def _hits(self, fault: Any, twin: CellTwin) -> bool:
        """A fault naming a region hits each of its cells; one naming a cell (`us-east-1/2`) that cell."""
        return fault.region in (twin.name, twin.region)

    def _publish(self, twin: CellTwin, upto: int) -> None:
        """Put every minute up to `upto` that was not put yet, with its simulated timestamp, into the
        target's own namespace (a cell's `<namespace>/cell<k>`)."""
        model = self.orchestrator.config.model_name
        data: list[dict[str, Any]] = []
        for minute in range(twin.published, upto + 1):
            raw = {key: values.get(minute) for key, values in twin.series.items()}
            data.extend(datapoints(raw, self.start + timedelta(minutes=minute), model, self.gauge_samples))
        twin.published = max(twin.published, upto + 1)
        for offset in range(0, len(data), 1000):
            self.orchestrator.publish(twin.name, twin.namespace, data[offset : offset + 1000])

    def _serve(
        self,
        twin: CellTwin,
        minute: int,
        arriving: float,
        row: RegionMinute,
        down: bool = False,
        unreachable: bool = False,
        speed: float = 1.0,
        failing: float = 0.0,
        counted: float | None = None,
    ) -> None:
        """One target's minute of serving. `down`: no target answers (the ALB sees every request fail);
        `unreachable`: clients cannot reach the front door, whose targets are healthy and idle (neither the
        ALB nor the containers see the requests); `speed`: the engines' share of their normal speed;
        `failing`: the share of the requests the replicas admit that fail on the server's side (answered
        with an error at once, target 5xx); `counted`: of those, the share the containers' request metrics
        count (all of `failing` unless given)."""
        serving = {t: f.in_service for t, f in twin.fleets.items()}
        # Dead engines' targets take requests for part of the minute (until the health check sees them).
        in_rotation = [f.dead_in_rotation(minute) for f in twin.fleets.values()]
        dead = sum(count for count, _ in in_rotation)
        dead_share_of_minute = max((share for _, share in in_rotation), default=0.0)
        live = sum(serving.values())
        targets = live + dead
        capacity = speed * sum(count * twin.curve.per_host_rps[t] for t, count in serving.items())
        row.offered_rps = arriving
        row.targets = 0 if down else targets
        if down or unreachable or targets == 0:
            row.shed_rps = arriving
            row.error_share = 1.0 if arriving else 0.0
            for key in (
                "slow_share",
                "ttft_p99_ms",
                "served_requests",
                "requests",
                "error_share",
                "serving_error_share",
                "shed_share",
            ):
                twin.record(key, minute, None)
            twin.record("target5xx_share", minute, None)  # no target answered
            if unreachable and not down and targets:
                # Healthy and idle behind a load balancer nobody reaches: the gauges and the ALB's
                # healthy-host count look fine, the request metrics are simply absent.
                twin.record("healthy_hosts", minute, float(targets))
                twin.record("elb5xx_percent", minute, None)
                twin.record("reporting_hosts", minute, float(live))
                twin.record("in_flight", minute, 0.0)
                twin.record(
                    "slots", minute, float(sum(count * twin.slots[t] for t, count in serving.items()))
                )
                for t, count in serving.items():
                    twin.record(f"inflight:{t}", minute, 0.0 if count else None)
                return
            for key in ("in_flight", "slots", "reporting_hosts"):
                twin.record(key, minute, None)
            twin.record("healthy_hosts", minute, 0.0)
            twin.record("elb5xx_percent", minute, 100.0 if arriving else 0.0)
            for t in twin.fleets:
                twin.record(f"inflight:{t}", minute, None)
            return
        # What the serving tasks can serve within the objective (the curve's best: gameday/serving.py).
        row.capacity_rps = capacity * twin.curve.servable
        row.curve = twin.curve
        # Least outstanding requests: each target takes requests in inverse proportion to how long it holds
        # them, so a dead engine that fails at once draws far more than its share until its target leaves,
        # which is part of the minute (gameday/dead_targets.py).
        even = arriving * live / targets / capacity if capacity else math.inf
        hold = twin.curve.at(even)[2] / speed if live else 1.0
        to_dead = arriving * failing_share(live, dead, hold) * (dead_share_of_minute if live else 1.0)
        to_live = arriving - to_dead
        utilisation = to_live / capacity if capacity else math.inf
        twin.utilisation = utilisation
        if twin.curve.admitted_share:
            # The replicas' admission bound sheds at the edge what finds every slot and the short queue
            # full (UNAVAILABLE at once); what they admit is served at the curve's latency.
            p99, slow, in_system = twin.curve.at(utilisation)
            served = to_live * twin.curve.admitted(utilisation)
        elif utilisation <= twin.curve.utilisation[-1]:
            p99, slow, in_system = twin.curve.at(utilisation)
            served = to_live
        else:  # no admission bound: the queue grows until clients give up
            p99, slow, in_system = OVERLOAD_TTFT_MS, 1.0, twin.curve.at(1.0)[2]
            served = capacity * twin.curve.utilisation[-1]
        if speed < 1.0 and served:
            in_system /= speed
            p99, slow = slowed(twin.curve, utilisation, speed, p99, slow)
        edge_shed = to_live - served  # refused at the edge for want of a slot
        broken = served * failing  # fail fast: their slots are free for the rest
        # What the containers never count: failed before the request's metrics are written.
        unseen = served * max(failing - (failing if counted is None else counted), 0.0)
        served -= broken
        to_dead += broken
        failed = to_dead + edge_shed
        row.served_rps = served
        row.good_rps = served * (1.0 - slow)
        row.shed_rps = failed
        row.overload_shed_rps = edge_shed
        row.ttft_p99_ms = p99 if served else 0.0
        row.slow_share = slow
        row.error_share = failed / arriving if arriving else 0.0
        in_flight = 0.0
        for t, count in serving.items():
            per_host = served * twin.curve.per_host_rps[t] * speed / capacity * in_system if capacity else 0.0
            in_flight += per_host * count
            twin.record(f"inflight:{t}", minute, per_host if count else None)
        twin.record("slow_share", minute, slow if served else None)
        twin.record("error_share", minute, (failed - unseen) / arriving if arriving else None)
        # Sheds and server failures apart: dead engines fail requests, overload sheds them at once.
        twin.record("serving_error_share", minute, (to_dead - unseen) / arriving if arriving else None)
        twin.record("shed_share", minute, edge_shed / arriving if arriving else None)
        twin.record("ttft_p99_ms", minute, p99 if served else None)
        twin.record("healthy_hosts", minute, float(targets))
        twin.record("elb5xx_percent", minute, 100.0 * edge_shed / arriving if arriving else 0.0)
        # A dead engine's task answers its requests with a 5xx until its target leaves the group.
        twin.record("target5xx_share", minute, to_dead / arriving if arriving else 0.0)
        twin.record("requests", minute, arriving * 60)
        twin.record("served_requests", minute, served * 60)
        twin.record("reporting_hosts", minute, float(targets))
        twin.record("in_flight", minute, in_flight)
        twin.record("slots", minute, float(sum(count * twin.slots[t] for t, count in serving.items())))

    def _evaluate(self, name: str, twin: CellTwin, newest: int, events: list[str]) -> bool:
        """The target's alarms, composites and Route 53 health checks on what CloudWatch has up to
        `newest`; whether its record's health check is healthy."""
        for key, alarm in twin.control.alarms.items():
            if newest - alarm.evaluation_periods + 1 < -PREROLL_MINUTES:
                # The day starts in steady state: an alarm holds OK until its whole window lies in the
                # twin's history (before it, nothing was published: not the same as data missing).
                continue
            series_key = twin.alarm_key(alarm)
            values = twin.visible(series_key, newest, alarm.evaluation_periods) if series_key else []
            state = cw.evaluate(alarm, values, twin.alarm_states[key])
            if state != twin.alarm_states[key] and state == cw.ALARM:
                events.append(f"{name}: alarm {alarm.name} ALARM")
            twin.alarm_states[key] = state
        composites = cw.composite_states(twin.control.composites, twin.alarm_states)
        for composite in twin.control.composites:
            state = composites[composite.logical_id]
            if state != twin.composite_states[composite.logical_id]:
                events.append(f"{name}: composite {composite.name} {state}")
                if self.orchestrator is not None:
                    self.orchestrator.set_alarm(name, composite.name, state == cw.ALARM)
            twin.composite_states[composite.logical_id] = state
        paging = [c for c in twin.control.composites if c.pages and composites[c.logical_id] == cw.ALARM]
        if paging:
            self.pages[name] = tuple(
                sorted(
                    {
                        metric
                        for key, alarm in twin.control.alarms.items()
                        if twin.alarm_states[key] == cw.ALARM and any(key in c.rule for c in paging)
                        for metric in alarm.metrics
                    }
                )
            )
        # Route 53's own checkers probe an HTTPS endpoint from outside the region: they see what clients
        # see, so a front door nobody reaches fails them as a region down does.
        reachable = not (twin.down or twin.unreachable)
        status = cw.health(
            twin.control.health_checks, {**twin.alarm_states, **composites}, twin.checks_last, reachable
        )
        return status.get(twin.control.record_check or "", True)

    def step(self, minute: int) -> Minute:
        now = self.start + timedelta(minutes=minute)
        before = now - timedelta(minutes=1)
        events: list[str] = []
        for fault in self.scenario.faults:
            where = f" in {fault.region}" if hasattr(fault, "region") else ""
            if fault.at == minute:
                events.append(f"fault starts: {fault.kind}{where}")
            if fault.until == minute:
                events.append(f"fault ends: {fault.kind}{where}")
        delay = self._delay(minute)
        newest = minute - 1 - delay  # the newest minute CloudWatch has
        checks: dict[str, bool] = {}
        self.pages: dict[str, tuple[str, ...]] = {}
        for name, twin in self.cells.items():
            twin.down = any(self._hits(f, twin) for f in self._faults(RegionDown, minute))
            twin.unreachable = any(self._hits(f, twin) for f in self._faults(FrontDoorDown, minute))
            if self.orchestrator is not None:
                self._publish(twin, newest)
            healthy = self._evaluate(name, twin, newest, events)
            # An alias record with EvaluateTargetHealth is unhealthy while its ALB has no healthy target
            # (Route 53 Developer Guide, "EvaluateTargetHealth"): as of the last minute's target health.
            if self.evaluate_target_health.get(name, True) and twin.healthy_targets == 0:
                healthy = False
            if self.minutes and self.minutes[-1].cells[name].healthy != healthy:
                events.append(f"{name}: Route 53 health check {'healthy' if healthy else 'UNHEALTHY'}")
            checks[name] = healthy

        if self.orchestrator is not None:
            self.orchestrator.prune(now)
            # The schedule: one run a minute, two with duplicate deliveries; API faults while they last.
            self.orchestrator.failing = {f.service for f in self._faults(ApiErrors, minute)}
            runs = 2 if self._faults(DuplicateRuns, minute) else 1
            for _ in range(runs):
                answer = self.orchestrator.run(now)
                if "error" in answer:
                    events.append(f"orchestrator failed: {answer['error'][:160]}")
                elif answer.get("weights") is not None:
                    events.append(f"orchestrator: {answer.get('reason', '')[:160]}")
            self.orchestrator.failing = set()
            records = self.orchestrator.records()
            self.weights.update({name: weight for name, (weight, _) in records.items()})
            self.evaluate_target_health.update({name: flag for name, (_, flag) in records.items()})

        fail_open = not any(checks.values())
        answers = answer_shares(self.weights, checks)
        served_answers = propagated(self.answers, answers)
        self.answers = answers
        shares = self.clients.follow(served_answers)
        total = sum(self.scenario.offered(r, minute) for r in self.scenario.traffic)
        rows: dict[str, RegionMinute] = {}
        for name, twin in self.cells.items():
            row = RegionMinute(
                weight=self.weights.get(name, 0),
                answer_share=served_answers.get(name, 0.0),
                healthy=checks[name],
                down=twin.down,
            )
            shortage = {
                f.instance_type for f in self._faults(CapacityShortage, minute) if self._hits(f, twin)
            }
            for fault in self.scenario.faults:
                if isinstance(fault, EngineDeaths) and self._hits(fault, twin) and fault.at == minute:
                    for fleet in twin.fleets.values():
                        fleet.kill(round(fleet.serving * fault.share), minute)
            serving_before = sum(f.serving for f in twin.fleets.values())
            stopped = 0
            for instance_type, fleet in twin.fleets.items():
                events_for: list[str] = []
                fleet.schedule(minute, before, now, events_for)
                tracked = twin.tracked(fleet, newest)
                fleet.track(minute, tracked, events_for)
                alarms = None
                if fleet.rollout is not None:
                    alarms = {key: state == cw.ALARM for key, state in twin.alarm_states.items()}
                stopped += fleet.step(minute, instance_type in shortage, events_for, alarms)
                events.extend(f"{name}: {event}" for event in events_for)
                row.waiting[instance_type] = max(fleet.desired - fleet.all_tasks, 0)
            row.stopped = stopped
            row.serving_before = serving_before
            row.fleets = len(twin.fleets)
            row.stopped_share = stopped / serving_before if serving_before else 0.0
            row.hosts = sum(f.all_hosts for f in twin.fleets.values())
            row.tasks = sum(f.in_service for f in twin.fleets.values())
            speed = self._speed(twin, minute)
            failing, counted = self._failing(twin, minute)
            if self.revisions:
                for share, revision in self._revision_shares(twin):
                    row.bad_revisions[revision.name] = share
                twin.record("revision_serving_error_share", minute, self._newest_revision_errors(twin))
            self._serve(
                twin,
                minute,
                total * shares.get(name, 0.0),
                row,
                down=twin.down,
                unreachable=twin.unreachable,
                speed=speed,
                failing=failing,
                counted=counted,
            )
            if self.revisions and not (twin.down or twin.unreachable):
                twin.record("revision_slow_share", minute, self._newest_revision_slow(twin, speed))
            # The plan is not on offer where AWS had no hosts to give (a capacity shortage) or where no
            # client reaches the target (down, its front door down): none of its room can take demand.
            if not (shortage or twin.down or twin.unreachable):
                planned = planned_hosts(self.settings, name, now)
                row.planned_capacity_rps = (
                    speed
                    * sum(count * twin.curve.per_host_rps[t] for t, count in planned.items())
                    * twin.curve.servable
                )
            twin.healthy_targets = 0 if twin.down else row.tasks
            for fleet in twin.fleets.values():
                twin.record(
                    f"short:{fleet.control.instance_type}", minute, float(fleet.desired - fleet.tasks)
                )
            rows[name] = row
        regions = {region: region_row([rows[n] for n in names]) for region, names in self.regions.items()}
        result = Minute(minute, regions, events, rows, fail_open, self.pages)
        self.minutes.append(result)
        return result

    @property
    def now_minute(self) -> int:
        """The last minute stepped."""
        return self._next - 1

    def advance(self) -> Minute:
        """Step the next minute (a deploy waiting moves the day on by this). Raises DayOver past the last."""
        if self._next >= self.scenario.minutes:
            raise DayOver(self._next)
        minute = self._next
        self._next += 1
        result = self.step(minute)
        if self.after_minute is not None:
            self.after_minute(result)
        if self._on_minute and minute >= 0:
            self._on_minute(result)
        return result

    def _run_minutes(self) -> None:
        while self._next < self.scenario.minutes:
            if self.before_minute is not None:
                self.before_minute(self._next)
                if self._next >= self.scenario.minutes:
                    break
            self.advance()

    def run(self, on_minute: Callable[[Minute], None] | None = None) -> list[Minute]:
        self._on_minute = on_minute
        if not self.orchestrator_on:
            self._run_minutes()
            self.minutes = [m for m in self.minutes if m.minute >= 0]
            return self.minutes
        composites = {name: [c.name for c in twin.control.composites] for name, twin in self.cells.items()}
        with Orchestrator(
            self.deployment.orchestrator_config, self.deployment.home_region, composites
        ) as orch:
            self.orchestrator = orch
            try:
                self._run_minutes()
            finally:
                self.orchestrator = None
        self.minutes = [m for m in self.minutes if m.minute >= 0]
        return self.minutes


def source_of(deployment: Deployment) -> Path:
    return deployment.source
