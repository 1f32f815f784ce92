"""Per-fleet latency and throughput against load, derived once from the planner's simulator.

Simulating every request of a day is too slow for a minute-by-minute loop, so each region's fleet mix is
simulated here at a grid of utilisations (offered rate over the fleet's nominal capacity, the planner's
full-batch throughput bound): p99 and the slow share of time to first token, and the mean time a request
spends in the system (Little's law turns it into requests in flight). The planner's slice (a few hosts
with the mix kept) stands for the fleet, as in the planner, so pooling in larger fleets makes the real
figures a little better than these. The curves are cached by the digest of everything they depend on.
tests/gameday/test_serving.py checks them against a direct simulation of a whole fleet."""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from planner import event_loop
from planner import simulate as simulator
from planner.demand import Demand
from planner.plan import fleet_counts, nominal_capacity, slice_of
from planner.simulate import HostGroup, draw_requests, simulate

# Of nominal capacity: coarse where latency is flat, fine near the cliff (a few percent below the bound).
GRID = (*(round(0.1 * step, 2) for step in range(1, 9)), 0.85, 0.88, 0.9, 0.92, 0.94, 0.96, 0.98, 1.0)
# Offered beyond the bound: the replicas' admission bound sheds the excess at the edge, and what they admit
# is served at the rate and latency these measure. Past the last point the fleet serves what it did there.
OVERLOAD_GRID = (1.1, 1.25, 1.5, 2.0, 3.0)
# Engine speeds the slow share is measured for. Down to 0.2: on the published profiles a fleet's p99 first
# token at half load is about 240 ms, so only engines below a quarter of their speed miss a 1 s objective
# there (tests/gameday/test_serving.py); below the first speed the curve reads the first speed's figures.
SPEEDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
WINDOW_SECONDS = 600.0
SETTLE_SECONDS = 60.0  # the first requests of a run meet an empty fleet: not counted
SLICE_HOSTS = 12
SEED = 11


@dataclass(frozen=True)
class Curve:
    """One fleet mix's response to load, offered over its nominal capacity (the full-batch throughput
    bound), up to well past it: the figures are of the requests the replicas admit (their admission bound,
    `max_queued`, sheds the rest at once), `admitted_share` the share they admit."""

    utilisation: tuple[float, ...]
    ttft_p99_ms: tuple[float, ...]
    slow_share: tuple[float, ...]  # share of first tokens later than the threshold
    seconds_in_system: tuple[float, ...]  # mean, per request
    threshold_ms: float
    per_host_rps: dict[str, float]  # nominal requests/s of one host of each instance type
    admitted_share: tuple[float, ...] = ()  # of the offered, the share admitted (the rest shed at the edge)
    max_queued: int | None = None  # the replicas' admission bound the figures were measured with
    # Per grid point, the share of first tokens later than threshold x each of SPEEDS: engines at speed s
    # stretch every time by 1/s, so their slow share is the one measured at threshold x s.
    slow_by_speed: tuple[tuple[float, ...], ...] = ()
    queue_wait_ms: float | None = None  # the replicas' queue-wait budget the figures were measured with

    def slow_at_speed(self, utilisation: float, speed: float) -> float | None:
        """The slow share at a utilisation on engines at `speed` of their nominal speed (None if the curve
        has no such figures)."""
        if not self.slow_by_speed:
            return None
        u = min(max(utilisation, 0.0), self.utilisation[-1])
        at_u = [
            float(np.interp(u, self.utilisation, column)) for column in zip(*self.slow_by_speed, strict=True)
        ]
        return float(np.interp(max(speed, SPEEDS[0]), SPEEDS, at_u))

    def at(self, utilisation: float) -> tuple[float, float, float]:
        """(p99 TTFT ms, slow share, seconds in system) of the admitted requests at a utilisation, held at
        the grid's last point beyond it."""
        u = min(max(utilisation, 0.0), self.utilisation[-1])
        return (
            float(np.interp(u, self.utilisation, self.ttft_p99_ms)),
            float(np.interp(u, self.utilisation, self.slow_share)),
            float(np.interp(u, self.utilisation, self.seconds_in_system)),
        )

    @property
    def servable(self) -> float:
        """The most this mix serves within the first-token objective, as a share of its nominal capacity:
        the best of utilisation x admitted x (1 - slow share) over the grid. The nominal (full-batch) bound
        is not reachable within an objective with requests arriving at random: a fleet kept at it queues
        without end, and one that sheds at the edge to keep its queue short leaves a slot idle now and
        then. This is the fleet's capacity in the goodput figure (docs/gameday.md, "Verdict")."""
        shares = self.admitted_share or (1.0,) * len(self.utilisation)
        return max(
            u * admitted * (1.0 - slow)
            for u, admitted, slow in zip(self.utilisation, shares, self.slow_share, strict=True)
        )

    def admitted(self, utilisation: float) -> float:
        """The share of `utilisation` x capacity the replicas admit; past the grid's end they admit what
        they did there (their throughput does not grow with the offered load)."""
        if not self.admitted_share:
            return 1.0
        u = max(utilisation, 0.0)
        if u > self.utilisation[-1]:
            return self.admitted_share[-1] * self.utilisation[-1] / u
        return float(np.interp(u, self.utilisation, self.admitted_share))

    def slow_at_p99(self, p99_ms: float) -> float:
        """The slow share where the curve's p99 is `p99_ms` (the curve's own shape: a slower engine's
        stretched latencies read as the load at which this fleet's were that long)."""
        p99s = np.maximum.accumulate(np.asarray(self.ttft_p99_ms))
        if p99_ms >= p99s[-1]:
            return 1.0 if p99_ms >= OVERLOAD_P99_MS else float(self.slow_share[-1])
        return float(np.interp(p99_ms, p99s, self.slow_share))


