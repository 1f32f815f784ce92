"""The orchestrator's Lambda handler against moto (Route 53 zone and weighted records, CloudWatch metric
data with standard statistics and metric alarms, SSM): every shipped scenario through the real handler,
minute by minute, against the offline rehearsal; and the faults of delivery and of AWS's APIs."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from ops.routing_replay import replay, requests_per_minute
from ops.routing_scenario import MinuteOfRegion, load_scenario
from orchestrator.routing import handler as lambda_handler
from orchestrator.routing.config import OrchestratorConfig, RegionTarget
from orchestrator.routing.override import Override
from orchestrator.routing.policy import PolicyParams, Status
from orchestrator.routing.records import read_records
from orchestrator.routing.signals import minute_to_read
from orchestrator.routing.state import MAX_BYTES, RunState, parse_state
from settings.cells import region_of
from tests.orchestrator.routing.clock import Clock

REPO = Path(__file__).resolve().parents[3]
SCENARIOS = sorted((REPO / "scenarios" / "routing").glob("*.yaml"))
DOMAIN = "assistant.example.com"
START = datetime(2027, 7, 8, 12, 0, tzinfo=UTC)
GAUGE_INTERVAL = 10
REQUESTS_PER_MINUTE = 1000
MIN_HOSTS = {"us-east-1": 4, "us-west-2": 2, "us-east-2": 1}  # as in the scenarios
WEIGHTS = {"us-east-1": 50, "us-west-2": 30, "us-east-2": 20}
HEALTHY = MinuteOfRegion(
    slow_first_token_share=0.002,
    error_share=0.0,
    healthy_hosts=12,
    min_hosts=4,
    serving_slots=384,
    requests_in_flight=200,
)
# A hard fault: 20% of requests failed (slow first tokens alone never make a region bad).
FAILING = HEALTHY.model_copy(update={"error_share": 0.2})


_clients: dict[tuple[str, str], object] = {}


class NamespacedCloudWatch:
    """A WORKAROUND for moto, not a stand-in for AWS: moto 5.2.5's GetMetricData ignores a query's Namespace
    (measured: two namespaces' data add up), where CloudWatch identifies a metric by namespace, name and
    dimensions. Cells of one region publish to namespaces of their own, so for those namespaces the metric
    name carries the namespace on the way in and out; the default namespace passes unchanged."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    @staticmethod
    def _fold(namespace: str, name: str) -> str:
        return name if namespace == "LLMServing" else f"{namespace}|{name}"

    def put_metric_data(self, *, Namespace: str, MetricData: list) -> dict:
        data = [{**d, "MetricName": self._fold(Namespace, d["MetricName"])} for d in MetricData]
        return self.inner.put_metric_data(Namespace=Namespace, MetricData=data)

    def get_metric_data(self, *, MetricDataQueries: list, **rest) -> dict:
        queries = []
        for query in MetricDataQueries:
            metric = query["MetricStat"]["Metric"]
            folded = {**metric, "MetricName": self._fold(metric["Namespace"], metric["MetricName"])}
            queries.append({**query, "MetricStat": {**query["MetricStat"], "Metric": folded}})
        return self.inner.get_metric_data(MetricDataQueries=queries, **rest)


def client(service: str, region: str):
    """One client per service and region for the test, as one Lambda container keeps its own."""
    if (service, region) not in _clients:
        made = boto3.client(service, region_name=region)
        _clients[service, region] = NamespacedCloudWatch(made) if service == "cloudwatch" else made
    return _clients[service, region]


def namespace_of(name: str) -> str:
    """A cell (`us-east-1/2`) publishes to its own namespace, as the cell stacks set it."""
    return "LLMServing" if name == region_of(name) else f"LLMServing/cell{name.split('/')[1]}"


def alarm_name(region: str) -> str:
    # Whatever the regional stack calls it: the orchestrator reads the name config gives it.
    return f"kit-{region}-drain-on-this"


@pytest.fixture
def aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        yield
        _clients.clear()


def make_config(weights: dict[str, int], min_hosts: dict[str, int]) -> OrchestratorConfig:
    route53 = client("route53", "us-east-1")
    zones = route53.list_hosted_zones()["HostedZones"]
    zone = (
        zones[0]["Id"]
        if zones
        else route53.create_hosted_zone(Name="example.com", CallerReference="z")["HostedZone"]["Id"]
    )
    regions = []
    for name, weight in weights.items():
        region = region_of(name)
        check = route53.create_health_check(
            CallerReference=name,
            HealthCheckConfig={"Type": "CALCULATED", "ChildHealthChecks": [], "HealthThreshold": 0},
        )["HealthCheck"]["Id"]
        ssm = client("ssm", region)
        endpoint = {
            "alb_dns_name": f"serving-{region}.{region}.elb.amazonaws.com",
            "alb_canonical_hosted_zone_id": "Z35SXDOTRQ7X7K",
            "region": region,
        }
        ssm.put_parameter(
            Name=f"/kit/{name}/serving-endpoint", Value=json.dumps(endpoint), Type="String", Overwrite=True
        )
        ssm.put_parameter(
            Name=f"/kit/{name}/routing-health-check", Value=check, Type="String", Overwrite=True
        )
        cell = {} if name == region else {"aws_region": region, "metrics_namespace": namespace_of(name)}
        regions.append(
            RegionTarget(
                name=name,
                initial_weight=weight,
                min_hosts=min_hosts[name],
                endpoint_parameter=f"/kit/{name}/serving-endpoint",
                health_check_parameter=f"/kit/{name}/routing-health-check",
                degraded_alarm=alarm_name(name),
                **cell,
            )
        )
    return OrchestratorConfig(
        domain_name=DOMAIN,
        hosted_zone_id=zone.split("/")[-1],
        metrics_namespace="LLMServing",
        model_name="assistant",
        state_parameter="/kit/routing/state",
        override_parameter="/kit/routing/override",
        policy=PolicyParams(),
        regions=tuple(regions),
        gauge_interval_seconds=GAUGE_INTERVAL,
    )


@pytest.fixture
def config(aws) -> OrchestratorConfig:
    return make_config(WEIGHTS, MIN_HOSTS)


def publish(region: str, minute: datetime, figures: MinuteOfRegion) -> None:
    """One minute of a region's serving containers, as CloudWatch aggregates them: 0/1 per request (its
    Average is a share), gauges every GAUGE_INTERVAL seconds per host; hosts that are gone send nothing.
    Its drain alarm is a metric alarm here (moto has no composite alarms), set to the minute's state."""
    cloudwatch = client("cloudwatch", region_of(region))
    if not cloudwatch.describe_alarms(AlarmNames=[alarm_name(region)])["MetricAlarms"]:
        cloudwatch.put_metric_alarm(
            AlarmName=alarm_name(region),
            Namespace="LLMServing",
            MetricName="RequestFailed",
            Statistic="Average",
            Period=60,
            EvaluationPeriods=1,
            Threshold=0.5,
            ComparisonOperator="GreaterThanThreshold",
        )
    state = "ALARM" if figures.degraded else "OK"
    cloudwatch.set_alarm_state(AlarmName=alarm_name(region), StateValue=state, StateReason="test")
    if figures.healthy_hosts == 0:
        return
    samples = figures.healthy_hosts * 60 / GAUGE_INTERVAL
    dimensions = [{"Name": "Model", "Value": "assistant"}]
    at = minute + timedelta(seconds=30)

    def share(name: str, value: float) -> dict:
        # RequestFailed's count is the request rate the policy reads: the rehearsal's, from in flight.
        count = requests_per_minute(figures) if name == "RequestFailed" else REQUESTS_PER_MINUTE
        stats = {
            "SampleCount": count,
            "Sum": value * count,
            "Minimum": 0,
            "Maximum": 1,
        }
        return {"MetricName": name, "Dimensions": dimensions, "Timestamp": at, "StatisticValues": stats}

    def gauge(name: str, total: float) -> dict:
        per_host = total / figures.healthy_hosts
        stats = {"SampleCount": samples, "Sum": per_host * samples, "Minimum": per_host, "Maximum": per_host}
        return {"MetricName": name, "Dimensions": dimensions, "Timestamp": at, "StatisticValues": stats}

    cloudwatch.put_metric_data(
        Namespace=namespace_of(region),
        MetricData=[
            share("SlowFirstToken", figures.slow_first_token_share),
            share("RequestFailed", figures.error_share),
            gauge("RequestsInFlight", figures.requests_in_flight),
            gauge("ServingSlots", figures.serving_slots),
        ],
    )


def run_at(minute: datetime) -> datetime:
    """The run whose read minute is `minute`."""
    return minute + (minute - minute_to_read(minute))


def publish_for_run(run: datetime, figures: dict[str, MinuteOfRegion]) -> None:
    for region, minute in figures.items():
        publish(region, minute_to_read(run), minute)


def weights_in_route53(config: OrchestratorConfig) -> dict[str, int]:
    records = read_records(client("route53", "us-east-1"), config.hosted_zone_id, config.domain_name)
    return {region: record.weight for region, record in records.items()}


def state(config: OrchestratorConfig):
    text = client("ssm", "us-east-1").get_parameter(Name=config.state_parameter)["Parameter"]["Value"]
    return parse_state(text)


class Context:
    function_name = "orchestrator"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:111111111111:function:orchestrator"
    aws_request_id = "request"


@pytest.fixture
def lambda_environment(config, monkeypatch):
    monkeypatch.setenv("ORCHESTRATOR_CONFIG", config.to_json())
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "kit/Routing")
    lambda_handler._boto3_client.cache_clear()
    yield
    lambda_handler._boto3_client.cache_clear()


