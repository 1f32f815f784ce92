"""The Lambda edge: read every region at once, decide, remember, apply, log.

`run()` does the work with injected clients (tests hand it moto's); `handler()` is what the schedule
invokes, with Powertools for the structured decision line and the weight metrics.

Exactly one step per scheduled minute, whatever the delivery does (EventBridge delivers at least once,
Lambda's asynchronous invocation retries; the stack sets retries to 0, a short maximum event age and
one concurrent run, and the run defends itself as well):
- the run's minute is the event's `time` (its scheduled minute); an event older than LATE_AFTER is
  skipped, the next one reads fresher minutes; a minute older than the last one decided is skipped;
- the absolute weights decided for a minute are written to the state before Route 53 is changed, so a
  second delivery of that minute re-applies the same targets (repeats, never adds a step), and a state
  write that fails leaves Route 53 untouched;
- regions are read concurrently with short timeouts: a hung region costs only its own decision.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from . import records
from .cells import decide_cells
from .config import OrchestratorConfig, RegionTarget
from .config_source import ConfigCache
from .history import ahead_of_clock, legacy_weights, parse_time, starting_weights, weights_requests_followed
from .override import Override, OverrideError, parse_override
from .policy import Decision, RegionSignals
from .run_lock import TABLE_VARIABLE as LOCK_TABLE_VARIABLE
from .run_lock import RunLock
from .signals import (
    GET_PARAMETERS_MAX_NAMES,
    Endpoint,
    SignalReadError,
    endpoints_from,
    read_endpoints,
    read_newest_of,
    read_parameters,
)
from .state import RunState, parse_state

ClientFactory = Callable[[str, str], Any]  # (service, region) -> boto3 client

# The next scheduled run is 60 s after this one's: a run starting later than this is superseded by it.
LATE_AFTER = timedelta(seconds=50)
# How long the run waits for the regions' reads; a region not read by then is missing this minute.
READ_DEADLINE_SECONDS = 20.0
# boto3's defaults (60 s connect, 60 s read, several attempts) outlast the Lambda's 50 s (botocore
# config reference): each call here gives up after at most 2 x (2 s + 3 s).
CLIENT_CONFIG = Config(
    connect_timeout=2, read_timeout=3, retries={"total_max_attempts": 2, "mode": "standard"}
)

logger = Logger(service="traffic-orchestrator")


@dataclass(frozen=True)
class RunResult:
    decision: Decision | None  # None when the run was skipped or repeated a minute already decided
    applied: int  # records created or changed
    override: Override | None
    notes: tuple[str, ...]  # what was ignored and why (expired pin, unreadable region, late event)
    weights: dict[str, int] | None = None  # the weights the run set (the repeated targets for a repeat)
    rejected: dict[str, str] = field(default_factory=dict)  # region -> why Route 53 refused its change
    refused: bool = False  # the event was dated ahead of the clock: refused, counted


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def override_of(
    parameter: dict[str, Any] | None, config: OrchestratorConfig, now: datetime
) -> tuple[Override | None, list[str]]:
    """The operator's pin from its parameter (None when there is none), and what of it was ignored."""
    try:
        override = parse_override(parameter["Value"] if parameter else None, config.region_names)
    except OverrideError as error:
        return None, [f"override ignored: {error}"]
    if override is None or parameter is None:
        return None, []
    notes = [f"override entry for {region} ignored: not a configured region" for region in override.ignored]
    written_at = parameter.get("LastModifiedDate")
    if not override.active(now, written_at):
        return None, [*notes, f"override ended at {_iso(override.ends_at(written_at))}: ignored"]
    if not override.weights:
        return None, notes
    return override, notes


Read = tuple[Endpoint | None, RegionSignals | None, datetime | None]


