"""Benchmark: the capacity planner at the published fleet's scale. Plans bench/scale-test-forecast.yaml (a
synthetic 48,000 requests/s over three regions, surviving a region's loss: about 100,000 Neuron chips) on
the default config, as `make plan` does (ranges, seeds and the region-loss premium included), on one core.
Prints each round, the plan, and the median of the rounds; with --direct also the direct search (every
region searched on its own, the fast path's check) once, and the two plans' hosts side by side.

    .venv/bin/python bench/plan_speed.py [--rounds N] [--direct]
"""

from __future__ import annotations

import os

# One core: no library may spread work over threads (numpy's BLAS is not used, but make sure).
for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from planner.inputs import gather  # noqa: E402
from planner.plan import Knees, RegionPlan, Search, plan_event  # noqa: E402

FORECAST = REPO / "bench" / "scale-test-forecast.yaml"
CONFIG = REPO / "config" / "default.yaml"
GOAL_CPU_SECONDS = 10.0


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
    walls, cpus = [], []
    for round_number in range(1, args.rounds + 1):
        plans, runs, wall, cpu = timed(inputs, search)
        walls.append(wall)
        cpus.append(cpu)
        print(
            f"round {round_number}: {wall:.1f} s wall, {cpu:.1f} s CPU, load average {os.getloadavg()[0]:.1f}"
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