def event(run: datetime) -> dict:
    Clock.now_at = run + timedelta(seconds=5)
    return {"time": run.isoformat().replace("+00:00", "Z"), "detail-type": "Scheduled Event"}


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_through_the_real_handler_matches_the_rehearsal_every_minute(aws, monkeypatch, path):
    """One signal path: the rehearsal reads its figures through the handler's reader, so missing minutes,
    hostless regions and alarms give the same weights in both, every minute. A scenario naming cells
    (`us-east-1/2`) runs against a config of cells: each read in its region, from its own namespace."""
    scenario = load_scenario(path)
    min_hosts = {
        name: next(m[name].min_hosts for m in scenario.minutes if name in m) for name in scenario.regions
    }
    config = make_config({name: r.weight for name, r in scenario.regions.items()}, min_hosts)
    monkeypatch.setenv("ORCHESTRATOR_CONFIG", config.to_json())
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "kit/Routing")
    monkeypatch.setattr(lambda_handler, "_boto3_client", client)  # the namespace workaround above
    expected = replay(scenario, config.policy, GAUGE_INTERVAL)
    for index, minute in enumerate(scenario.minutes):
        run = START + timedelta(minutes=index)
        publish_for_run(run, minute)
        result = lambda_handler.handler(event(run), Context())
        assert weights_in_route53(config) == expected[index].decision.weights, f"minute {index}"
        assert result["reason"] == expected[index].decision.reason, f"minute {index}"


