"""The clock and the remembered runs: events ahead of the clock, the weights a minute followed, and a region
handed over when its number of cells changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orchestrator.routing.history import ahead_of_clock, legacy_weights, starting_weights, weights_followed

NOW = datetime(2027, 7, 8, 12, 0, 30, tzinfo=UTC)


def test_only_a_time_more_than_a_minute_ahead_is_refused():
    assert ahead_of_clock(NOW, "2027-07-08T12:01:00Z") is None  # EventBridge's own minute, a little early
    assert ahead_of_clock(NOW, "2027-07-08T13:00:00Z") == 3570
    assert ahead_of_clock(NOW, None) is None


def test_the_weights_followed_are_the_newest_decided_at_or_before_the_minute():
    decisions = [
        {"time": "2027-07-08T11:57:00Z", "weights": {"a": 10, "b": 90}},
        {"time": "2027-07-08T11:58:00Z", "weights": {"a": 20, "b": 80}},
        {"time": "2027-07-08T11:59:00Z", "weights": {"a": 30}},
    ]
    minute = datetime(2027, 7, 8, 11, 58, tzinfo=UTC)
    assert weights_followed(decisions, minute, {"a": 50, "b": 50}) == {"a": 20, "b": 80}
    assert weights_followed(decisions, minute + timedelta(minutes=5), {"a": 50, "b": 50}) == {
        "a": 30,
        "b": 50,
    }
    assert weights_followed(decisions, minute - timedelta(hours=1), {"a": 50}) == {"a": 50}
    assert weights_followed(decisions, None, {"a": 50}) == {"a": 50}


def test_a_region_split_into_cells_starts_them_at_its_own_weight_not_on_top_of_it():
    """On main the old record kept its weight while the cells' records were created with theirs: the
    region's DNS share rose from 48% to 65% for ten minutes."""
    initial = {"us-east-1/1": 25, "us-east-1/2": 25, "us-west-2": 30, "us-east-2": 20}
    existing = {"us-west-2": 30, "us-east-2": 22}
    legacy = {"us-east-1": 48}
    started = starting_weights(initial, existing, legacy)
    assert started == {"us-east-1/1": 24, "us-east-1/2": 24, "us-west-2": 30, "us-east-2": 22}
    configured = {name: name.split("/")[0] for name in initial}
    # One cell's record exists, the other's endpoint is not published yet: the old record keeps its share.
    assert legacy_weights(legacy, configured, started, {"us-east-1/1", "us-west-2", "us-east-2"}) == {
        "us-east-1": 24
    }
    # Both created: the old record is out, and the region's total never rose above 48.
    assert legacy_weights(legacy, configured, started, set(initial)) == {"us-east-1": 0}


def test_cells_merged_back_into_one_record_hand_over_the_same_way():
    initial = {"us-east-1": 50, "us-west-2": 30}
    legacy = {"us-east-1/1": 20, "us-east-1/2": 26}
    started = starting_weights(initial, {"us-west-2": 30}, legacy)
    assert started["us-east-1"] == 46
    configured = {"us-east-1": "us-east-1", "us-west-2": "us-west-2"}
    assert legacy_weights(legacy, configured, started, {"us-west-2"}) == {
        "us-east-1/1": 20,
        "us-east-1/2": 26,
    }
    assert legacy_weights(legacy, configured, started, {"us-east-1", "us-west-2"}) == {
        "us-east-1/1": 0,
        "us-east-1/2": 0,
    }


def test_a_region_that_left_config_is_not_handed_over():
    assert (
        legacy_weights({"eu-west-1": 30}, {"us-east-1": "us-east-1"}, {"us-east-1": 50}, {"us-east-1"}) == {}
    )
