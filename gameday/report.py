"""What a game day prints: a table per minute (rich), or JSON lines; and a PNG of the day."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.table import Table

from gameday.loop import Minute
from gameday.scenario import Scenario
from gameday.verdict import Summary


def json_line(minute: Minute, cells: bool = False) -> str:
    return json.dumps(minute.public(cells), separators=(",", ":"))


def _weight(minute: Minute, region: str) -> str:
    """The region's weight, and its cells' for a region of several (`51=26+25`)."""
    cells = [row.weight for name, row in minute.cells.items() if name.startswith(f"{region}/")]
    weight = str(minute.regions[region].weight)
    return f"{weight}={'+'.join(map(str, cells))}" if cells else weight


def table(minutes: Sequence[Minute], out: IO[str]) -> None:
    console = Console(file=out, width=160)
    regions = list(minutes[0].regions) if minutes else []
    grid = Table(title="game day, minute by minute", show_lines=False)
    grid.add_column("min", justify="right")
    for region in regions:
        grid.add_column(f"{region}\noffered/served rps", justify="right")
        grid.add_column("w", justify="right")
        grid.add_column("hosts/tasks", justify="right")
        grid.add_column("p99 ms / err", justify="right")
    grid.add_column("events")
    for m in minutes:
        cells = [str(m.minute)]
        for region in regions:
            row = m.regions[region]
            style = "red" if row.error_share > 0.01 else ""
            cells += [
                f"[{style}]{row.offered_rps:.0f}/{row.served_rps:.0f}[/]"
                if style
                else f"{row.offered_rps:.0f}/{row.served_rps:.0f}",
                _weight(m, region),
                f"{row.hosts}/{row.tasks}",
                f"{row.ttft_p99_ms:.0f} / {row.error_share:.1%}",
            ]
        cells.append("; ".join(m.events)[:200])
        grid.add_row(*cells)
    console.print(grid)


def summary_text(
    summary: Summary, out: IO[str], profile: str = "nominal", orchestrator_on: bool = True
) -> None:
    console = Console(file=out, width=160)
    color = "green" if summary.verdict == "pass" else "red"
    console.print(
        f"serving curves: the {profile} end of the profiles' throughput range; "
        f"orchestrator {'on' if orchestrator_on else 'OFF'}"
    )
    console.print(f"verdict: [{color}]{summary.verdict}[/]  requests lost: {summary.requests_lost:,}")
    console.print(f"SLO minutes violated: {summary.slo_minutes_violated}")
    goodput = ", ".join(f"{name} {share:.2%}" for name, share in summary.goodput.items())
    console.print(f"goodput: {goodput}; Route 53 failed open in {summary.fail_open_minutes} minutes")
    if summary.counterfactual is not None:
        for measure, figures in summary.counterfactual.items():
            console.print(
                f"counterfactual {measure}: {figures['on']:,} with the orchestrator, "
                f"{figures['off']:,} without"
            )
    for violation in summary.violations:
        console.print(f"  - {violation}")


def plot(scenario: Scenario, minutes: Sequence[Minute], slo_ms: float, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    regions = list(minutes[0].regions)
    x = [m.minute for m in minutes]
    figure, axes = plt.subplots(4, 1, figsize=(11, 10), sharex=True)
    colors = dict(zip(regions, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    for region in regions:
        rows = [m.regions[region] for m in minutes]
        axes[0].plot(x, [r.offered_rps for r in rows], color=colors[region], label=f"{region} offered")
        axes[0].plot(
            x, [r.served_rps for r in rows], color=colors[region], linestyle="--", label=f"{region} served"
        )
        axes[1].plot(x, [r.weight for r in rows], color=colors[region], label=region)
        cells = [name for name in minutes[0].cells if name != region and name.startswith(f"{region}/")]
        for style, name in zip(("--", ":", "-."), cells, strict=False):  # a region of several: its cells
            axes[1].plot(
                x, [m.cells[name].weight for m in minutes], color=colors[region], linestyle=style, label=name
            )
        axes[2].plot(x, [r.hosts for r in rows], color=colors[region], label=f"{region} hosts")
        axes[2].plot(
            x, [r.tasks for r in rows], color=colors[region], linestyle=":", label=f"{region} serving"
        )
        axes[3].plot(
            x, [r.ttft_p99_ms if r.served_rps else None for r in rows], color=colors[region], label=region
        )
    axes[3].axhline(slo_ms, color="black", linewidth=0.8, linestyle="--", label="SLO")
    axes[3].set_yscale("log")
    for axis, label in zip(
        axes, ["requests/s", "Route 53 weight", "hosts / serving tasks", "p99 TTFT ms"], strict=True
    ):
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
        for fault in scenario.faults:
            end = fault.until if fault.until is not None else scenario.minutes
            axis.axvspan(fault.at, end, color="grey", alpha=0.15)
    for fault in scenario.faults:
        where = f" {fault.region}" if hasattr(fault, "region") else ""
        axes[0].text(fault.at, axes[0].get_ylim()[1] * 0.95, f"{fault.kind}{where}", fontsize=7, va="top")
    axes[0].legend(fontsize=7, ncol=3, loc="lower left")
    axes[1].legend(fontsize=7, ncol=3)
    axes[3].set_xlabel("minute")
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)
