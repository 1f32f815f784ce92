"""`python -m ops.rehearse_routing SCENARIO [--json] [--config FILE] [--png FILE]`: replay a scenario through
the orchestrator's real signal reader and policy, minute by minute, offline.

Prints the weights and reasons as a table (with --json: one JSON object per minute,
`{"minute": N, "weights": {region: int}, "reason": "..."}`), writes a PNG of weight per region over time,
and says how many runs each drained region took to reach its floor. The policy's parameters come from
the config's `routing:` section (default config/default.yaml).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ops.routing_replay import replay
from ops.routing_scenario import Minute, Scenario, drains, load_scenario
from orchestrator.routing.policy import PolicyParams, Status
from settings.loader import ConfigError, load_settings
from stacks.routing_names import policy_params, routing_targets

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.table import Table

DEFAULT_CONFIG = "config/default.yaml"
PNG_DIRECTORY = Path("build") / "rehearsal"
TABLE_WIDTH = 120  # columns: the table wraps its reasons to fit a terminal this wide (or a narrower one)
BAD, MISSING, FINE = "bad", "missing", ""
TABLE_MARKS = {BAD: "*", MISSING: "?", FINE: ""}
# Equal weights would draw one line over another: each region's line is shifted by this much weight
# (centred on the true value) and has its own dash pattern and markers.
LINE_OFFSET = 0.8
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P")


def json_lines(minutes: list[Minute]) -> list[str]:
    return [
        json.dumps({"minute": m.minute, "weights": m.decision.weights, "reason": m.decision.reason})
        for m in minutes
    ]


def region_states(minutes: list[Minute]) -> dict[str, list[str]]:
    """Per region, per minute: BAD (its signals looked bad), MISSING (the policy had no metrics for it)
    or FINE, as the policy saw that minute."""
    states: dict[str, list[str]] = {region: [] for region in (minutes[0].decision.weights if minutes else {})}
    for m in minutes:
        missing = {r.region for r in m.decision.regions if r.status is Status.MISSING}
        for region, column in states.items():
            column.append(BAD if region in m.bad else MISSING if region in missing else FINE)
    return states


def runs_of(states: list[str], wanted: str) -> list[tuple[int, int]]:
    """(first minute, length) of each run of `wanted` minutes in a row."""
    runs: list[tuple[int, int]] = []
    for minute, state in enumerate(states):
        if state != wanted:
            continue
        if runs and runs[-1][0] + runs[-1][1] == minute:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((minute, 1))
    return runs


def line_offsets(count: int) -> list[float]:
    """Distinct shifts centred on zero, one per region."""
    return [(index - (count - 1) / 2) * LINE_OFFSET for index in range(count)]


def table(name: str, scenario: Scenario, minutes: list[Minute]) -> Table:
    from rich.table import Table

    rendered = Table(title=f"{name}: Route 53 weight per region after each orchestrator run")
    rendered.add_column("minute", justify="right")
    for region in scenario.regions:
        rendered.add_column(region, justify="right", no_wrap=True)
    rendered.add_column("reason", overflow="fold")
    states = region_states(minutes)
    for m in minutes:
        cells = [
            f"{weight}{TABLE_MARKS[states[region][m.minute]]}"
            for region, weight in m.decision.weights.items()
        ]
        rendered.add_row(str(m.minute), *cells, m.decision.reason)
    return rendered


def table_width() -> int:
    return min(shutil.get_terminal_size((TABLE_WIDTH, 24)).columns, TABLE_WIDTH)


def print_table(name: str, scenario: Scenario, minutes: list[Minute]) -> None:
    from rich.console import Console

    console = Console(width=table_width())
    console.print(table(name, scenario, minutes))
    console.print("* = the region's signals looked bad that minute, ? = no metrics from it that minute")


def plot(name: str, scenario: Scenario, minutes: list[Minute], params: PolicyParams) -> Figure:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    regions = list(scenario.regions)
    figure, (weights_axes, state_axes) = plt.subplots(
        2,
        1,
        sharex=True,
        figsize=(10, 5.5 + 0.3 * len(regions)),
        gridspec_kw={"height_ratios": [4, 0.5 + 0.4 * len(regions)]},
    )
    x = [m.minute for m in minutes]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    every = max(1, len(minutes) // 15)
    for index, (region, offset) in enumerate(zip(regions, line_offsets(len(regions)), strict=True)):
        weights_axes.step(
            x,
            [m.decision.weights[region] + offset for m in minutes],
            where="post",
            label=region,
            color=colors[index % len(colors)],
            linestyle=LINE_STYLES[index % len(LINE_STYLES)],
            marker=MARKERS[index % len(MARKERS)],
            markersize=4,
            markevery=(index % every, every),  # markers of equal lines fall on different minutes
            linewidth=1.8,
        )
    weights_axes.axhline(params.floor, color="grey", linestyle=":", label=f"floor ({params.floor})")
    weights_axes.set_ylabel("Route 53 weight")
    shift = max(line_offsets(len(regions)))
    weights_axes.set_title(
        f"{name}: weight per region over time\n"
        f"(lines shifted by up to ±{shift:.1f} so equal weights stay apart)",
        fontsize=11,
    )
    weights_axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    weights_axes.grid(alpha=0.3)

    states = region_states(minutes)
    for row, region in enumerate(regions):
        # One lane per region, top to bottom in config order; each minute covers [minute, minute + 1).
        lane = (len(regions) - 1 - row - 0.4, 0.8)
        state_axes.broken_barh(runs_of(states[region], BAD), lane, facecolors="tab:red", alpha=0.8)
        state_axes.broken_barh(
            runs_of(states[region], MISSING), lane, facecolors="lightgrey", edgecolor="dimgrey", hatch="///"
        )
    state_axes.set_yticks(range(len(regions)), list(reversed(regions)))
    state_axes.set_ylim(-0.6, len(regions) - 0.4)
    state_axes.set_xlim(min(x), max(x) + 1)
    state_axes.set_xlabel("minute (orchestrator run)")
    state_axes.grid(axis="x", alpha=0.3)
    state_axes.legend(
        handles=[
            Patch(facecolor="tab:red", alpha=0.8, label="signals bad"),
            Patch(facecolor="lightgrey", edgecolor="dimgrey", hatch="///", label="no metrics"),
        ],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=8,
    )
    figure.tight_layout()
    return figure


def write_png(name: str, scenario: Scenario, minutes: list[Minute], params: PolicyParams, path: Path) -> None:
    import matplotlib.pyplot as plt

    figure = plot(name, scenario, minutes, params)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.rehearse_routing", description=__doc__.splitlines()[0]
    )
    parser.add_argument("scenario", help="a scenario file, e.g. scenarios/routing/degrade-and-recover.yaml")
    parser.add_argument("--json", action="store_true", help="one JSON object per minute instead of a table")
    parser.add_argument(
        "--config", default=DEFAULT_CONFIG, help="the kit config whose routing: section to use"
    )
    parser.add_argument(
        "--png", type=Path, help=f"where to write the plot (default {PNG_DIRECTORY}/NAME.png)"
    )
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
        params = policy_params(settings)
        scenario = load_scenario(args.scenario, routing_targets(settings), args.config)
    except ConfigError as error:
        print(f"error:\n{error}", file=sys.stderr)
        return 1

    minutes = replay(scenario, params)
    name = Path(args.scenario).name
    if args.json:
        print("\n".join(json_lines(minutes)))
    else:
        print_table(name, scenario, minutes)
    png = args.png or PNG_DIRECTORY / f"{Path(args.scenario).stem}.png"
    write_png(name, scenario, minutes, params, png)
    # Figures for people go to stderr with --json, so stdout stays one JSON object per line.
    out = sys.stderr if args.json else sys.stdout
    for drain in drains(minutes, params):
        if drain.runs is None:
            print(f"{drain.region}: bad from minute {drain.first_bad_minute}, never at the floor", file=out)
        else:
            print(
                f"{drain.region}: bad from minute {drain.first_bad_minute}, at the floor ({params.floor}) in "
                f"minute {drain.floor_minute}: {drain.runs} runs",
                file=out,
            )
    print(f"plot: {png}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