def _read_aws_region(
    ssm: Any,
    cloudwatch: Any | None,
    config: OrchestratorConfig,
    targets: list[RegionTarget],
    minute: datetime,
    after: dict[str, datetime | None],
    parameters: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Read | SignalReadError]:
    """The targets of one AWS region (a region, or its cells) with one call of each API for all of them:
    a region of four cells costs three requests a run, not twelve. `parameters`: their endpoints'
    parameters, when the run has read them already (the home region's, with the state)."""
    endpoints = read_endpoints(ssm, targets) if parameters is None else endpoints_from(parameters, targets)
    if cloudwatch is None:
        return {name: (endpoint, None, None) for name, endpoint in endpoints.items()}
    newest = read_newest_of(cloudwatch, config, targets, minute, after)
    return {
        name: found if isinstance(found, SignalReadError) else (endpoints[name], *found)
        for name, found in newest.items()
    }


def read_regions(
    config: OrchestratorConfig,
    client: ClientFactory,
    minute: datetime,
    deadline: float,
    with_signals: bool = True,
    last_read: dict[str, str] | None = None,
    read_in: tuple[str, dict[str, dict[str, Any]]] | None = None,
) -> tuple[dict[str, Endpoint | None], dict[str, RegionSignals | None], list[str], dict[str, datetime]]:
    """Every AWS region at once, each in a thread of its own. A region whose APIs fail, hang past
    `deadline` or have no complete minute newer than the one it read last run (`last_read`) has missing
    metrics this run (it holds); the others are still decided. Also returns the minute each region's
    signals are from. The cells of a region share its AWS region's APIs, so they are read together (one
    call of each API for all of them) and an API that fails or hangs there misses them all, as it would
    one call at a time. `read_in`: an AWS region whose endpoint parameters the run has read already,
    and what it read there."""
    last_read = last_read or {}
    by_aws_region: dict[str, list[RegionTarget]] = {}
    for region in config.regions:
        by_aws_region.setdefault(region.client_region, []).append(region)
    # Clients are made here, in one thread: creating boto3 clients is not thread-safe, using them is.
    clients = {
        aws_region: (
            client("ssm", aws_region),
            client("cloudwatch", aws_region) if with_signals else None,
        )
        for aws_region in by_aws_region
    }
    endpoints: dict[str, Endpoint | None] = {region.name: None for region in config.regions}
    signals: dict[str, RegionSignals | None] = {region.name: None for region in config.regions}
    read: dict[str, datetime] = {}
    notes: list[str] = []
    pool = ThreadPoolExecutor(max_workers=len(by_aws_region), thread_name_prefix="region")
    futures = {
        aws_region: pool.submit(
            _read_aws_region,
            *clients[aws_region],
            config,
            targets,
            minute,
            {t.name: parse_time(last_read[t.name]) if t.name in last_read else None for t in targets},
            read_in[1] if read_in and read_in[0] == aws_region else None,
        )
        for aws_region, targets in by_aws_region.items()
    }
    done, _ = wait(futures.values(), timeout=deadline)
    # Don't wait for a hung region: its thread ends when its client's timeouts run out.
    pool.shutdown(wait=False, cancel_futures=True)
    for region in config.regions:  # the notes in config's order, as one read per target gave them
        name, future = region.name, futures[region.client_region]
        if future not in done:
            notes.append(f"{name}: not read within {deadline:.0f} s")
            continue
        try:
            found = future.result()[name]
        except (BotoCoreError, ClientError) as error:
            notes.append(f"{name}: not read ({error})")
            continue
        if isinstance(found, SignalReadError):
            notes.append(f"{name}: not read ({found})")
            continue
        endpoints[name], signals[name], minute_read = found
        if minute_read is not None:
            read[name] = minute_read
    return endpoints, signals, notes, read


def _run_minute(now: datetime, event_time: str | None) -> datetime:
    moment = _parse_time(event_time) if event_time else now
    return moment.replace(second=0, microsecond=0)


