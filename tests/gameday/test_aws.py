"""The real orchestrator handler under the twin: its clock is the simulated one, API faults reach its
calls and only its calls, a repeated event is skipped, and nothing leaks out of the run."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gameday.aws import Orchestrator
from gameday.templates import read_deployment, synthesize
from orchestrator.routing import handler as lambda_handler
from orchestrator.routing.override import Override

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2027, 7, 8, 19, 30, tzinfo=UTC)


@pytest.fixture(scope="module")
def deployment():
    return read_deployment(synthesize(REPO / "config" / "prime-day.yaml"))


@pytest.fixture
def orchestrator(deployment):
    composites = {name: [c.name for c in region.composites] for name, region in deployment.cells.items()}
    with Orchestrator(deployment.orchestrator_config, deployment.home_region, composites) as instance:
        yield instance


def decisions(orchestrator: Orchestrator) -> list[dict]:
    ssm = orchestrator.client("ssm", orchestrator.home)
    state = ssm.get_parameter(Name=orchestrator.config.state_parameter)["Parameter"]["Value"]
    return json.loads(state)["decisions"]


def test_the_handler_runs_on_the_simulated_clock_with_the_deployed_config(orchestrator, deployment):
    answer = orchestrator.run(NOW)
    assert answer["weights"] == {r.name: r.initial_weight for r in orchestrator.config.regions}
    decided = datetime.fromisoformat(decisions(orchestrator)[-1]["time"].replace("Z", "+00:00"))
    assert decided == NOW
    assert orchestrator.weights() == answer["weights"]
    deployed = json.loads(deployment.orchestrator_config)
    assert deployed["policy"] == json.loads(orchestrator.config.to_json())["policy"]


def test_the_handlers_own_clock_is_the_simulated_one(orchestrator):
    """The handler ends a pin 7 days after it was written; moto stamps the parameter with the real clock
    (years before the simulated one), so on the simulated clock the pin has expired, on the real one it
    would still hold."""
    pin = Override({"us-east-1/2": 0}, NOW + timedelta(minutes=5), "patching")
    ssm = orchestrator.client("ssm", orchestrator.home)
    ssm.put_parameter(Name=orchestrator.config.override_parameter, Value=pin.to_json(), Type="String")
    answer = orchestrator.run(NOW)
    assert answer["weights"]["us-east-1/2"] != 0  # pins name cells
    assert datetime.now(UTC) + timedelta(days=7) < NOW  # the premise: the simulated day is far ahead


def test_a_repeated_delivery_is_skipped(orchestrator):
    orchestrator.run(NOW)
    first = decisions(orchestrator)
    again = orchestrator.run(NOW)
    assert decisions(orchestrator) == first  # nothing decided twice
    assert again["weights"] in (None, orchestrator.weights())


def test_api_errors_fail_the_handlers_calls_not_the_twins(orchestrator):
    orchestrator.run(NOW)
    orchestrator.failing = {"route53"}
    answer = orchestrator.run(NOW + timedelta(minutes=1))
    assert "error" in answer and "ServiceUnavailable" in answer["error"]
    assert orchestrator.weights()  # the twin's own Route 53 client still works
    orchestrator.failing = {"cloudwatch"}
    answer = orchestrator.run(NOW + timedelta(minutes=2))
    assert "error" not in answer  # the handler treats unreadable regions as missing metrics
    assert "missing" in answer["reason"] or "kept" in answer["reason"]


def test_the_handlers_calls_reach_moto_unsigned_from_the_calling_thread(orchestrator):
    """The two costs the twin leaves out (bench/gameday_speed.py): SigV4 signing, which moto never checks,
    and a thread per region per run. Every call still goes through botocore to moto's API; afterwards the
    handler's executor is its own again."""
    import threading

    import boto3

    seen: list[tuple[str, bool, str]] = []

    def record(request, **_):
        seen.append((threading.current_thread().name, "Authorization" in request.headers, request.url))

    executor = lambda_handler.ThreadPoolExecutor
    boto3.DEFAULT_SESSION.events.register("before-send", record)
    try:
        answer = orchestrator.run(NOW)
    finally:
        boto3.DEFAULT_SESSION.events.unregister("before-send", record)
    assert "error" not in answer and answer["weights"]
    assert len(seen) > len(orchestrator.config.regions) * 2  # each region's endpoint, alarm and metrics
    assert {name for name, _, _ in seen} == {threading.current_thread().name}
    assert not any(signed for _, signed, _ in seen)
    assert any("monitoring" in url for _, _, url in seen) and any("ssm" in url for _, _, url in seen)
    assert lambda_handler.ThreadPoolExecutor is executor
    assert executor.__name__ == "ThreadPoolExecutor"


