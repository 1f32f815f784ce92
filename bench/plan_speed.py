"""Benchmark: the capacity planner at the published fleet's scale. Plans bench/scale-test-forecast.yaml (a
synthetic 48,000 requests/s over three regions, surviving a region's loss: about 100,000 Neuron chips) on
the default config, as `make plan` does (ranges, seeds and the region-loss premium included), on one core.
Prints each round, the plan, and the median of the rounds; with --direct also the direct search (every
region searched on its own, the fast path's check) once, and the two plans' hosts side by side.

Each round also runs the reference loop beside the plan: the least a request-level simulation does, over
as many requests as the plan simulated (each request picks the host with the fewest outstanding requests
among the slice's hosts, pushes its completion on a heap, and the completions due are popped). The ratio of
the plan's CPU time to the loop's is this machine's speed taken out: the planner's cost per simulated
request, in units of the cheapest one Python can do.

    .venv/bin/python bench/plan_speed.py [--rounds N] [--direct]
"""

from __future__ import annotations

import os

# One core: no library may spread work over threads (numpy's BLAS is not used, but make sure).
for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = "1"

import argparse  # noqa: E402
import heapq  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from planner.inputs import gather  # noqa: E402
from planner.plan import Knees, RegionPlan, Search, plan_event  # noqa: E402

FORECAST = REPO / "bench" / "scale-test-forecast.yaml"
CONFIG = REPO / "config" / "default.yaml"
GOAL_CPU_SECONDS = 10.0
GOAL_RATIO = 3.0  # the plan's CPU time over the reference loop's (issue 23)


def reference_loop(requests: int, hosts: int, seed: int = 7) -> float:
    """CPU seconds of the reference loop over `requests` arrivals at `hosts` hosts (see the docstring)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / hosts, requests)).tolist()
    work = rng.exponential(0.9, requests).tolist()  # busy ~90%, as the slice near its knee
    outstanding = [0] * hosts
    due: list[tuple[float, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    start = time.process_time()
    for now, seconds in zip(arrival, work, strict=True):
        while due and due[0][0] <= now:
            outstanding[pop(due)[1]] -= 1
        host = outstanding.index(min(outstanding))
        outstanding[host] += 1
        push(due, (now + seconds, host))
    return time.process_time() - start


def timed(inputs, search: Search) -> tuple[list[RegionPlan], Knees, float, float]:
    runs = Knees()
    wall, cpu = time.perf_counter(), time.process_time()
    plans = plan_event(inputs, search, knees=runs)
    return plans, runs, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--direct", action="store_true", help="also time the direct search once")
    args = parser.parse_args()
    inputs = gather(FORECAST, CONFIG)
    search = Search(slo_ms=inputs.forecast.slo.ttft_p99_ms)
    walls, cpus, ratios = [], [], []
    for round_number in range(1, args.rounds + 1):
        plans, runs, wall, cpu = timed(inputs, search)
        reference = reference_loop(runs.simulated, search.slice_hosts)
        walls.append(wall)
        cpus.append(cpu)
        ratios.append(cpu / reference)
        print(
            f"round {round_number}: {wall:.1f} s wall, {cpu:.1f} s CPU, reference loop {reference:.2f} s CPU "
            f"({cpu / reference:.2f}x), load average {os.getloadavg()[0]:.1f}"
        )
    print()
    for plan in plans:
        hosts = " + ".join(f"{fleet.hosts} {fleet.instance_type}" for fleet in plan.fleets)
        print(
            f"{plan.region}: {hosts} = {sum(f.chips for f in plan.fleets):,} chips for "
            f"{plan.design.rate:,.0f} req/s ({plan.design.reason}); SLO crossed at {plan.sized.knee:,.0f} "
            f"req/s; p99 TTFT {plan.sized.p99_ttft_ms:.0f} ms over the hour at the knee"
        )
    chips = sum(fleet.chips for plan in plans for fleet in plan.fleets)
    print(
        f"\n{chips:,} chips in {len(plans)} regions: median {statistics.median(walls):.1f} s wall, "
        f"{statistics.median(cpus):.1f} s CPU over {args.rounds} rounds (goal: under {GOAL_CPU_SECONDS:g} s "
        f"CPU on one core); {runs.simulations} runs, {runs.simulated:,} simulated requests per plan"
    )
    print(
        f"plan / reference loop: median {statistics.median(ratios):.2f}x "
        f"({min(ratios):.2f}-{max(ratios):.2f}; goal: at most {GOAL_RATIO:g}x)"
    )
    print(
        "CPU time is what one dedicated core takes (one process, no threads); wall time adds whatever else "
        "the machine runs"
    )
    if args.direct:
        direct, runs, wall, cpu = timed(inputs, replace(search, fast=False))
        print(f"\ndirect search: {wall:.1f} s wall, {cpu:.1f} s CPU, {runs.simulations} runs")
        for fast_plan, direct_plan in zip(plans, direct, strict=True):
            print(
                f"{fast_plan.region}: fast {fast_plan.hosts:,} hosts, direct {direct_plan.hosts:,} "
                f"({(fast_plan.hosts - direct_plan.hosts) / direct_plan.hosts:+.1%})"
            )


if __name__ == "__main__":
    main()