def run(
    config: OrchestratorConfig,
    client: ClientFactory,
    home_region: str,
    now: datetime,
    event_time: str | None,
    *,
    read_deadline: float = READ_DEADLINE_SECONDS,
    known: dict[str, Any] | None = None,
) -> RunResult:
    """One scheduled minute. `known` is filled as the run goes, so a crash can still say what it knew."""
    known = known if known is not None else {}
    ahead = ahead_of_clock(now, event_time)
    if ahead is not None:
        # Never a future minute as the run's own: stored, it would make every later run look older.
        note = f"event {event_time} is {ahead:.0f} s ahead of the clock: refused"
        return RunResult(None, 0, None, (note,), refused=True)
    minute = _run_minute(now, event_time)
    known.update(minute=_iso(minute), phase="start")
    if event_time and now - _parse_time(event_time) > LATE_AFTER:
        late = (now - _parse_time(event_time)).total_seconds()
        return RunResult(None, 0, None, (f"event {event_time} is {late:.0f} s late: skipped",))

    home_ssm = client("ssm", home_region)
    route53 = client("route53", home_region)
    known["phase"] = "read state"
    # The state, the operator's pin and the home region's endpoints in one GetParameters (a name not found
    # is listed as invalid; the home region's endpoints join while the call stays within its 10 names).
    names = [config.state_parameter, config.override_parameter]
    endpoint_names = [
        name
        for region in config.regions
        if region.client_region == home_region
        for name in (region.endpoint_parameter, region.health_check_parameter)
    ]
    fold = len(names) + len(endpoint_names) <= GET_PARAMETERS_MAX_NAMES
    home = read_parameters(home_ssm, names + endpoint_names if fold else names)
    read_in = (home_region, home) if fold else None
    stored = home.get(config.state_parameter)
    state = parse_state(stored["Value"] if stored else None)
    state_notes: list[str] = []
    if ahead_of_clock(now, state.minute) is not None:
        # Written by a run that trusted a future event (before such events were refused): not a minute
        # any run can follow, so it is dropped rather than skipping every run until then.
        state_notes.append(f"state minute {state.minute} is ahead of the clock: ignored")
        state = RunState(state.memory, None, {}, state.removed, state.decisions, state.read)
    if state.minute and _parse_time(state.minute) > minute:
        return RunResult(None, 0, None, (f"minute {_iso(minute)} is older than {state.minute}: skipped",))

    known["phase"] = "read records"
    existing = records.read_records(route53, config.hosted_zone_id, config.domain_name)
    known["weights_in_route53"] = {region: record.weight for region, record in existing.items()}
    if state.minute == _iso(minute):
        known["phase"] = "repeat"
        endpoints, _, notes, _ = read_regions(
            config, client, minute, read_deadline, with_signals=False, read_in=read_in
        )
        batch = records.changes(config.domain_name, state.targets, endpoints, existing)
        rejected = records.apply_changes(
            route53, config.hosted_zone_id, batch, f"traffic orchestrator: repeat of {_iso(minute)}"
        )
        notes.insert(0, f"minute {_iso(minute)} already decided: its targets re-applied")
        return RunResult(None, len(batch) - len(rejected), None, tuple(notes), dict(state.targets), rejected)

    known["phase"] = "read regions"
    endpoints, signals, notes, read = read_regions(
        config, client, minute, read_deadline, last_read=state.read, read_in=read_in
    )
    notes = [*state_notes, *notes]
    known["notes"] = notes
    override, override_notes = override_of(home.get(config.override_parameter), config, now)
    notes.extend(override_notes)

    legacy = {name: record.weight for name, record in existing.items() if name not in config.region_names}
    current = starting_weights(
        {region.name: region.initial_weight for region in config.regions},
        {name: record.weight for name, record in existing.items() if name in config.region_names},
        legacy,
    )
    # The weights each target's requests followed in the minute its signals are from (and, through resolvers'
    # caches, the minutes before it).
    followed = {
        name: weights_requests_followed(state.decisions, read.get(name), {name: weight})[name]
        for name, weight in current.items()
    }
    decision = decide_cells(
        config.policy,
        config.budget,
        current,
        signals,
        state.memory,
        config.cells_by_region,
        pins=override.weights if override else None,
        followed=followed,
    )
    known["decided"] = decision.weights
    removed, removed_targets = _removed_regions(config, existing, state)
    created = {name for name in config.region_names if name in existing or endpoints.get(name) is not None}
    handed = legacy_weights(legacy, {r.name: r.group for r in config.regions}, current, created)
    for name, weight in handed.items():
        removed_targets[name] = min(removed_targets.get(name, weight), weight)
        notes.append(f"{name}: hands its region over to its new records: {weight}")
    for region, runs in removed.items():
        action = "set to 0" if removed_targets[region] == 0 else f"set to 0 after {config.remove_after_runs}"
        notes.append(f"{region}: has a record but is not in config (run {runs}): {action}")
    targets = {**decision.weights, **removed_targets}
    summary = {"time": _iso(minute), "weights": targets, "reason": decision.reason}
    last_read = {**state.read, **{name: _iso(m) for name, m in read.items()}}
    new_state = RunState(
        decision.memory, _iso(minute), targets, removed, (*state.decisions, summary), last_read
    )

    # The targets are remembered before Route 53 changes: a failed write changes nothing, and a second
    # delivery of this minute repeats them.
    known["phase"] = "write state"
    home_ssm.put_parameter(
        Name=config.state_parameter, Value=new_state.to_json(), Type="String", Overwrite=True
    )
    known["phase"] = "change records"
    batch = records.changes(config.domain_name, targets, endpoints, existing)
    rejected = records.apply_changes(
        route53, config.hosted_zone_id, batch, f"traffic orchestrator: {decision.reason}"
    )
    notes.extend(f"{region}: change rejected by Route 53 ({why})" for region, why in rejected.items())
    known["phase"] = "done"
    return RunResult(decision, len(batch) - len(rejected), override, tuple(notes), targets, rejected)


