"""Benchmark: the capacity planner at the reference system's scale. Plans bench/reference-forecast.yaml
(three regions, surviving a region's loss, about 80,000 Neuron chips) on the default config, each region's
chosen fleet simulated over the full peak hour, on one core. Prints per region and the median of the rounds.

    .venv/bin/python bench/plan_speed.py [--rounds N]
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
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from planner.inputs import gather  # noqa: E402
from planner.plan import Search, plan_event  # noqa: E402

FORECAST = REPO / "bench" / "reference-forecast.yaml"
CONFIG = REPO / "config" / "default.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    inputs = gather(FORECAST, CONFIG)
    search = Search(slo_ms=inputs.forecast.slo.ttft_p99_ms)
    walls, cpus = [], []
    for round_number in range(1, args.rounds + 1):
        wall, cpu = time.perf_counter(), time.process_time()
        plans = plan_event(inputs, search)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        print(f"round {round_number}: {walls[-1]:.1f} s wall, {cpus[-1]:.1f} s CPU")
    print()
    for plan in plans:
        hosts = " + ".join(f"{fleet.hosts} {fleet.instance_type}" for fleet in plan.fleets)
        full_hour = plan.design.rate * search.verify_seconds
        print(
            f"{plan.region}: {hosts} = {sum(f.chips for f in plan.fleets):,} chips for "
            f"{plan.design.rate:,.0f} req/s ({plan.design.reason}); p99 TTFT {plan.sized.p99_ttft_ms:.0f} ms "
            f"over the hour; slice {plan.sized.slice_counts} hosts; {plan.sized.simulations} runs, "
            f"{plan.sized.simulated_requests:,} requests simulated of {full_hour:,.0f} in the region's hour"
        )
    chips = sum(fleet.chips for plan in plans for fleet in plan.fleets)
    print(
        f"\n{chips:,} chips in 3 regions: median {statistics.median(walls):.1f} s wall, "
        f"{statistics.median(cpus):.1f} s CPU over {args.rounds} rounds (goal: under 60 s on one core)"
    )
    print(
        "CPU time is what one dedicated core takes (one process, no threads); wall time adds whatever else "
        "the machine runs"
    )


if __name__ == "__main__":
    main()
