"""The orchestrator's Lambda handler against moto (Route 53 zone and weighted records, CloudWatch metric
data with standard statistics, SSM): the degrade-and-recover scenario through the real handler, minute by
minute, with the record weights moto holds after each run checked against the offline rehearsal."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from ops.routing_scenario import load_scenario, replay
from orchestrator.routing import handler as lambda_handler
from orchestrator.routing.config import OrchestratorConfig, RegionTarget
from orchestrator.routing.override import Override
from orchestrator.routing.policy import PolicyParams
from orchestrator.routing.records import read_records

REPO = Path(__file__).resolve().parents[3]
SCENARIO = REPO / "scenarios" / "routing" / "degrade-and-recover.yaml"
DOMAIN = "assistant.example.com"
START = datetime(2027, 7, 8, 12, 0, tzinfo=UTC)
GAUGE_INTERVAL = 10
REQUESTS_PER_MINUTE = 1000
MIN_HOSTS = {"us-east-1": 4, "us-west-2": 2, "us-east-2": 1}  # as in the scenario
WEIGHTS = {"us-east-1": 50, "us-west-2": 30, "us-east-2": 20}


_clients: dict[tuple[str, str], object] = {}


def client(service: str, region: str):
    """One client per service and region for the test, as one Lambda invocation keeps its own."""
    if (service, region) not in _clients:
        _clients[service, region] = boto3.client(service, region_name=region)
    return _clients[service, region]


@pytest.fixture
def aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        yield
        _clients.clear()


@pytest.fixture
def config(aws) -> OrchestratorConfig:
    route53 = client("route53", "us-east-1")
    zone = route53.create_hosted_zone(Name="example.com", CallerReference="zone")["HostedZone"]["Id"]
    regions = []
    for region, weight in WEIGHTS.items():
        check = route53.create_health_check(
            CallerReference=region,
            HealthCheckConfig={"Type": "CALCULATED", "ChildHealthChecks": [], "HealthThreshold": 0},
        )["HealthCheck"]["Id"]
        ssm = client("ssm", region)
        endpoint = {
            "alb_dns_name": f"serving-{region}.{region}.elb.amazonaws.com",
            "alb_canonical_hosted_zone_id": "Z35SXDOTRQ7X7K",
            "region": region,
        }
        ssm.put_parameter(Name=f"/kit/{region}/serving-endpoint", Value=json.dumps(endpoint), Type="String")
        ssm.put_parameter(Name=f"/kit/{region}/routing-health-check", Value=check, Type="String")
        regions.append(
            RegionTarget(
                name=region,
                initial_weight=weight,
                min_hosts=MIN_HOSTS[region],
                endpoint_parameter=f"/kit/{region}/serving-endpoint",
                health_check_parameter=f"/kit/{region}/routing-health-check",
                degraded_alarm=f"kit-{region}-region-degraded",
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


def publish(region: str, at: datetime, minute) -> None:
    """One minute of a region's serving containers, as CloudWatch aggregates them: 0/1 per request (its
    Average is a share), gauges every GAUGE_INTERVAL seconds per host."""
    samples = minute.healthy_hosts * 60 / GAUGE_INTERVAL
    dimensions = [{"Name": "Model", "Value": "assistant"}]

    def share(name: str, value: float) -> dict:
        stats = {
            "SampleCount": REQUESTS_PER_MINUTE,
            "Sum": value * REQUESTS_PER_MINUTE,
            "Minimum": 0,
            "Maximum": 1,
        }
        return {"MetricName": name, "Dimensions": dimensions, "Timestamp": at, "StatisticValues": stats}

    def gauge(name: str, total: float) -> dict:
        per_host = total / minute.healthy_hosts
        stats = {"SampleCount": samples, "Sum": per_host * samples, "Minimum": per_host, "Maximum": per_host}
        return {"MetricName": name, "Dimensions": dimensions, "Timestamp": at, "StatisticValues": stats}

    client("cloudwatch", region).put_metric_data(
        Namespace="LLMServing",
        MetricData=[
            share("SlowFirstToken", minute.slow_first_token_share),
            share("RequestFailed", minute.error_share),
            gauge("RequestsInFlight", minute.requests_in_flight),
            gauge("ServingSlots", minute.serving_slots),
        ],
    )


def weights_in_route53(config: OrchestratorConfig) -> dict[str, int]:
    records = read_records(client("route53", "us-east-1"), config.hosted_zone_id, config.domain_name)
    return {region: record.weight for region, record in records.items()}


def test_degrade_and_recover_through_the_handler_matches_the_rehearsal(config):
    scenario = load_scenario(SCENARIO)
    expected = replay(scenario, config.policy)
    for index, minute in enumerate(scenario.minutes):
        now = START + timedelta(minutes=index + 1)
        for region, figures in minute.items():
            publish(region, now - timedelta(seconds=30), figures)
        result = lambda_handler.run(config, client, "us-east-1", now, now.isoformat())
        assert weights_in_route53(config) == expected[index].decision.weights, f"minute {index}"
        assert result.decision.reason == expected[index].decision.reason
    # The figure the README quotes: at the floor within 3 runs of the first bad minute, back after.
    history = [m.decision.weights["us-east-1"] for m in expected]
    assert history[9] > config.policy.floor and history[11] == config.policy.floor
    assert history[-1] > 40


def test_records_point_at_each_region_with_its_health_check(config):
    now = START + timedelta(minutes=1)
    lambda_handler.run(config, client, "us-east-1", now, None)
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


def test_a_repeated_event_is_handled_once(config):
    first = lambda_handler.run(config, client, "us-east-1", START, "2027-07-08T12:00:00Z")
    again = lambda_handler.run(config, client, "us-east-1", START, "2027-07-08T12:00:00Z")
    assert first.decision is not None and again.decision is None


def test_an_unexpired_override_is_obeyed_and_an_expired_one_ignored(config):
    ssm = client("ssm", "us-east-1")
    pin = Override({"us-east-1": 0}, START + timedelta(minutes=5), "patching")
    ssm.put_parameter(Name=config.override_parameter, Value=pin.to_json(), Type="String")
    lambda_handler.run(config, client, "us-east-1", START, None)
    assert weights_in_route53(config)["us-east-1"] == 0
    later = lambda_handler.run(config, client, "us-east-1", START + timedelta(minutes=6), None)
    assert any("expired" in note for note in later.notes)
    assert later.override is None


def test_the_lambda_entry_point_logs_one_decision_line(config, monkeypatch, capsys, caplog):
    monkeypatch.setenv("ORCHESTRATOR_CONFIG", config.to_json())
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "kit/Routing")

    class Context:
        function_name = "orchestrator"
        memory_limit_in_mb = 256
        invoked_function_arn = "arn:aws:lambda:us-east-1:111111111111:function:orchestrator"
        aws_request_id = "request"

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


def test_a_region_whose_apis_fail_holds_while_the_others_are_decided(config):
    def failing_in_us_west_2(service: str, region: str):
        if region == "us-west-2" and service == "cloudwatch":
            return boto3.client(service, region_name=region, endpoint_url="http://127.0.0.1:9")
        return client(service, region)

    result = lambda_handler.run(config, failing_in_us_west_2, "us-east-1", START, None)
    assert any(note.startswith("us-west-2: not read") for note in result.notes)
    statuses = {r.region: str(r.status) for r in result.decision.regions}
    assert statuses["us-west-2"] == "missing"
    assert "us-west-2" not in weights_in_route53(config)  # its record is left alone this run