OVERLOAD_P99_MS = 30_000.0  # the twin's figure for a first token beyond the throughput bound


def per_host_rps(group: HostGroup, demand: Demand) -> float:
    # A prompt costs its bucket's prefill on an engine compiled with buckets (planner.plan.Demand).
    prefill = demand.prefill_mean(group.engine)
    return group.replicas * group.engine.requests_per_second(prefill, demand.output_mean)


def measure(
    groups: Sequence[HostGroup],
    rate: float,
    demand: Demand,
    threshold_ms: float,
    seconds: float,
    seed: int,
    max_queued: int | None = None,
    queue_wait_s: float | None = None,
) -> tuple[float, float, float, float]:
    """Direct simulation: (p99 TTFT ms, slow share, mean seconds in system) of the requests of `rate` on
    `groups` that the replicas admit (`max_queued`: their admission bound), and the share admitted."""
    figures = measure_detail(groups, rate, demand, threshold_ms, seconds, seed, max_queued, queue_wait_s)
    return figures[:4]


def measure_detail(
    groups: Sequence[HostGroup],
    rate: float,
    demand: Demand,
    threshold_ms: float,
    seconds: float,
    seed: int,
    max_queued: int | None = None,
    queue_wait_s: float | None = None,
) -> tuple[float, float, float, float, tuple[float, ...]]:
    """`measure`'s figures and the slow share at threshold x each of SPEEDS."""
    requests = draw_requests(
        rate,
        seconds + SETTLE_SECONDS,
        demand.prompt,
        demand.output,
        seed,
        demand.max_prompt,
        demand.max_output,
    )
    outcome = simulate(groups, requests, max_queued=max_queued, queue_wait_s=queue_wait_s)
    counted = requests.arrival >= SETTLE_SECONDS
    admitted = outcome.admitted[counted]
    ttft = outcome.ttft[counted][admitted]
    if len(ttft) == 0:
        return 0.0, 0.0, 0.0, 1.0 if not len(admitted) else 0.0, (0.0,) * len(SPEEDS)
    in_system = outcome.finish[counted][admitted] - requests.arrival[counted][admitted]
    return (
        float(np.percentile(ttft, 99) * 1000),
        float(np.mean(ttft * 1000 > threshold_ms)),
        float(np.mean(in_system)),
        float(np.mean(admitted)),
        tuple(float(np.mean(ttft * 1000 > threshold_ms * speed)) for speed in SPEEDS),
    )


def derive(
    templates: Sequence[HostGroup],
    mix: Sequence[float],
    demand: Demand,
    threshold_ms: float,
    max_queued: int | None = None,
    queue_wait_s: float | None = None,
) -> Curve:
    part, _ = slice_of(
        [t.with_count(c) for t, c in zip(templates, fleet_counts(1000, mix), strict=True)],
        SLICE_HOSTS,
        demand,
    )
    capacity = nominal_capacity(part, demand)
    # Without an admission bound the queue grows without end past the bound: no point measuring there.
    grid = GRID if max_queued is None and queue_wait_s is None else GRID + OVERLOAD_GRID
    p99s, slows, times, admitted, by_speed = [], [], [], [], []
    for u in grid:
        p99, slow, in_system, share, at_speeds = measure_detail(
            part, u * capacity, demand, threshold_ms, WINDOW_SECONDS, SEED, max_queued, queue_wait_s
        )
        p99s.append(p99)
        slows.append(slow)
        times.append(in_system)
        admitted.append(share)
        by_speed.append(at_speeds)
    return Curve(
        grid,
        tuple(p99s),
        tuple(slows),
        tuple(times),
        threshold_ms,
        {t.instance_type: per_host_rps(t, demand) for t in templates},
        tuple(admitted),
        max_queued,
        tuple(by_speed),
        None if queue_wait_s is None else queue_wait_s * 1000.0,
    )


def _key(
    templates: Sequence[HostGroup],
    mix: Sequence[float],
    demand: Demand,
    threshold_ms: float,
    max_queued: int | None,
    queue_wait_s: float | None = None,
) -> str:
    digest = hashlib.sha256()
    digest.update(inspect.getsource(simulator).encode())
    digest.update(inspect.getsource(event_loop).encode())  # the rules themselves live there
    digest.update(inspect.getsource(measure_detail).encode())
    digest.update(inspect.getsource(per_host_rps).encode())
    parts = [repr(t) for t in templates] + [repr(tuple(mix)), repr(demand), repr(threshold_ms)]
    parts += [
        repr(GRID),
        repr(OVERLOAD_GRID),
        repr(SPEEDS),
        repr((WINDOW_SECONDS, SETTLE_SECONDS, SLICE_HOSTS, SEED)),
    ]
    parts += [repr(max_queued), repr(queue_wait_s)]
    digest.update("|".join(parts).encode())
    return digest.hexdigest()[:16]


def cached_curve(
    templates: Sequence[HostGroup],
    mix: Sequence[float],
    demand: Demand,
    threshold_ms: float,
    cache: Path,
    max_queued: int | None = None,
    queue_wait_s: float | None = None,
) -> Curve:
    path = cache / f"curve-{_key(templates, mix, demand, threshold_ms, max_queued, queue_wait_s)}.json"
    if path.is_file():
        data = json.loads(path.read_text())
        if "slow_by_speed" in data:
            data["slow_by_speed"] = [tuple(row) for row in data["slow_by_speed"]]
        return Curve(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
    curve = derive(templates, mix, demand, threshold_ms, max_queued, queue_wait_s)
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(curve)))
    return curve