def test_the_shipped_scenarios_include_missing_minutes():
    scenarios = [load_scenario(path) for path in SCENARIOS]
    missing = [s for s in scenarios if any(set(minute) != set(s.regions) for minute in s.minutes)]
    assert len(missing) >= 2


def test_records_point_at_each_region_with_its_health_check(config):
    lambda_handler.run(config, client, "us-east-1", START, None)
    records = read_records(client("route53", "us-east-1"), config.hosted_zone_id, DOMAIN)
    assert set(records) == set(WEIGHTS)
    for region, record in records.items():
        assert record.dns_name == f"dualstack.serving-{region}.{region}.elb.amazonaws.com"
        parameter = client("ssm", region).get_parameter(Name=f"/kit/{region}/routing-health-check")
        assert record.health_check_id == parameter["Parameter"]["Value"]
    # Missing metrics everywhere: the records were created with the configured weights and hold.
    assert {r: rec.weight for r, rec in records.items()} == WEIGHTS


def test_a_redeploy_never_resets_the_weights_the_orchestrator_chose(config):
    """The records live in Route 53 alone: the next run starts from their weights, not from config."""
    route53 = client("route53", "us-east-1")
    lambda_handler.run(config, client, "us-east-1", START, None)
    record = next(
        r
        for r in route53.list_resource_record_sets(HostedZoneId=config.hosted_zone_id)["ResourceRecordSets"]
        if r.get("SetIdentifier") == "us-east-1"
    )
    route53.change_resource_record_sets(
        HostedZoneId=config.hosted_zone_id,
        ChangeBatch={"Changes": [{"Action": "UPSERT", "ResourceRecordSet": {**record, "Weight": 7}}]},
    )
    lambda_handler.run(config, client, "us-east-1", START + timedelta(minutes=1), None)
    assert weights_in_route53(config)["us-east-1"] == 7


def test_a_region_not_deployed_yet_gets_no_record_until_it_publishes(config):
    client("ssm", "us-east-2").delete_parameter(Name="/kit/us-east-2/serving-endpoint")
    lambda_handler.run(config, client, "us-east-1", START, None)
    assert set(weights_in_route53(config)) == {"us-east-1", "us-west-2"}


