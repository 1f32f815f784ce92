"""Region plans -> what `make plan` prints: the fleets with their host and cost ranges, the regions with
their margins to the SLO in normal operation and after a region's loss, and the lines that explain them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich.table import Table

from planner.forecast import Forecast
from planner.plan import FleetPlan, RegionPlan, Search


def _span(low: float, high: float) -> str:
    return f"{low:,.0f}" if round(low) == round(high) else f"{low:,.0f}-{high:,.0f}"


def _margin(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}"


def fleet_table(plans: Sequence[RegionPlan], slo_ms: float, currency: str) -> Table:
    """Per fleet: the hosts to order (and their range over the profile's uncertainty), the event's max,
    chips, cost per hour and per million tokens at the peak."""
    table = Table(title=f"Event fleet per region (p99 TTFT SLO {slo_ms:g} ms)")
    for header in ("region", "fleet"):
        table.add_column(header, no_wrap=True)
    for header in (
        "hosts (min)",
        "range",
        "max",
        "chips",
        f"{currency}/hour",
        "range",
        f"{currency}/M tokens (all / output)",
        "region hosts across seeds",
    ):
        table.add_column(header, justify="right")
    for plan in plans:
        seeds = plan.seed_hosts
        for index, fleet in enumerate(plan.fleets):
            low, high = fleet.hosts_range
            name = fleet.instance_type + (" (derived)" if fleet.derived_profile else "")
            table.add_row(
                plan.region if index == 0 else "",
                name,
                f"{fleet.hosts:,}",
                _span(low, high),
                f"{fleet.max_hosts:,}",
                f"{fleet.chips:,}",
                f"{fleet.cost_per_hour:,.2f}",
                _span(low * fleet.hourly_price, high * fleet.hourly_price),
                f"{plan.fleet_cost_per_million_tokens(fleet):,.3f} / "
                f"{plan.fleet_cost_per_million_tokens(fleet, output_only=True):,.3f}",
                (_span(min(seeds), max(seeds)) if seeds else "-") if index == 0 else "",
            )
        table.add_section()
    hours = sum(p.million_tokens_per_hour() for p in plans)
    output = sum(p.million_tokens_per_hour(output_only=True) for p in plans)
    cost = sum(p.cost_per_hour for p in plans)
    table.add_row(
        "total",
        "",
        f"{sum(p.hosts for p in plans):,}",
        _span(
            sum(f.hosts_range[0] for p in plans for f in p.fleets),
            sum(f.hosts_range[1] for p in plans for f in p.fleets),
        ),
        f"{sum(f.max_hosts for p in plans for f in p.fleets):,}",
        f"{sum(f.chips for p in plans for f in p.fleets):,}",
        f"{cost:,.2f}",
        _span(sum(p.cost_range[0] for p in plans), sum(p.cost_range[1] for p in plans)),
        f"{cost / hours:,.3f} / {cost / output:,.3f}" if hours and output else "-",
        "",
    )
    return table


def region_table(plans: Sequence[RegionPlan], slo_ms: float, currency: str) -> Table:
    """Per region: the load it is sized for, its p99 there, the load at which p99 crosses the SLO and the
    margin to it in normal operation and when the worst other region is lost."""
    table = Table(title="Margins to the SLO per region (requests/s)")
    table.add_column("region", no_wrap=True)
    for header in (
        "peak",
        "sized for",
        "as",
        "p99 TTFT",
        "SLO crossed at",
        "headroom normal",
        "region lost: load",
        "headroom region lost",
        f"{currency}/M tokens (all / output)",
    ):
        table.add_column(header, justify="right")
    for plan in plans:
        design = plan.design
        table.add_row(
            plan.region,
            f"{plan.peak:,.0f}",
            f"{design.rate:,.0f}",
            design.reason.replace(design.failover_reason, "failover")
            if design.failover_reason
            else design.reason,
            f"{plan.sized.p99_ttft_ms:,.0f} ms",
            f"{plan.sized.knee:,.0f}" if plan.sized.knee else "-",
            _margin(plan.normal_margin if plan.sized.knee else None),
            f"{design.failover_load:,.0f} ({design.failover_reason.split()[0]})"
            if design.failover_load
            else "-",
            _margin(plan.failover_margin),
            f"{plan.cost_per_million_tokens():,.3f} / {plan.cost_per_million_tokens(output_only=True):,.3f}",
        )
    return table


def notes(
    plans: Sequence[RegionPlan],
    slo_ms: float,
    currency: str,
    start: datetime,
    end: datetime,
    max_factor: float = 1.5,
) -> list[str]:
    """The lines under the tables: why p99 sits below the SLO, the basis of the cost and of the event's
    max, whose knee each region's margin rests on, the ranges, the event's cost, the premium for
    surviving a region's loss, speculative decoding's effect and the derived profiles."""
    lines = [
        f"p99 TTFT (over the full peak hour, at the load a region is sized for) sits below the {slo_ms:g} "
        "ms SLO, often well below, and still the margin is thin: continuous batching holds p99 nearly flat "
        "until the replicas are almost full, then it climbs steeply, so a few percent more load than 'SLO "
        "crossed at' breaks the SLO (the knee). The headroom columns are each region's distance to that "
        "load, in normal operation and after the worst region loss. `make plan-plot` draws the curve "
        "(docs/planner-ttft-vs-load.png).",
    ]
    lines += basis_lines(plans, currency, max_factor)
    hours = (end - start).total_seconds() / 3600
    cost = sum(p.cost_per_hour for p in plans)
    low = sum(p.cost_range[0] for p in plans)
    high = sum(p.cost_range[1] for p in plans)
    lines.append(
        f"Event cost over its {hours:g}-hour window at the minimum hosts: {cost * hours:,.0f} {currency} "
        f"({low * hours:,.0f}-{high * hours:,.0f} over the profiles' throughput range; pre-warm lead and "
        "managed scaling above the minimum not included)."
    )
    if any(p.hosts_without_failover for p in plans):
        without = sum(p.cost_without_failover if p.hosts_without_failover else p.cost_per_hour for p in plans)
        lines.append(
            f"Region-loss premium: {cost - without:,.2f} {currency}/hour ({(cost - without) / without:+.0%}) "
            "over a plan for each region's own peak plus headroom; "
            f"{(cost - without) * hours:,.0f} {currency} over the window."
        )
    lines += speed_lines(plans)
    lines.append(range_sources(plans))
    speculative = [(p, f) for p in plans for f in p.fleets if f.decode_speedup != 1.0]
    if speculative:
        parts = ", ".join(
            sorted(
                {
                    f"{f.instance_type} x{f.decode_speedup:.2f} at a full batch "
                    f"(x{f.decode_speedup_single:.2f} at batch 1)"
                    for _, f in speculative
                }
            )
        )
        saved = [
            f"{p.region} {p.hosts:,} instead of {p.hosts_without_speculative:,}"
            for p in plans
            if p.hosts_without_speculative
        ]
        lines.append(f"Speculative decoding (profile): decode {parts}; hosts {'; '.join(saved)}.")
    derived = sorted({f.instance_type for p in plans for f in p.fleets if f.derived_profile})
    if derived:
        lines.append(
            f"Derived profiles ({', '.join(derived)}): scaled per chip from a shipped profile, not measured; "
            "measure with `make bench-serving PROFILE_OUT=file` and pass `PROFILE=file`."
        )
    return lines


def basis_lines(plans: Sequence[RegionPlan], currency: str, max_factor: float) -> list[str]:
    """What the figures are measured against: the cost per million tokens at the peak, the event's max
    by rule, and the knee each region's "SLO crossed at" comes from (shared where regions are alike)."""
    lines = [
        f"Cost basis: {currency}/hour is the minimum fleet, held for the whole event; {currency}/M tokens "
        "divides it by the tokens served in an hour at the forecast's peak (normal operation), so it is the "
        "cost at the peak: averaged over an event whose traffic runs below its peak, the same hosts serve "
        "fewer tokens and a million of them costs more (twice as much at an average of half the peak).",
        f"Event max: {max_factor:g} x the minimum, rounded up (--max-factor), never below the config's max: "
        "room for managed scaling past the forecast, set by that rule, not simulated.",
    ]
    groups: dict[tuple[object, ...], list[RegionPlan]] = {}
    for plan in plans:
        if not plan.sized.slice_knee:
            continue
        shape = (
            tuple(f.instance_type for f in plan.fleets),
            plan.sized.slice_counts,
            plan.sized.slice_knee,
            plan.prompt_tokens,
            plan.output_tokens,
        )
        groups.setdefault(shape, []).append(plan)
    for (types, counts, knee, *_), alike in groups.items():
        hosts = " + ".join(f"{count} {kind}" for count, kind in zip(counts, types, strict=True))
        names = ", ".join(plan.region for plan in alike)
        lines.append(
            f"SLO crossed at ({names}): the p99 TTFT of a {hosts} slice crosses the SLO at "
            f"{knee:,.1f} requests/s (bisected over ten-minute windows holding at least "
            f"{Search.window_requests:,} requests, confirmed over the peak hour, the same in the fast path "
            "and --direct); each region's figure is that knee over the slice's "
            "share of the region's capacity"
            + (
                ", so regions sized to the same design rule show the same headroom by construction"
                if len(alike) > 1
                else ""
            )
            + "."
        )
    return lines


def speed_lines(plans: Sequence[RegionPlan]) -> list[str]:
    """Per instance type: where its speed comes from (a published benchmark, an estimate and why, or a
    measurement) and the hosts the order needs at the profile's low and at its high throughput figure."""
    kinds: dict[str, list[FleetPlan]] = {}
    for plan in plans:
        for fleet in plan.fleets:
            kinds.setdefault(fleet.instance_type, []).append(fleet)
    lines = []
    for kind, fleets in kinds.items():
        first = fleets[0]
        low, high = first.speed_range
        hosts = sum(f.hosts for f in fleets)
        at_low = sum(f.hosts_range[1] for f in fleets)  # the low throughput needs the most hosts
        at_high = sum(f.hosts_range[0] for f in fleets)
        lines.append(
            f"Speed of {kind}: {first.speed_source or 'not given'}. "
            f"Hosts: {hosts:,} at the profile's figures, {at_low:,} at its low end (x{low:g} throughput), "
            f"{at_high:,} at its high end (x{high:g})."
        )
    return lines


def range_sources(plans: Sequence[RegionPlan], window_requests: int = Search.window_requests) -> str:
    """How much of the hosts' range comes from the profiles' low and high figures and how much from the
    random seeds, each as the order's total and its distance from the plan."""
    hosts = sum(p.hosts for p in plans)
    low = sum(f.hosts_range[0] for p in plans for f in p.fleets)
    high = sum(f.hosts_range[1] for p in plans for f in p.fleets)
    seed_low = sum(min(p.seed_hosts) if p.seed_hosts else p.hosts for p in plans)
    seed_high = sum(max(p.seed_hosts) if p.seed_hosts else p.hosts for p in plans)

    def share(value: int) -> str:
        return f"{value / hosts - 1:+.0%}" if hosts else "-"

    seeds = max(len(p.seed_hosts) for p in plans) if plans else 0
    return (
        f"Where the range comes from: the profiles' high and low throughput figures put the order at "
        f"{low:,}-{high:,} hosts ({share(low)} / {share(high)} of {hosts:,}); {seeds} random seeds at the "
        f"plan's profile put it at {seed_low:,}-{seed_high:,} ({share(seed_low)} / {share(seed_high)}), "
        "the search's own precision. The profiles' figures are sized as the plan is (windows of at least "
        f"{window_requests:,} requests, then the full hour); the seeds in the same windows, scaled to the "
        "plan's fleet by the search at its own seed."
    )


def case_study_lines(forecast: Forecast, plans: Sequence[RegionPlan]) -> list[str]:
    """For a forecast that restates a published deployment: the tokens per second per chip it implies,
    against what the profiles give per chip in this plan, and why the two differ."""
    if forecast.published is None or not plans:
        return []
    tokens = sum(p.peak * (p.prompt_tokens + p.output_tokens) for p in plans)  # per second
    chips = sum(f.chips for p in plans for f in p.fleets)
    knee_tokens = sum(p.sized.knee * (p.prompt_tokens + p.output_tokens) for p in plans)
    published = forecast.published
    implied = tokens / published.chips
    return [
        f"Published case ({published.source}): {tokens * 60:,.0f} tokens a minute on {published.chips:,} "
        f"chips is {implied:,.2f} tokens/s per chip. This plan serves it on {chips:,} chips, and the "
        f"profiles give {knee_tokens / chips if chips else 0:,.0f} tokens/s per chip at the SLO "
        f"({(knee_tokens / chips) / implied if chips and implied else 0:,.0f}x).",
        "Why they differ: the published post gives a fleet size and a token rate, not a per-chip "
        "throughput. Its chips served Rufus's own multi-billion-parameter model (its size is not given; "
        "a larger model than this kit's 8B needs more chips per replica), likely more than one model call "
        "per shopper question, capacity in every region at once with failover spare, and hosts held for "
        "the whole event rather than sized to its peak minute; this plan counts one 8B model at each "
        "region's peak. Plan with measured profiles, and read the published figure as a fleet size.",
    ]


def plan_table(plans: Sequence[RegionPlan], slo_ms: float, currency: str) -> Table:
    """The fleet table (kept for callers of the earlier single table)."""
    return fleet_table(plans, slo_ms, currency)
