"""The run lock on moto's DynamoDB: one holder at a time, a lease that ends by itself, and the handler
skipping a minute whose lease another run holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest

from orchestrator.routing import handler as lambda_handler
from orchestrator.routing.run_lock import LEASE_SECONDS, RunLock
from tests.orchestrator.routing.test_handler import (
    HEALTHY,
    MIN_HOSTS,
    START,
    WEIGHTS,
    Context,
    event,
    make_config,
    publish_for_run,
    weights_in_route53,
)
from tests.orchestrator.routing.test_handler import aws as aws

TABLE = "kit-run-lock"
NOW = datetime(2027, 7, 8, 12, 0, tzinfo=UTC)


@pytest.fixture
def dynamodb(aws):
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "lock", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "lock", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return client


@pytest.fixture
def config(aws):
    return make_config(WEIGHTS, MIN_HOSTS)


def test_a_second_run_cannot_take_a_held_lease(dynamodb):
    first, second = RunLock(dynamodb, TABLE, "a"), RunLock(dynamodb, TABLE, "b")
    assert first.acquire(NOW)
    assert not second.acquire(NOW + timedelta(seconds=30))
    first.release()
    assert second.acquire(NOW + timedelta(seconds=31))


def test_a_lease_whose_run_was_killed_ends_before_the_next_scheduled_run(dynamodb):
    assert LEASE_SECONDS < 60
    assert RunLock(dynamodb, TABLE, "killed").acquire(NOW)  # never released
    assert not RunLock(dynamodb, TABLE, "early").acquire(NOW + timedelta(seconds=LEASE_SECONDS - 1))
    assert RunLock(dynamodb, TABLE, "next minute").acquire(NOW + timedelta(seconds=60))


def test_a_late_release_does_not_free_another_runs_lease(dynamodb):
    slow = RunLock(dynamodb, TABLE, "slow")
    assert slow.acquire(NOW)
    later = RunLock(dynamodb, TABLE, "later")
    assert later.acquire(NOW + timedelta(seconds=LEASE_SECONDS))
    slow.release()  # its lease ran out and is the later run's now
    assert not RunLock(dynamodb, TABLE, "third").acquire(NOW + timedelta(seconds=LEASE_SECONDS + 1))


def test_the_handler_skips_a_minute_another_run_holds(config, dynamodb, monkeypatch):
    monkeypatch.setenv("ORCHESTRATOR_CONFIG", config.to_json())
    monkeypatch.setenv("ORCHESTRATOR_LOCK_TABLE", TABLE)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "kit/Routing")
    lambda_handler._boto3_client.cache_clear()
    try:
        run = START
        publish_for_run(run, dict.fromkeys(("us-east-1", "us-west-2", "us-east-2"), HEALTHY))
        holder = RunLock(dynamodb, TABLE, "the other run")
        assert holder.acquire(run)  # the handler's clock is the event's (conftest.py)
        skipped = lambda_handler.handler(event(run), Context())
        assert skipped["weights"] is None and "run lock" in skipped["reason"]
        assert weights_in_route53(config) == {}  # nothing written while another run held the lease
        holder.release()
        decided = lambda_handler.handler(event(run), Context())
        assert decided["weights"] == weights_in_route53(config) != {}
        # The run gave its lease back: the next one takes it at once.
        assert RunLock(dynamodb, TABLE, "next").acquire(run + timedelta(seconds=10))
    finally:
        lambda_handler._boto3_client.cache_clear()
