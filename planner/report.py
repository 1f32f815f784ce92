"""Region plans -> the table `make plan` prints: hosts, headroom and cost per region and fleet."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from planner.plan import RegionPlan


def plan_table(plans: Sequence[RegionPlan], slo_ms: float, currency: str) -> Table:
    table = Table(title=f"Event fleet per region (p99 TTFT SLO {slo_ms:g} ms)")
    for header in ("region", "fleet", "hosts (min)", "max", "chips"):
        table.add_column(header, justify="left" if header in ("region", "fleet") else "right")
    for header in ("peak req/s", "sized for", "headroom", "p99 TTFT", f"{currency}/hour"):
        table.add_column(header, justify="right")
    for plan in plans:
        for index, fleet in enumerate(plan.fleets):
            first = index == 0
            table.add_row(
                plan.region if first else "",
                fleet.instance_type,
                f"{fleet.hosts:,}",
                f"{fleet.max_hosts:,}",
                f"{fleet.chips:,}",
                f"{plan.peak:,.0f}" if first else "",
                f"{plan.design.rate:,.0f} ({plan.design.reason})" if first else "",
                f"{plan.headroom:+.0%}" if first else "",
                f"{plan.sized.p99_ttft_ms:,.0f} ms" if first else "",
                f"{fleet.cost_per_hour:,.2f}",
            )
        table.add_section()
    table.add_row(
        "total",
        "",
        f"{sum(f.hosts for p in plans for f in p.fleets):,}",
        f"{sum(f.max_hosts for p in plans for f in p.fleets):,}",
        f"{sum(f.chips for p in plans for f in p.fleets):,}",
        f"{sum(p.peak for p in plans):,.0f}",
        "",
        "",
        "",
        f"{sum(p.cost_per_hour for p in plans):,.2f}",
    )
    return table