def test_a_missing_health_check_parameter_never_writes_a_record_without_its_health_check(config):
    lambda_handler.run(config, client, "us-east-1", START, None)
    client("ssm", "us-east-2").delete_parameter(Name="/kit/us-east-2/routing-health-check")
    client("ssm", "us-west-2").delete_parameter(Name="/kit/us-west-2/routing-health-check")
    client("ssm", "us-west-2").delete_parameter(Name="/kit/us-west-2/serving-endpoint")
    route53 = client("route53", "us-east-1")
    route53.change_resource_record_sets(
        HostedZoneId=config.hosted_zone_id,
        ChangeBatch={
            "Changes": [
                {"Action": "DELETE", "ResourceRecordSet": record}
                for record in route53.list_resource_record_sets(HostedZoneId=config.hosted_zone_id)[
                    "ResourceRecordSets"
                ]
                if record.get("SetIdentifier") == "us-west-2"
            ]
        },
    )
    # us-east-2 drains (weight changes) while its health check parameter is unreadable.
    for offset in (1, 2, 3):
        run = START + timedelta(minutes=offset)
        publish_for_run(run, {"us-east-1": HEALTHY, "us-east-2": FAILING})
        lambda_handler.run(config, client, "us-east-1", run, None)
    records = read_records(route53, config.hosted_zone_id, DOMAIN)
    assert records["us-east-2"].weight == config.policy.floor
    assert records["us-east-2"].health_check_id  # kept from the record, never dropped
    assert "us-west-2" not in records  # no record is created without its health check


def test_a_duplicate_delivery_of_one_event_steps_once(config, lambda_environment):
    for offset in range(3):
        run = START + timedelta(minutes=offset)
        publish_for_run(run, {"us-east-1": FAILING, "us-west-2": HEALTHY, "us-east-2": HEALTHY})
        lambda_handler.handler(event(run), Context())
    after_three = weights_in_route53(config)
    last = START + timedelta(minutes=2)
    for _ in range(3):  # EventBridge delivered the last event three times
        again = lambda_handler.handler(event(last), Context())
        assert again["weights"] == after_three
    assert weights_in_route53(config) == after_three
    assert state(config).memory["us-east-1"].bad_runs == 3  # one bad minute counted once


def test_a_late_event_is_skipped_and_an_older_minute_never_steps_again(config, monkeypatch):
    run = START + timedelta(minutes=5)
    publish_for_run(run, {r: HEALTHY for r in WEIGHTS})
    late = lambda_handler.run(config, client, "us-east-1", run + timedelta(minutes=3), event(run)["time"])
    assert late.decision is None and "late" in late.notes[0]
    assert weights_in_route53(config) == {}
    lambda_handler.run(config, client, "us-east-1", run, event(run)["time"])
    before = weights_in_route53(config)
    earlier = run - timedelta(minutes=1)
    older = lambda_handler.run(config, client, "us-east-1", earlier, event(earlier)["time"])
    assert older.decision is None and "older" in older.notes[0]
    assert weights_in_route53(config) == before


class FailingPut:
    """SSM whose PutParameter fails (a stand-in for a throttled or refused write, which moto does not
    produce on demand); every other call goes to moto."""

    def __init__(self, ssm) -> None:
        self._ssm = ssm

    def put_parameter(self, **kwargs):
        raise ClientError(
            {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "PutParameter"
        )

    def __getattr__(self, name):
        return getattr(self._ssm, name)


class FailingChange:
    """Route 53 whose ChangeResourceRecordSets fails once (a stand-in for a throttled change)."""

    def __init__(self, route53) -> None:
        self._route53 = route53
        self.failures = 1

    def change_resource_record_sets(self, **kwargs):
        if self.failures:
            self.failures -= 1
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "Change")
        return self._route53.change_resource_record_sets(**kwargs)

    def __getattr__(self, name):
        return getattr(self._route53, name)


def _drain_setup(config) -> datetime:
    """Two runs: us-east-1 confirmed bad; the third run's minute is returned, published."""
    for offset in range(2):
        run = START + timedelta(minutes=offset)
        publish_for_run(run, {"us-east-1": FAILING, "us-west-2": HEALTHY, "us-east-2": HEALTHY})
        lambda_handler.run(config, client, "us-east-1", run, event(run)["time"])
    run = START + timedelta(minutes=2)
    publish_for_run(run, {"us-east-1": FAILING, "us-west-2": HEALTHY, "us-east-2": HEALTHY})
    return run


