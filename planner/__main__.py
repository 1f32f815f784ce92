"""`python -m planner FORECAST [--config FILE] [--out FILE]`: size each region's fleets for a forecast
peak by simulation, print them, and write the `events:` overlay the stacks deploy (`make plan`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from planner.inputs import gather
from planner.overlay import (
    DEFAULT_PREWARM_MARGIN_MINUTES,
    base_reference,
    cells_for,
    render,
    write_overlay,
)
from planner.plan import Knees, PlanError, Search, plan_event
from planner.prices import SHIPPED as SHIPPED_PRICES
from planner.report import case_study_lines, fleet_table, notes, region_table
from settings.loader import ConfigError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m planner", description=__doc__.splitlines()[0])
    parser.add_argument("forecast", help="the forecast file, e.g. config/forecasts/prime-day.yaml")
    parser.add_argument("--config", default="config/default.yaml", help="the config the event overlays")
    parser.add_argument("--out", help="overlay to write (default: <config folder>/<event name>.yaml)")
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        help="a performance profile to use instead of the shipped one",
    )
    parser.add_argument("--prices", default=str(SHIPPED_PRICES), help="hourly prices with their source")
    parser.add_argument("--headroom", type=float, default=0.2, help="traffic above the peak to size for")
    parser.add_argument("--max-factor", type=float, default=1.5, help="event max = min x this")
    parser.add_argument("--prewarm-margin", type=int, default=DEFAULT_PREWARM_MARGIN_MINUTES, help="minutes")
    parser.add_argument("--slice-hosts", type=int, default=Search.slice_hosts, help="hosts a slice simulates")
    parser.add_argument("--seed", type=int, default=Search.seed)
    parser.add_argument("--seeds", type=int, default=Search.seeds, help="seeds for the seed spread")
    parser.add_argument(
        "--direct", action="store_true", help="search every fleet directly (slower; the fast path's check)"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=140)  # a log keeps the table whole
    errors = Console(stderr=True)  # the progress bar; messages go through print() and are never re-wrapped
    if (
        args.headroom < 0
        or args.max_factor < 1
        or args.prewarm_margin < 0
        or args.slice_hosts < 1
        or args.seeds < 1
    ):
        print(
            "plan error: needs --headroom >= 0, --max-factor >= 1, --prewarm-margin >= 0, "
            "--slice-hosts >= 1, --seeds >= 1",
            file=sys.stderr,
        )
        return 2
    try:
        inputs = gather(args.forecast, args.config, args.profile, args.prices)
    except ConfigError as error:
        print(f"planner input error:\n{error}", file=sys.stderr)  # forecast, config, profile or prices
        return 1
    out = Path(args.out) if args.out else inputs.config_path.parent / f"{inputs.forecast.event.name}.yaml"
    if out.resolve() == inputs.config_path.resolve():
        print(f"plan error: --out {out} would overwrite the config it is based on", file=sys.stderr)
        return 1
    search = Search(
        slo_ms=inputs.forecast.slo.ttft_p99_ms,
        slice_hosts=args.slice_hosts,
        seed=args.seed,
        seeds=args.seeds,
        fast=not args.direct,
    )
    columns = (
        TextColumn("simulating"),
        BarColumn(),
        TextColumn("{task.completed} runs"),
        TimeElapsedColumn(),
    )
    runs = Knees()  # counts every simulation of the plan
    try:
        with Progress(*columns, console=errors, transient=True) as progress:
            task = progress.add_task("plan", total=None)
            plans = plan_event(
                inputs, search, args.headroom, args.max_factor, lambda: progress.advance(task), runs
            )
    except PlanError as error:
        print(f"plan error: {error}", file=sys.stderr)
        return 1
    slo, currency = search.slo_ms, inputs.prices.currency
    console.print(fleet_table(plans, slo, currency))
    console.print(region_table(plans, slo, currency))
    event = inputs.forecast.event
    for line in notes(plans, slo, currency, event.start, event.end, args.max_factor):
        console.print(line, highlight=False, markup=False)
    for line in case_study_lines(inputs.forecast, plans):
        console.print(line, highlight=False, markup=False)
    console.print(
        f"prices: {inputs.prices.source}, effective {inputs.prices.effective}; "
        f"simulated {runs.simulated:,} requests in {runs.simulations} runs",
        highlight=False,
    )
    written_by = f"make plan FORECAST={args.forecast}" + (
        f" CONFIG={args.config}" if args.config != "config/default.yaml" else ""
    )
    made_from = (("forecast", str(args.forecast)), ("CONFIG", str(args.config)), ("output", str(out)))
    text = render(
        base_reference(inputs.config_path, out),
        inputs.forecast.event,
        plans,
        args.prewarm_margin,
        written_by,
        made_from,
        cells_for(plans, inputs.settings),
    )
    if args.dry_run:
        console.print(text, markup=False, highlight=False)
        return 0
    if not args.out:
        print(f"no --out (OUT=) given: writing the overlay into the config's folder as {out}", flush=True)
    try:
        write_overlay(out, text)
    except ConfigError as error:
        print(f"plan error: the overlay would not be a valid config:\n{error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"plan error: cannot write {out}: {error}", file=sys.stderr)
        return 1
    console.print(f"wrote {out}: `make synth CONFIG={out}` deploys the event", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
