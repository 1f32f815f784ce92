"""`python -m gameday SCENARIO [--json [--cells]] [--png FILE]`: exit 0 on pass, 1 on fail, 2 on a bad
scenario."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
    args = parser.parse_args(argv)
    png = args.png or Path("build") / "gameday" / f"{args.scenario.stem}.png"
    try:
        result = run_scenario(
            args.scenario, json_out=sys.stdout if args.json else None, png=png, cells=args.cells
        )
    except BadScenario as error:
        print(f"scenario error:\n{error}", file=sys.stderr)
        return 2
    if not args.json:
        from gameday.report import summary_text, table

        table(result.minutes, sys.stdout)
        summary_text(result.summary, sys.stdout)
        print(f"figure: {png}")
    return 0 if result.summary.verdict == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
