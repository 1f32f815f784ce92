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
import sys
from pathlib import Path

from ops.routing_replay import replay
from ops.routing_scenario import Minute, Scenario, drains, load_scenario
from orchestrator.routing.policy import PolicyParams
from settings.loader import ConfigError, load_settings
from stacks.routing_names import policy_params

DEFAULT_CONFIG = "config/default.yaml"
PNG_DIRECTORY = Path("build") / "rehearsal"


def json_lines(minutes: list[Minute]) -> list[str]:
    return [
        json.dumps({"minute": m.minute, "weights": m.decision.weights, "reason": m.decision.reason})
        for m in minutes
    ]


def print_table(scenario: Scenario, minutes: list[Minute]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Route 53 weight per region after each orchestrator run")
    table.add_column("minute", justify="right")
    for region in scenario.regions:
        table.add_column(region, justify="right")
    table.add_column("reason")
    for m in minutes:
        cells = []
        for region, weight in m.decision.weights.items():
            mark = "*" if region in m.bad else ""
            cells.append(f"{weight}{mark}")
        table.add_row(str(m.minute), *cells, m.decision.reason)
    console = Console(width=200)
    console.print(table)
    console.print("* = the region's signals looked bad that minute")


def write_png(scenario: Scenario, minutes: list[Minute], params: PolicyParams, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 4.5))
    x = [m.minute for m in minutes]
    for region in scenario.regions:
        axes.step(x, [m.decision.weights[region] for m in minutes], where="post", label=region)
    axes.axhline(params.floor, color="grey", linestyle=":", label=f"floor ({params.floor})")
    axes.set_xlabel("minute (orchestrator run)")
    axes.set_ylabel("Route 53 weight")
    axes.set_title("Weight per region over time")
    axes.legend(loc="upper right")
    axes.grid(alpha=0.3)
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
        params = policy_params(load_settings(args.config))
        scenario = load_scenario(args.scenario)
    except ConfigError as error:
        print(f"error:\n{error}", file=sys.stderr)
        return 1

    minutes = replay(scenario, params)
    if args.json:
        print("\n".join(json_lines(minutes)))
    else:
        print_table(scenario, minutes)
    png = args.png or PNG_DIRECTORY / f"{Path(args.scenario).stem}.png"
    write_png(scenario, minutes, params, png)
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