def test_a_state_write_that_fails_changes_nothing_and_the_retry_steps_once(config):
    run = _drain_setup(config)
    before = weights_in_route53(config)

    def failing_ssm(service, region):
        return FailingPut(client(service, region)) if service == "ssm" else client(service, region)

    with pytest.raises(ClientError):
        lambda_handler.run(config, failing_ssm, "us-east-1", run, event(run)["time"])
    assert weights_in_route53(config) == before  # Route 53 was not changed after the failed write
    retried = lambda_handler.run(config, client, "us-east-1", run, event(run)["time"])
    assert weights_in_route53(config) == retried.decision.weights
    assert state(config).memory["us-east-1"].bad_runs == 3


def test_a_change_that_fails_after_the_state_write_is_repeated_not_stepped_again(config):
    run = _drain_setup(config)
    before = weights_in_route53(config)
    route53 = FailingChange(client("route53", "us-east-1"))

    def failing_route53(service, region):
        return route53 if service == "route53" else client(service, region)

    with pytest.raises(ClientError):
        lambda_handler.run(config, failing_route53, "us-east-1", run, event(run)["time"])
    targets = state(config).targets
    assert weights_in_route53(config) == before and targets != before
    for _ in range(2):  # the retry and a duplicate: the same absolute targets, not two more steps
        repeat = lambda_handler.run(config, client, "us-east-1", run, event(run)["time"])
        assert repeat.decision is None and repeat.weights == targets
        assert weights_in_route53(config) == targets


