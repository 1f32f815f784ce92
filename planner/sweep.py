"""`python -m planner.sweep`: p99 time to first token against offered load for several sizes of the default
mixed fleet (2 inf2.48xlarge : 1 trn1.32xlarge), least outstanding requests beside round robin, as a PNG."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from planner.buckets import prefill_buckets
from planner.demand import Demand
from planner.plan import nominal_capacity
from planner.profiles import load_profiles
from planner.simulate import Balancer, HostGroup, LogNormal, draw_requests, simulate

DEFAULT_OUT = Path("docs/planner-ttft-vs-load.png")
FLEET_SIZES = (3, 6, 12)  # hosts, two inf2 to one trn1
LOADS = tuple(round(0.3 + 0.07 * step, 2) for step in range(12))  # share of the throughput bound
DEMAND = Demand(LogNormal.fit(900, 3000), LogNormal.fit(250, 900), 900, 250, 8191, 1024)


@dataclass(frozen=True)
class Curve:
    hosts: int
    balancer: Balancer
    offered: tuple[float, ...]  # requests per second
    p99_ttft_ms: tuple[float, ...]


def mixed_fleet(hosts: int, max_num_seqs: int = 32) -> list[HostGroup]:
    """The default fleets, with the container's prefill buckets as the planner simulates them."""
    profiles = load_profiles()
    buckets = prefill_buckets()
    inf2 = profiles[("inf2.48xlarge", 8)]
    trn1 = profiles[("trn1.32xlarge", 8)]
    trn1_hosts = max(1, hosts // 3)
    return [
        HostGroup(
            "inf2.48xlarge",
            inf2.engine(max_num_seqs, prefill_buckets=buckets),
            inf2.engine_replicas,
            hosts - trn1_hosts,
        ),
        HostGroup(
            "trn1.32xlarge",
            trn1.engine(max_num_seqs, prefill_buckets=buckets),
            trn1.engine_replicas,
            trn1_hosts,
        ),
    ]


def sweep(
    sizes: Sequence[int] = FLEET_SIZES,
    loads: Sequence[float] = LOADS,
    seconds: float = 600.0,
    seed: int = 7,
    on_point: Callable[[], None] | None = None,
) -> list[Curve]:
    curves = []
    for hosts in sizes:
        groups = mixed_fleet(hosts)
        bound = nominal_capacity(groups, DEMAND)
        offered = tuple(bound * load for load in loads)
        for balancer in Balancer:
            p99s = []
            for rate in offered:
                requests = draw_requests(rate, seconds, DEMAND.prompt, DEMAND.output, seed, 8191, 1024)
                p99s.append(simulate(groups, requests, balancer).p99_ttft_ms())
                if on_point:
                    on_point()
            curves.append(Curve(hosts, balancer, offered, tuple(p99s)))
    return curves


def plot(curves: Sequence[Curve], out: Path, slo_ms: float = 1000.0) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    titles = {Balancer.LEAST_OUTSTANDING: "least outstanding requests", Balancer.ROUND_ROBIN: "round robin"}
    for axis, balancer in zip(axes, Balancer, strict=True):
        for curve in (c for c in curves if c.balancer is balancer):
            axis.plot(
                curve.offered, curve.p99_ttft_ms, marker="o", markersize=3, label=f"{curve.hosts} hosts"
            )
        axis.axhline(slo_ms, color="grey", linestyle="--", linewidth=1, label=f"SLO {slo_ms:g} ms")
        axis.set_yscale("log")
        axis.set_title(titles[balancer])
        axis.set_xlabel("offered load (requests/s)")
        axis.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("p99 time to first token (ms)")
    axes[0].legend()
    figure.suptitle(
        "Mixed fleet, 2 inf2.48xlarge : 1 trn1.32xlarge, TP 8, continuous batching, prefill buckets"
    )
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)


def main(argv: list[str]) -> int:
    from rich.progress import Progress

    parser = argparse.ArgumentParser(prog="python -m planner.sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seconds", type=float, default=600.0, help="simulated time per point")
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        print("sweep error: --seconds must be positive", file=sys.stderr)
        return 2
    points = len(FLEET_SIZES) * len(Balancer) * len(LOADS)
    with Progress(transient=True) as progress:
        task = progress.add_task("p99 TTFT against load", total=points)
        curves = sweep(seconds=args.seconds, on_point=lambda: progress.advance(task))
    plot(curves, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