def test_nothing_outlives_the_run(deployment):
    import boto3
    from botocore.parsers import DEFAULT_TIMESTAMP_PARSER
    from moto.cloudwatch.models import CloudWatchBackend
    from moto.core.botocore_stubber import BotocoreStubber
    from moto.core.serialize import ResponseSerializer, TimestampSerializer

    read = CloudWatchBackend.get_metric_data
    moto_paths = (
        BotocoreStubber.process_request,
        ResponseSerializer.get_value,
        TimestampSerializer._convert_timestamp_to_str,
    )
    before = dict(os.environ)
    # The stream the handler's logger had before the run: stdout as it was when the module was first imported,
    # which is pytest's capture of an earlier test when another test module imported the handler first.
    log_stream = lambda_handler.logger.registered_handler.stream
    with Orchestrator(deployment.orchestrator_config, deployment.home_region, {}) as instance:
        instance.run(NOW)
        session = boto3.DEFAULT_SESSION  # the handler's clients are made from it
    assert dict(os.environ) == before
    assert lambda_handler.datetime is datetime
    assert CloudWatchBackend.get_metric_data is read  # the namespace filter is the run's only
    # moto's own paths again, and clients made from that session afterwards read timestamps as botocore does.
    assert (
        BotocoreStubber.process_request,
        ResponseSerializer.get_value,
        TimestampSerializer._convert_timestamp_to_str,
    ) == moto_paths
    parsers = session._session.get_component("response_parser_factory")  # type: ignore[union-attr]
    assert parsers._defaults.get("timestamp_parser", DEFAULT_TIMESTAMP_PARSER) is DEFAULT_TIMESTAMP_PARSER
    assert lambda_handler.logger.registered_handler.stream is log_stream


def test_each_cell_reads_its_own_namespace(orchestrator):
    """us-east-1's two cells publish the same metric names and dimensions, each to its own namespace, in
    the same AWS region: the handler's read of a cell sees that cell's minute only (moto alone would sum
    the region's cells, see gameday/aws.py)."""
    from gameday.metrics import datapoints
    from orchestrator.routing.signals import minute_to_read, read_signals

    minute = minute_to_read(NOW)
    slow = {"us-east-1/1": 0.3, "us-east-1/2": 0.0}
    hosts = {"us-east-1/1": 10.0, "us-east-1/2": 30.0}
    for cell in slow:
        raw = {
            "served_requests": 6000.0,
            "requests": 6000.0,
            "slow_share": slow[cell],
            "error_share": 0.0,
            "reporting_hosts": hosts[cell],
            "in_flight": 100.0,
            "slots": hosts[cell] * 64,
        }
        data = datapoints(raw, minute, orchestrator.config.model_name)
        orchestrator.publish(cell, orchestrator.namespace(cell), data)
    assert orchestrator.namespace("us-east-1/2") == "LLMServing/cell2"
    targets = {target.name: target for target in orchestrator.config.regions}
    cloudwatch = orchestrator.client("cloudwatch", "us-east-1")
    for cell in slow:
        signals = read_signals(cloudwatch, orchestrator.config, targets[cell], NOW)
        assert signals is not None
        assert signals.slow_first_token_share == pytest.approx(slow[cell])
        assert signals.healthy_hosts == hosts[cell]


def test_records_carry_the_alias_evaluate_target_health_the_orchestrator_wrote(orchestrator):
    orchestrator.run(NOW)
    assert {flag for _, flag in orchestrator.records().values()} == {True}  # records.py writes True
    route53 = orchestrator.client("route53", orchestrator.home)
    name = orchestrator.config.domain_name
    record = next(
        r
        for r in route53.list_resource_record_sets(HostedZoneId=orchestrator.config.hosted_zone_id)[
            "ResourceRecordSets"
        ]
        if r.get("SetIdentifier") == "us-east-2"  # a region of one cell
    )
    record["AliasTarget"]["EvaluateTargetHealth"] = False
    route53.change_resource_record_sets(
        HostedZoneId=orchestrator.config.hosted_zone_id,
        ChangeBatch={"Changes": [{"Action": "UPSERT", "ResourceRecordSet": record}]},
    )
    assert orchestrator.records()["us-east-2"] == (20, False)
    assert name.rstrip(".") in record["Name"]


def test_the_twins_metrics_reach_the_handler_through_moto(orchestrator):
    from gameday.metrics import datapoints

    minute = NOW - timedelta(minutes=2)
    raw = {
        "requests": 6000.0,
        "served_requests": 6000.0,
        "reporting_hosts": 10.0,
        "in_flight": 50.0,
        "slots": 960.0,
    }
    for target in ("us-west-2/1", "us-east-2"):
        orchestrator.publish(target, orchestrator.namespace(target), datapoints(raw, minute, "assistant"))
    answer = orchestrator.run(NOW)
    assert "no region reported metrics" not in answer["reason"]