@pytest.fixture
def hanging_endpoint():
    """A TCP server that accepts connections and never answers: a hung regional API."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    server.close()


def test_a_hung_region_costs_only_its_own_decision(config, hanging_endpoint):
    """The Lambda's own client settings against an endpoint that never answers: the run decides the other
    regions within its read deadline, and the hung client gives up by its own timeouts."""
    hung = boto3.client(
        "cloudwatch",
        region_name="us-west-2",
        endpoint_url=hanging_endpoint,
        config=lambda_handler.CLIENT_CONFIG,
    )

    def with_hung_west(service, region):
        return hung if (service, region) == ("cloudwatch", "us-west-2") else client(service, region)

    run = START + timedelta(minutes=1)
    publish_for_run(run, {r: HEALTHY for r in WEIGHTS})
    started = time.monotonic()
    result = lambda_handler.run(config, with_hung_west, "us-east-1", run, None, read_deadline=3)
    assert time.monotonic() - started < 8  # boto3's defaults would wait 60 s per attempt
    statuses = {r.region: str(r.status) for r in result.decision.regions}
    assert statuses == {"us-east-1": "healthy", "us-west-2": "missing", "us-east-2": "healthy"}
    assert any(note.startswith("us-west-2: not read") for note in result.notes)
    # The client itself gives up: 2 attempts of a 3 s read at most.
    started = time.monotonic()
    with pytest.raises(Exception, match="Read timeout"):
        hung.describe_alarms()
    assert time.monotonic() - started < 2 * (3 + 2) + 2


def test_a_slow_region_does_not_delay_the_others(config):
    release = threading.Event()

    class Slow:
        """CloudWatch whose GetMetricData stalls (a stubbed delay standing in for a slow API)."""

        def __init__(self, cloudwatch) -> None:
            self._cloudwatch = cloudwatch

        def get_metric_data(self, **kwargs):
            release.wait(30)
            return self._cloudwatch.get_metric_data(**kwargs)

        def __getattr__(self, name):
            return getattr(self._cloudwatch, name)

    def slow_east2(service, region):
        if (service, region) == ("cloudwatch", "us-east-2"):
            return Slow(client(service, region))
        return client(service, region)

    run = START + timedelta(minutes=1)
    publish_for_run(run, {r: HEALTHY for r in WEIGHTS})
    started = time.monotonic()
    try:
        result = lambda_handler.run(config, slow_east2, "us-east-1", run, None, read_deadline=1)
    finally:
        release.set()
    assert time.monotonic() - started < 10
    assert {r.region: str(r.status) for r in result.decision.regions}["us-east-2"] == "missing"


def test_a_region_whose_apis_fail_holds_while_the_others_are_decided(config):
    def failing_in_us_west_2(service: str, region: str):
        if region == "us-west-2" and service == "cloudwatch":
            return boto3.client(service, region_name=region, endpoint_url="http://127.0.0.1:9")
        return client(service, region)

    result = lambda_handler.run(config, failing_in_us_west_2, "us-east-1", START, None)
    assert any(note.startswith("us-west-2: not read") for note in result.notes)
    statuses = {r.region: str(r.status) for r in result.decision.regions}
    assert statuses["us-west-2"] == "missing"


def test_one_rejected_change_does_not_freeze_the_other_regions(config):
    class RejectsWest:
        """Route 53 refusing any batch that touches us-west-2, as it refuses an alias target it does not
        accept (moto does not validate alias targets, so this stands in for Route 53's check)."""

        def __init__(self, route53) -> None:
            self._route53 = route53

        def change_resource_record_sets(self, **kwargs):
            if any(
                c["ResourceRecordSet"]["SetIdentifier"] == "us-west-2"
                for c in kwargs["ChangeBatch"]["Changes"]
            ):
                raise ClientError(
                    {"Error": {"Code": "InvalidChangeBatch", "Message": "bad alias target for us-west-2"}},
                    "ChangeResourceRecordSets",
                )
            return self._route53.change_resource_record_sets(**kwargs)

        def __getattr__(self, name):
            return getattr(self._route53, name)

    route53 = RejectsWest(client("route53", "us-east-1"))

    def rejecting(service, region):
        return route53 if service == "route53" else client(service, region)

    result = lambda_handler.run(config, rejecting, "us-east-1", START, None)
    assert set(weights_in_route53(config)) == {"us-east-1", "us-east-2"}
    assert set(result.rejected) == {"us-west-2"}
    assert any("us-west-2: change rejected" in note for note in result.notes)


def test_an_unexpired_override_is_obeyed_and_an_expired_one_ignored(config):
    now = datetime.now(UTC)
    ssm = client("ssm", "us-east-1")
    pin = Override({"us-east-1": 0}, now + timedelta(minutes=5), "patching")
    ssm.put_parameter(Name=config.override_parameter, Value=pin.to_json(), Type="String")
    lambda_handler.run(config, client, "us-east-1", now, None)
    assert weights_in_route53(config)["us-east-1"] == 0
    later = lambda_handler.run(config, client, "us-east-1", now + timedelta(minutes=6), None)
    assert any("ended" in note for note in later.notes)
    assert later.override is None


def test_the_lambda_caps_a_pin_at_seven_days_from_when_it_was_written(config):
    now = datetime.now(UTC)
    pin = Override({"us-east-1": 0}, now + timedelta(days=365), "forgotten")
    client("ssm", "us-east-1").put_parameter(
        Name=config.override_parameter, Value=pin.to_json(), Type="String"
    )
    assert lambda_handler.run(config, client, "us-east-1", now + timedelta(days=6), None).override is not None
    capped = lambda_handler.run(config, client, "us-east-1", now + timedelta(days=7, minutes=1), None)
    assert capped.override is None and any("ended" in note for note in capped.notes)


def test_a_pin_naming_an_unknown_region_ignores_that_entry_only(config):
    now = datetime.now(UTC)
    text = json.dumps(
        {"weights": {"us-east-1": 0, "eu-west-9": 40}, "expires_at": (now + timedelta(hours=1)).isoformat()}
    )
    client("ssm", "us-east-1").put_parameter(Name=config.override_parameter, Value=text, Type="String")
    result = lambda_handler.run(config, client, "us-east-1", now, None)
    assert result.override is not None and result.override.weights == {"us-east-1": 0}
    assert weights_in_route53(config)["us-east-1"] == 0
    assert any("eu-west-9 ignored" in note for note in result.notes)


def test_eight_regions_keep_the_state_within_a_standard_parameter(aws):
    names = [
        "us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-2",
        "ap-northeast-1",
    ]  # fmt: skip
    config = make_config(dict.fromkeys(names, 30), dict.fromkeys(names, 4))
    bad = MinuteOfRegion(
        slow_first_token_share=0.3,
        error_share=0.2,
        healthy_hosts=1,
        min_hosts=4,
        serving_slots=32,
        requests_in_flight=30,
        degraded=True,
    )
    for offset in range(8):
        run = START + timedelta(minutes=offset)
        figures = {name: (bad if index % 2 == offset % 2 else HEALTHY) for index, name in enumerate(names)}
        publish_for_run(run, figures)
        lambda_handler.run(config, client, "us-east-1", run, None)
        text = client("ssm", "us-east-1").get_parameter(Name=config.state_parameter)["Parameter"]["Value"]
        assert len(text.encode()) <= MAX_BYTES
        assert parse_state(text).minute == event(run)["time"]


def test_a_region_removed_from_config_is_set_to_zero_after_remove_after_runs(config):
    route53 = client("route53", "us-east-1")
    route53.change_resource_record_sets(
        HostedZoneId=config.hosted_zone_id,
        ChangeBatch={
            "Changes": [
                {
                    "Action": "CREATE",
                    "ResourceRecordSet": {
                        "Name": DOMAIN,
                        "Type": "A",
                        "SetIdentifier": "eu-west-1",
                        "Weight": 40,
                        "AliasTarget": {
                            "HostedZoneId": "Z32O12XQLNTSW2",
                            "DNSName": "dualstack.old.eu-west-1.elb.amazonaws.com",
                            "EvaluateTargetHealth": True,
                        },
                    },
                }
            ]
        },
    )
    seen = []
    for offset in range(config.remove_after_runs):
        result = lambda_handler.run(config, client, "us-east-1", START + timedelta(minutes=offset), None)
        seen.append(weights_in_route53(config)["eu-west-1"])
    assert seen[:-1] == [40] * (config.remove_after_runs - 1) and seen[-1] == 0
    assert any("eu-west-1: has a record but is not in config" in note for note in result.notes)


def test_the_lambda_entry_point_logs_one_decision_line(config, lambda_environment, capsys, caplog):
    result = lambda_handler.handler({"time": "2027-07-08T12:00:00Z"}, Context())
    assert result["weights"] == WEIGHTS
    decisions = [record for record in caplog.records if record.getMessage() == "decision"]
    assert len(decisions) == 1
    assert decisions[0].new_weights == WEIGHTS and decisions[0].reason
    # Powertools prints the weights as EMF lines (CloudWatch turns them into metrics).
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    weights = [line for line in lines if "RegionWeight" in line]
    assert {line["Region"]: line["RegionWeight"] for line in weights} == {
        r: [float(w)] for r, w in WEIGHTS.items()
    }
    assert {line["_aws"]["CloudWatchMetrics"][0]["Namespace"] for line in weights} == {"kit/Routing"}


def test_a_crashed_run_still_logs_one_line_with_what_it_knew(config, lambda_environment, caplog, monkeypatch):
    def throttled(*args, **kwargs):
        raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "Change")

    monkeypatch.setattr(lambda_handler.records, "apply_changes", throttled)
    with pytest.raises(ClientError):
        lambda_handler.handler({"time": "2027-07-08T12:00:00Z"}, Context())
    (failed,) = [record for record in caplog.records if record.getMessage() == "run failed"]
    assert failed.known["phase"] == "change records"
    assert failed.known["decided"] == WEIGHTS and failed.known["minute"] == "2027-07-08T12:00:00Z"
    assert failed.exc_info is not None