def _removed_regions(
    config: OrchestratorConfig, existing: dict[str, records.Record], state: RunState
) -> tuple[dict[str, int], dict[str, int]]:
    """Records whose region left config: runs seen so far, and the weight each gets this run (its own
    until `remove_after_runs`, then 0; deleting the record is left to an operator)."""
    runs = {
        region: state.removed.get(region, 0) + 1 for region in existing if region not in config.region_names
    }
    targets = {
        region: 0 if count >= config.remove_after_runs else existing[region].weight
        for region, count in runs.items()
    }
    return runs, targets


def _log(result: RunResult) -> None:
    decision = result.decision
    if result.refused:
        with single_metric(name="EventsRefused", unit=MetricUnit.Count, value=1):
            pass
    if decision is None:
        logger.info(
            "skipped" if result.weights is None else "repeated",
            extra={"notes": list(result.notes), "weights": result.weights, "rejected": result.rejected},
        )
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
            "rejected": result.rejected,
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


@functools.cache
def _boto3_client(service: str, region: str) -> Any:
    import boto3  # from the Lambda runtime

    # Kept for the warm container's next runs; made before any thread starts (see read_regions).
    return boto3.client(service, region_name=region, config=CLIENT_CONFIG)


# The config is read once per cold start (config_source.py).
_config = ConfigCache()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    known: dict[str, Any] = {"event_time": event.get("time")}
    home = os.environ["AWS_REGION"]
    lock = None
    try:
        config = _config.get(os.environ, lambda: _boto3_client("ssm", home))
        if os.environ.get(LOCK_TABLE_VARIABLE):
            lock = RunLock(
                _boto3_client("dynamodb", home), os.environ[LOCK_TABLE_VARIABLE], context.aws_request_id
            )
            if not lock.acquire(datetime.now(UTC)):
                lock = None  # another run's: not ours to release
                note = "another run holds the run lock: skipped (the next minute decides again)"
                logger.info("skipped", extra={"notes": [note]})
                return {"weights": None, "reason": note}
        result = run(config, _boto3_client, home, datetime.now(UTC), event.get("time"), known=known)
    except Exception:
        # One structured line with what the run knew before it failed; the error still fails the run
        # (the Errors alarm counts it).
        logger.exception("run failed", extra={"known": known})
        raise
    finally:
        if lock is not None:
            lock.release()
    _log(result)
    decision = result.decision
    return {
        "weights": decision.weights if decision else result.weights,
        "reason": decision.reason if decision else "; ".join(result.notes),
    }