def _reads(orchestrator: Orchestrator) -> list[dict]:
    """The reads a run makes, through the handler's own clients, with an error among them; each answer
    without its request id and HTTP headers (moto draws a new id per call)."""
    from botocore.exceptions import ClientError

    from orchestrator.routing.signals import metric_queries

    config = orchestrator.config
    targets = [t for t in config.regions if t.client_region == "us-east-1"]
    ssm = orchestrator._handler_client("ssm", "us-east-1")
    cloudwatch = orchestrator._handler_client("cloudwatch", "us-east-1")
    route53 = orchestrator._handler_client("route53", orchestrator.home)
    queries = [
        query
        for index, target in enumerate(targets)
        for query in metric_queries(config.namespace_of(target), config.model_name, f"t{index}_")
    ]
    names = [config.state_parameter, config.override_parameter, *(t.endpoint_parameter for t in targets)]
    answers = [
        ssm.get_parameters(Names=names),
        cloudwatch.describe_alarms(
            AlarmNames=[t.degraded_alarm for t in targets], AlarmTypes=["CompositeAlarm", "MetricAlarm"]
        ),
        cloudwatch.get_metric_data(
            MetricDataQueries=queries, StartTime=NOW - timedelta(minutes=5), EndTime=NOW
        ),
        route53.list_resource_record_sets(HostedZoneId=config.hosted_zone_id),
    ]
    try:
        ssm.get_parameter(Name="/game-day/no-such-parameter")
    except ClientError as error:
        answers.append(error.response)
    for answer in answers:
        answer.pop("ResponseMetadata")
    return answers


def _publish_minutes(orchestrator: Orchestrator) -> None:
    from gameday.metrics import datapoints

    raw = {
        "requests": 6000.0,
        "served_requests": 6000.0,
        "slow_share": 0.02,
        "error_share": 0.001,
        "reporting_hosts": 10.0,
        "in_flight": 50.0,
        "slots": 960.0,
    }
    for minutes_ago in range(1, 7):
        for target in ("us-east-1/1", "us-east-1/2", "us-west-2/1", "us-west-2/2", "us-east-2"):
            data = datapoints(raw, NOW - timedelta(minutes=minutes_ago), "assistant")
            orchestrator.publish(target, orchestrator.namespace(target), data)


def test_the_handlers_calls_answer_as_moto_and_botocore_answer_them(orchestrator):
    """The twin's shortcuts (gameday/aws.py: each URL's moto handler found once, each response member's
    attribute names listed once, naive timestamps to epoch seconds directly, epoch seconds read to UTC)
    change how fast a call is answered, not what it answers: the handler's reads, answered with them and
    then by moto's and botocore's own paths (new clients), are the same, timestamps the same instants."""
    from botocore.parsers import DEFAULT_TIMESTAMP_PARSER

    _publish_minutes(orchestrator)
    orchestrator.run(NOW)
    fast = _reads(orchestrator)
    assert fast[2]["MetricDataResults"][0]["Timestamps"]  # the minutes published are read back
    for shortcut in (orchestrator._routes, orchestrator._attribute_values, orchestrator._epoch_seconds):
        shortcut.close()
    orchestrator._parsers.set_parser_defaults(timestamp_parser=DEFAULT_TIMESTAMP_PARSER)
    orchestrator._handler_clients.clear()
    assert _reads(orchestrator) == fast


def test_a_run_finds_no_moto_handler_and_lists_no_member_names_a_run_before_it_did(orchestrator, monkeypatch):
    """What each call repeated, found once (gameday/aws.py): after two runs, a third looks up no moto
    backend's URL table, asks no alias rule for a response member's names and makes no timestamp aware to
    serialize it; the handler reads its metrics' timestamps in UTC."""
    import moto.backends
    from moto.core import serialize

    _publish_minutes(orchestrator)
    orchestrator.run(NOW - timedelta(minutes=2))
    orchestrator.run(NOW - timedelta(minutes=1))
    asked = {"backends": 0, "names": 0, "aware": 0}

    def counted(key, function):
        def call(*args, **kwargs):
            asked[key] += 1
            return function(*args, **kwargs)

        return call

    monkeypatch.setattr(moto.backends, "get_backend", counted("backends", moto.backends.get_backend))
    monkeypatch.setattr(
        serialize.XFormedAttributePicker,
        "get_possible_keys",
        counted("names", serialize.XFormedAttributePicker.get_possible_keys),
    )
    monkeypatch.setattr(
        serialize, "parse_to_aware_datetime", counted("aware", serialize.parse_to_aware_datetime)
    )
    answer = orchestrator.run(NOW)
    assert "error" not in answer and answer["weights"]
    assert asked == {"backends": 0, "names": 0, "aware": 0}
    timestamps = _reads(orchestrator)[2]["MetricDataResults"][0]["Timestamps"]
    assert timestamps and {t.tzinfo for t in timestamps} == {UTC}


def test_a_second_twin_reads_no_botocore_model_file(deployment, monkeypatch):
    """Each twin run makes new sessions and clients (the handler's and its own), all on the process's one
    botocore data loader: the service models read for the first are not read and parsed again."""
    from botocore.loaders import JSONFileLoader

    composites = {name: [c.name for c in region.composites] for name, region in deployment.cells.items()}
    with Orchestrator(deployment.orchestrator_config, deployment.home_region, composites) as instance:
        instance.run(NOW)
    read: list[str] = []
    load_file = JSONFileLoader.load_file

    def counted(loader, file_path):
        read.append(file_path)
        return load_file(loader, file_path)

    monkeypatch.setattr(JSONFileLoader, "load_file", counted)
    with Orchestrator(deployment.orchestrator_config, deployment.home_region, composites) as instance:
        answer = instance.run(NOW)
    assert "error" not in answer and answer["weights"]
    assert read == []
