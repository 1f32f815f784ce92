"""What a region's weight drew in the minute its signals are from, which the policy divides the weights
by: its request rate, not its requests in flight (which also grow with the time each request takes, so
the weights swung: the unplanned-surge game day); and the weights that minute's requests followed, those of
that minute and, through resolvers' caches, of the minutes before it."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.routing.cells import decide_cells
from orchestrator.routing.history import (
    PROPAGATED_SHARE,
    TTL_MINUTES,
    follow_kernel,
    weights_requests_followed,
)
from orchestrator.routing.policy import PolicyParams, RegionMemory, RegionSignals

START = datetime(2027, 7, 1, 17, 0, tzinfo=UTC)


def iso(minute: int) -> str:
    return (START + timedelta(minutes=minute)).isoformat()


def test_the_kernel_adds_up_to_one_and_most_requests_follow_the_minute_before():
    kernel = follow_kernel()
    assert sum(kernel) == pytest.approx(1.0)
    # Half the minute's answers still carry the old weights, and resolvers hold them a TTL.
    assert kernel[1] > kernel[0] > kernel[2] > kernel[3]


def test_steady_weights_are_followed_as_they_are_and_a_change_only_in_part():
    decisions = [{"time": iso(m), "weights": {"a": 20, "b": 80}} for m in range(5)]
    assert weights_requests_followed(decisions, START + timedelta(minutes=4), {"a": 0, "b": 0}) == (
        pytest.approx({"a": 20.0, "b": 80.0})
    )
    decisions.append({"time": iso(5), "weights": {"a": 40, "b": 60}})
    followed = weights_requests_followed(decisions, START + timedelta(minutes=5), {"a": 0, "b": 0})
    assert followed["a"] == pytest.approx(20 + 20 * follow_kernel()[0])
    # A minute older than every decision remembered takes the oldest one's weights, not today's.
    early = weights_requests_followed(decisions, START - timedelta(minutes=10), {"a": 0, "b": 0})
    assert early == pytest.approx({"a": 20.0, "b": 80.0})
    assert weights_requests_followed(decisions, None, {"a": 7}) == {"a": 7.0}


# Mean seconds a request spends in a fleet against its utilisation (the game day's curves for the
# prime-day fleets): Little's law makes requests in flight the rate times this, so in flight grows faster
# than the weight that draws it.
UTILISATION = (0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.94, 0.98, 1.0)
SECONDS = (1.9, 2.3, 3.0, 3.5, 4.1, 4.9, 5.5, 6.2, 6.9, 7.4, 7.5)
GROUPS = {"e1": ("e1/1", "e1/2"), "w2": ("w2",), "e2": ("e2",)}
SLOTS = {"e1/1": 180.0, "e1/2": 180.0, "w2": 360.0, "e2": 360.0}


def seconds_in_system(utilisation: float) -> float:
    points = list(zip(UTILISATION, SECONDS, strict=True))
    u = min(max(utilisation, UTILISATION[0]), UTILISATION[-1])
    for (u0, s0), (u1, s1) in itertools.pairwise(points):
        if u <= u1:
            return s0 + (s1 - s0) * (u - u0) / (u1 - u0)
    return SECONDS[-1]


def day(
    with_rates: bool,
    level: float = 0.85,
    runs: int = 150,
    speeds: dict[str, float] | None = None,
    sheds: list[dict[str, float]] | None = None,
) -> list[dict[str, int]]:
    """Demand at `level` of the slots, reaching each target as Route 53 and resolvers pass the weights on (a
    change in half of its minute's answers, cached answers expiring over a TTL); each reports its requests
    in flight (rate x seconds in system) and, `with_rates`, its request rate; the policy reads each minute 3
    minutes late, as on the game day. The weights in force each minute. A target in `speeds` runs its
    engines at that share of their speed: every request takes 1/speed as long, so its slots serve that
    share of the requests. `sheds` gets each minute's shed share per target."""
    speeds = speeds or {}
    params = PolicyParams()
    weights = {"e1/1": 25, "e1/2": 25, "w2": 30, "e2": 20}
    memory: dict[str, RegionMemory] = {}
    answers = {n: weights[n] / 100 for n in SLOTS}
    fresh = dict(answers)
    keep = math.exp(-1 / TTL_MINUTES)
    total_demand = level * sum(SLOTS.values())
    decided: list[dict[str, int]] = []
    observed: list[dict[str, RegionSignals]] = []
    for minute in range(runs):
        total = sum(weights.values())
        new = {n: weights[n] / total for n in SLOTS}
        served = {n: PROPAGATED_SHARE * new[n] + (1 - PROPAGATED_SHARE) * answers[n] for n in SLOTS}
        answers = new
        fresh = {n: fresh[n] + (1 - keep) * (served[n] - fresh[n]) for n in SLOTS}
        decided.append(dict(weights))
        signals = {}
        for n, slots in SLOTS.items():
            demand = total_demand * fresh[n]  # in slots' worth of requests at the fleet's bound
            speed = speeds.get(n, 1.0)
            bound = slots * speed
            kept = min(demand, bound)
            in_flight = kept * seconds_in_system(demand / bound) / SECONDS[-1] / speed
            shed = 1 - kept / demand if demand > bound else 0.0
            rate = demand if with_rates else None
            signals[n] = RegionSignals(
                0.002, 0.0, 10, 2, slots, in_flight, shed_share=shed, requests_per_second=rate
            )
        observed.append(signals)
        if sheds is not None:
            sheds.append({n: signal.shed_share for n, signal in signals.items()})
        read = minute - 3
        if read < 0:
            continue
        decisions = [{"time": iso(m), "weights": w} for m, w in enumerate(decided)][-8:]
        followed = weights_requests_followed(decisions, START + timedelta(minutes=read), weights)
        decision = decide_cells(params, 100, weights, observed[read], memory, GROUPS, followed=followed)
        weights, memory = decision.weights, decision.memory
    return decided


@pytest.mark.parametrize("level", [0.6, 0.85, 0.95])
def test_weights_measured_by_request_rate_settle(level):
    late = day(with_rates=True, level=level)[80:]
    for name in SLOTS:
        seen = [w[name] for w in late]
        assert max(seen) - min(seen) <= 1, (name, seen)
    # Even: each cell of e1 half of the other regions' weight (half their slots).
    assert abs(late[-1]["w2"] - 2 * late[-1]["e1/1"]) <= 2, late[-1]


@pytest.mark.parametrize("level", [0.6, 0.8])
def test_a_region_whose_engines_run_at_half_their_speed_is_given_what_it_can_serve(level):
    """e2's engines at half their speed: its slots and its slow share say nothing (the latter until it
    reaches its bound), but each of its requests takes twice as long as elsewhere. Weights by slots and
    request rate alone send it a third of the demand, past its bound at 0.8 of the slots; with the time in
    system against its rate (policy.slower_than_typical) the weights settle where it sheds nothing, and
    stay there."""
    sheds: list[dict[str, float]] = []
    late = day(with_rates=True, level=level, speeds={"e2": 0.5}, sheds=sheds)[80:]
    assert max(minute["e2"] for minute in sheds[80:]) == 0.0, "the slowed region shed"
    for name in SLOTS:
        seen = [w[name] for w in late]
        assert max(seen) - min(seen) <= 1, (name, seen)
    assert late[-1]["e2"] <= late[-1]["w2"] / 2 + 1  # slots alike, half the speed


def test_weights_measured_by_requests_in_flight_swing():
    """The same day measuring what a weight draws by requests in flight (the policy's measure before, and
    its fallback where request rates are not published): the weights swing by half and more."""
    late = day(with_rates=False)[80:]
    seen = [w["w2"] for w in late]
    assert max(seen) - min(seen) > 10, seen
