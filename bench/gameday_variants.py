"""A game day and its neighbours: the scenario with its traffic scaled by each factor given, one line each
(verdict, SLO minutes, requests the budget judges), so a change to the system is judged on the edge a day
sits on, not on one run of it (gameday/variants.py).

    .venv/bin/python bench/gameday_variants.py scenarios/gameday/NAME.yaml [--factors 0.97,0.99,1,1.01,1.03]
        [--profile low|nominal|high]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gameday.variants import write_scaled  # noqa: E402

JUDGED_LOST = re.compile(r"([\d,]+) requests lost")


def main() -> int:
    from gameday.run import run_scenario

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--factors", default="0.97,0.99,1,1.01,1.03")
    parser.add_argument("--profile", choices=("low", "nominal", "high"), default="nominal")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for factor in (float(f) for f in args.factors.split(",")):
            summary = run_scenario(
                write_scaled(args.scenario, factor, Path(folder)), profile=args.profile
            ).summary
            judged = next((JUDGED_LOST.match(v) for v in summary.violations if JUDGED_LOST.match(v)), None)
            lost = f"{judged.group(1)} requests judged lost" if judged else "lost requests within the budget"
            print(
                f"{args.scenario.stem} traffic x{factor:g}: {summary.verdict}, "
                f"{summary.slo_minutes} SLO minutes, {lost}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
