"""The Lambda edge: read every region, decide, apply in one Route 53 change batch, remember, log.

`run()` does the work with injected clients (tests hand it moto's); `handler()` is what the schedule
invokes, with Powertools for the structured decision line and the weight metrics.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from botocore.exceptions import BotoCoreError, ClientError

from . import records
from .config import ENVIRONMENT_VARIABLE, OrchestratorConfig, parse_config
from .override import Override, OverrideError, parse_override
from .policy import Decision, RegionSignals, decide
from .signals import Endpoint, read_endpoint, read_signals
from .state import RunState, parse_state

ClientFactory = Callable[[str, str], Any]  # (service, region) -> boto3 client

logger = Logger(service="traffic-orchestrator")


@dataclass(frozen=True)
class RunResult:
    decision: Decision | None  # None when the run was a repeated delivery
    applied: int  # records created or changed
    override: Override | None
    notes: tuple[str, ...]  # what was ignored and why (expired pin, unreadable override)


def _parameter(ssm: Any, name: str) -> str | None:
    try:
        return ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        return None


def read_override(ssm: Any, config: OrchestratorConfig, now: datetime) -> tuple[Override | None, list[str]]:
    try:
        override = parse_override(_parameter(ssm, config.override_parameter), config.region_names)
    except OverrideError as error:
        return None, [f"override ignored: {error}"]
    if override is None:
        return None, []
    if not override.active(now):
        return None, [f"override expired at {override.expires_at.isoformat()}: ignored"]
    return override, []


def run(
    config: OrchestratorConfig, client: ClientFactory, home_region: str, now: datetime, event_time: str | None
) -> RunResult:
    home_ssm = client("ssm", home_region)
    state = parse_state(_parameter(home_ssm, config.state_parameter))
    if event_time is not None and event_time == state.last_event_time:
        return RunResult(None, 0, None, (f"event {event_time} already handled",))

    route53 = client("route53", home_region)
    existing = records.read_records(route53, config.hosted_zone_id, config.domain_name)
    endpoints: dict[str, Endpoint | None] = {}
    signals: dict[str, RegionSignals | None] = {}
    notes: list[str] = []
    for region in config.regions:
        try:
            endpoints[region.name] = read_endpoint(client("ssm", region.name), region)
            signals[region.name] = read_signals(client("cloudwatch", region.name), config, region, now)
        except (BotoCoreError, ClientError) as error:
            # A region whose APIs fail right now is a region with missing metrics: it holds, the rest move.
            endpoints[region.name], signals[region.name] = None, None
            notes.append(f"{region.name}: not read ({error})")
    override, override_notes = read_override(home_ssm, config, now)
    notes.extend(override_notes)

    current = {
        region.name: existing[region.name].weight if region.name in existing else region.initial_weight
        for region in config.regions
    }
    decision = decide(
        config.policy,
        config.budget,
        current,
        signals,
        state.memory,
        pins=override.weights if override else None,
    )
    batch = records.changes(config.domain_name, decision.weights, endpoints, existing)
    records.apply_changes(route53, config.hosted_zone_id, batch, f"traffic orchestrator: {decision.reason}")

    summary = {
        "time": now.isoformat(timespec="seconds"),
        "old": current,
        "weights": decision.weights,
        "reason": decision.reason,
    }
    new_state = RunState(decision.memory, event_time, (*state.decisions, summary))
    home_ssm.put_parameter(
        Name=config.state_parameter, Value=new_state.to_json(), Type="String", Overwrite=True
    )
    return RunResult(decision, len(batch), override, tuple(notes))


def _log(result: RunResult) -> None:
    decision = result.decision
    if decision is None:
        logger.info("skipped", extra={"notes": list(result.notes)})
        return
    logger.info(
        "decision",
        extra={
            "reason": decision.reason,
            "old_weights": {r.region: r.old_weight for r in decision.regions},
            "new_weights": decision.weights,
            "regions": [
                {"region": r.region, "status": str(r.status), "detail": r.detail} for r in decision.regions
            ],
            "records_changed": result.applied,
            "override": result.override.to_json() if result.override else None,
            "notes": list(result.notes),
        },
    )
    # One EMF line per region (namespace from POWERTOOLS_METRICS_NAMESPACE): the fleet dashboard's weights.
    for region, weight in decision.weights.items():
        with single_metric(name="RegionWeight", unit=MetricUnit.Count, value=weight) as metric:
            metric.add_dimension(name="Region", value=region)
    with single_metric(name="RecordsChanged", unit=MetricUnit.Count, value=result.applied):
        pass


def _boto3_client(service: str, region: str) -> Any:
    import boto3  # from the Lambda runtime

    return boto3.client(service, region_name=region)


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    config = parse_config(os.environ[ENVIRONMENT_VARIABLE])
    now = datetime.now(UTC)
    result = run(config, _boto3_client, os.environ["AWS_REGION"], now, event.get("time"))
    _log(result)
    decision = result.decision
    return {"weights": decision.weights if decision else None, "reason": decision.reason if decision else ""}
