"""`python -m gameday SCENARIO [--json [--cells]] [--png FILE] [--profile low|nominal|high]
[--counterfactual | --orchestrator-off]`: exit 0 on pass, 1 on fail, 2 on a bad scenario."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gameday.loop import PROFILE_ENDS
from gameday.run import BadScenario, run_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gameday", description=__doc__)
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--json", action="store_true", help="one JSON object per minute, then a summary line")
    parser.add_argument(
        "--cells",
        action="store_true",
        help="with --json: each minute also has a 'cells' object, one entry per routing target",
    )
    parser.add_argument("--png", type=Path, help="figure path (default build/gameday/<scenario>.png)")
    parser.add_argument(
        "--profile",
        choices=PROFILE_ENDS,
        default="nominal",
        help="serving curves at this end of each performance profile's stated throughput range",
    )
    who = parser.add_mutually_exclusive_group()
    who.add_argument(
        "--counterfactual",
        action="store_true",
        help="run the day a second time with the traffic orchestrator off and print both",
    )
    who.add_argument(
        "--orchestrator-off", action="store_true", help="run the day with the traffic orchestrator off only"
    )
    args = parser.parse_args(argv)
    png = args.png or Path("build") / "gameday" / f"{args.scenario.stem}.png"
    try:
        result = run_scenario(
            args.scenario,
            json_out=sys.stdout if args.json else None,
            png=png,
            cells=args.cells,
            profile=args.profile,
            counterfactual=args.counterfactual,
            orchestrator_on=not args.orchestrator_off,
        )
    except BadScenario as error:
        print(f"scenario error:\n{error}", file=sys.stderr)
        return 2
    if not args.json:
        from gameday.report import summary_text, table

        table(result.minutes, sys.stdout)
        summary_text(result.summary, sys.stdout, result.profile, not args.orchestrator_off)
        print(f"figure: {png}")
    return 0 if result.summary.verdict == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
