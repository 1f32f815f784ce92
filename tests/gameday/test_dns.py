"""Route 53's weighted answers with health checks, and clients lagging behind them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gameday.dns import Clients, answer_shares

REGIONS = ("us-east-1", "us-west-2", "us-east-2")


@given(
    st.fixed_dictionaries({r: st.integers(0, 255) for r in REGIONS}),
    st.fixed_dictionaries({r: st.booleans() for r in REGIONS}),
)
def test_answers_always_share_everything_and_only_healthy_regions_while_one_is(weights, healthy):
    shares = answer_shares(weights, healthy)
    assert sum(shares.values()) == pytest.approx(1.0)
    if any(healthy.values()) and any(weights[r] for r in REGIONS if healthy[r]):
        assert all(shares[r] == 0 for r in REGIONS if not healthy[r])


def test_every_check_failing_fails_open_by_the_weights():
    shares = answer_shares({"us-east-1": 50, "us-west-2": 30, "us-east-2": 20}, dict.fromkeys(REGIONS, False))
    assert shares == {"us-east-1": 0.5, "us-west-2": 0.3, "us-east-2": 0.2}


def test_clients_follow_within_the_ttl_but_stale_resolvers_lag():
    clients = Clients({"us-east-1": 0.5, "us-west-2": 0.5}, ttl_seconds=60, stale_share=0.05)
    answers = {"us-east-1": 0.0, "us-west-2": 1.0}
    after = [clients.follow(answers) for _ in range(5)][-1]
    assert after["us-east-1"] < 0.05  # most clients moved within minutes
    assert after["us-east-1"] > 0.02  # the stale share still arrives


def test_a_change_is_in_half_the_minutes_answers_then_in_all():
    from gameday.dns import propagated

    before = {"us-east-1": 0.5, "us-west-2": 0.5}
    after = {"us-east-1": 0.0, "us-west-2": 1.0}
    assert propagated(before, after) == {"us-east-1": 0.25, "us-west-2": 0.75}
    assert propagated(after, after) == after