def test_an_event_dated_ahead_of_the_clock_is_refused_counted_and_never_freezes_later_runs(
    config, lambda_environment, capsys
):
    """On main one event an hour in the future became the state's minute: every later run was "older" and
    skipped with success, weights frozen, no alarm."""
    run = START + timedelta(minutes=5)
    publish_for_run(run, {r: HEALTHY for r in WEIGHTS})
    future = event(run + timedelta(hours=1))["time"]
    refused = lambda_handler.run(config, client, "us-east-1", run, future)
    assert refused.refused and refused.decision is None and "ahead of the clock" in refused.notes[0]
    lambda_handler._log(refused)
    assert '"EventsRefused":[1.0]' in capsys.readouterr().out  # counted, for an alarm or a graph
    ok = lambda_handler.run(config, client, "us-east-1", run, event(run)["time"])
    assert ok.decision is not None
    assert state(config).minute == event(run)["time"]


def test_a_state_minute_ahead_of_the_clock_is_dropped_not_obeyed(config):
    """A state written by a run that trusted a future event (before they were refused) does not skip every
    run until then."""
    ahead = START + timedelta(hours=1)
    stale = RunState(minute=event(ahead)["time"], targets={"us-east-1": 1})
    client("ssm", "us-east-1").put_parameter(
        Name=config.state_parameter, Value=stale.to_json(), Type="String", Overwrite=True
    )
    run = START + timedelta(minutes=5)
    publish_for_run(run, {r: HEALTHY for r in WEIGHTS})
    result = lambda_handler.run(config, client, "us-east-1", run, event(run)["time"])
    assert result.decision is not None
    assert any("ahead of the clock: ignored" in note for note in result.notes)


