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

from planner import simulate as simulator
from planner.demand import Demand
from planner.plan import fleet_counts, nominal_capacity, slice_of
from planner.simulate import HostGroup, draw_requests, simulate

# Of nominal capacity: coarse where latency is flat, fine near the cliff (a few percent below the bound).
GRID = (*(round(0.1 * step, 2) for step in range(1, 9)), 0.85, 0.88, 0.9, 0.92, 0.94, 0.96, 0.98, 1.0)
WINDOW_SECONDS = 600.0
SETTLE_SECONDS = 60.0  # the first requests of a run meet an empty fleet: not counted
SLICE_HOSTS = 12
SEED = 11


@dataclass(frozen=True)
class Curve:
    """One fleet mix's response to load; utilisation above the grid's end is overload."""

    utilisation: tuple[float, ...]
    ttft_p99_ms: tuple[float, ...]
    slow_share: tuple[float, ...]  # share of first tokens later than the threshold
    seconds_in_system: tuple[float, ...]  # mean, per request
    threshold_ms: float
    per_host_rps: dict[str, float]  # nominal requests/s of one host of each instance type

    def at(self, utilisation: float) -> tuple[float, float, float]:
        """(p99 TTFT ms, slow share, seconds in system) at a utilisation within the grid."""
        u = min(max(utilisation, 0.0), self.utilisation[-1])
        return (
            float(np.interp(u, self.utilisation, self.ttft_p99_ms)),
            float(np.interp(u, self.utilisation, self.slow_share)),
            float(np.interp(u, self.utilisation, self.seconds_in_system)),
        )


def per_host_rps(group: HostGroup, demand: Demand) -> float:
    return group.replicas * group.engine.requests_per_second(demand.prompt_mean, demand.output_mean)


def measure(
    groups: Sequence[HostGroup], rate: float, demand: Demand, threshold_ms: float, seconds: float, seed: int
) -> tuple[float, float, float]:
    """Direct simulation: (p99 TTFT ms, slow share, mean seconds in system) of `rate` on `groups`."""
    requests = draw_requests(
        rate,
        seconds + SETTLE_SECONDS,
        demand.prompt,
        demand.output,
        seed,
        demand.max_prompt,
        demand.max_output,
    )
    outcome = simulate(groups, requests)
    counted = requests.arrival >= SETTLE_SECONDS
    ttft = outcome.ttft[counted]
    if len(ttft) == 0:
        return 0.0, 0.0, 0.0
    in_system = outcome.finish[counted] - requests.arrival[counted]
    return (
        float(np.percentile(ttft, 99) * 1000),
        float(np.mean(ttft * 1000 > threshold_ms)),
        float(np.mean(in_system)),
    )


def derive(
    templates: Sequence[HostGroup], mix: Sequence[float], demand: Demand, threshold_ms: float
) -> Curve:
    part, _ = slice_of(
        [t.with_count(c) for t, c in zip(templates, fleet_counts(1000, mix), strict=True)],
        SLICE_HOSTS,
        demand,
    )
    capacity = nominal_capacity(part, demand)
    p99s, slows, times = [], [], []
    for u in GRID:
        p99, slow, in_system = measure(part, u * capacity, demand, threshold_ms, WINDOW_SECONDS, SEED)
        p99s.append(p99)
        slows.append(slow)
        times.append(in_system)
    return Curve(
        GRID,
        tuple(p99s),
        tuple(slows),
        tuple(times),
        threshold_ms,
        {t.instance_type: per_host_rps(t, demand) for t in templates},
    )


def _key(templates: Sequence[HostGroup], mix: Sequence[float], demand: Demand, threshold_ms: float) -> str:
    digest = hashlib.sha256()
    digest.update(inspect.getsource(simulator).encode())
    digest.update(inspect.getsource(measure).encode())
    parts = [repr(t) for t in templates] + [repr(tuple(mix)), repr(demand), repr(threshold_ms)]
    parts += [repr(GRID), repr((WINDOW_SECONDS, SETTLE_SECONDS, SLICE_HOSTS, SEED))]
    digest.update("|".join(parts).encode())
    return digest.hexdigest()[:16]


def cached_curve(
    templates: Sequence[HostGroup], mix: Sequence[float], demand: Demand, threshold_ms: float, cache: Path
) -> Curve:
    path = cache / f"curve-{_key(templates, mix, demand, threshold_ms)}.json"
    if path.is_file():
        data = json.loads(path.read_text())
        return Curve(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
    curve = derive(templates, mix, demand, threshold_ms)
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(curve)))
    return curve