def test_metrics_readable_two_minutes_late_are_still_read(config):
    """On main a run read the minute 2 back and no other: at 2 minutes' delay every region was missing."""
    run = START + timedelta(minutes=5)
    for region in WEIGHTS:
        publish(
            region, minute_to_read(run) - timedelta(minutes=1), FAILING if region == "us-east-1" else HEALTHY
        )
    result = lambda_handler.run(config, client, "us-east-1", run, event(run)["time"])
    statuses = {r.region: r.status for r in result.decision.regions}
    assert Status.MISSING not in statuses.values(), statuses
    assert statuses["us-east-1"] is Status.SUSPECT


def test_a_region_split_into_cells_hands_its_weight_over_without_raising_its_share(aws, lambda_environment):
    """On main the old `us-east-1` record kept its weight for remove_after_runs while the cells' records
    were created with their own: us-east-1's DNS share rose from 48% to 65% for ten minutes."""
    before = make_config(WEIGHTS, MIN_HOSTS)
    run = START + timedelta(minutes=5)
    publish_for_run(run, {r: HEALTHY for r in WEIGHTS})
    lambda_handler.run(before, client, "us-east-1", run, event(run)["time"])
    old = weights_in_route53(before)
    share_before = old["us-east-1"] / sum(old.values())
    cells = {"us-east-1/1": 25, "us-east-1/2": 25, "us-west-2": 30, "us-east-2": 20}
    after = make_config(cells, {name: 2 for name in cells})
    for offset in range(1, 4):
        later = run + timedelta(minutes=offset)
        publish_for_run(later, {name: HEALTHY for name in cells})
        lambda_handler.run(after, client, "us-east-1", later, event(later)["time"])
        weights = weights_in_route53(after)
        east = weights["us-east-1"] + weights["us-east-1/1"] + weights["us-east-1/2"]
        assert east / sum(weights.values()) <= share_before + 0.02, weights
    assert weights["us-east-1"] == 0


def test_a_run_reads_each_aws_region_with_one_call_of_each_api(aws):
    """On main every target cost its own GetParameters, DescribeAlarms and GetMetricData, and the state and
    the override two GetParameter calls: 17 requests a run for two cells of us-east-1 and two regions. The
    cells of an AWS region are read together, the state, the pin and the home region's endpoints in one
    call: 12, with the same signals and decision (each cell still reads its own namespace)."""
    cells = {"us-east-1/1": 25, "us-east-1/2": 25, "us-west-2": 30, "us-east-2": 20}
    config = make_config(cells, {name: 2 for name in cells})
    run = START + timedelta(minutes=5)
    publish_for_run(
        run, {"us-east-1/1": HEALTHY, "us-east-1/2": FAILING, "us-west-2": HEALTHY, "us-east-2": HEALTHY}
    )
    calls: list[tuple[str, str]] = []

    def count(model, **_) -> None:
        calls.append((model.service_model.service_name, model.name))

    for service, region in {(s, region_of(n)) for n in cells for s in ("ssm", "cloudwatch")} | {
        ("route53", "us-east-1")
    }:
        client(service, region).meta.events.register("before-call", count)
    result = lambda_handler.run(config, client, "us-east-1", run, event(run)["time"])
    reads = [call for call in calls if call[1] not in ("PutParameter", "ChangeResourceRecordSets")]
    assert sorted(reads) == sorted(
        [
            ("ssm", "GetParameters"),  # the state, the override and us-east-1's endpoints
            ("route53", "ListResourceRecordSets"),
            *[("cloudwatch", "DescribeAlarms"), ("cloudwatch", "GetMetricData")] * 3,
            *[("ssm", "GetParameters")] * 2,  # the endpoints of us-west-2 and us-east-2
        ]
    ), calls
    statuses = {r.region: r.status for r in result.decision.regions}
    # Each cell read its own namespace: the failing cell is judged on its own figures, not its sibling's.
    assert statuses["us-east-1/2"] is Status.SUSPECT and statuses["us-east-1/1"] is not Status.SUSPECT
    assert set(result.weights) == set(cells) and not result.notes, result.notes
