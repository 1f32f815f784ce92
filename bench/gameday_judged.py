"""Where a game day's judged losses come from: every minute in which some routing target loses requests the
verdict judges, with what each target was offered, could serve, had serving and weighed that minute.

The verdict (gameday/verdict.py, "overload's sheds") excuses what no routing could have spared: demand
beyond every target's known room together, and what a target's own curve sheds at an even split of the
minute's demand within a unit of weight. A minute it judges is one in which a target shed past that while
another had room the control loop knew of, or shed within what its plan or its own scale-in had it hold.
This prints those minutes side by side for every target, so the cause reads off the row. The figures are
the verdict's own functions on the twin's minutes.

    .venv/bin/python bench/gameday_judged.py scenarios/gameday/NAME.yaml [--profile low|nominal|high]
        [--slo-errors SHARE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gameday.explain import judged_minutes, render  # noqa: E402


def main() -> int:
    from gameday.run import run_scenario

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--profile", choices=("low", "nominal", "high"), default="nominal")
    parser.add_argument(
        "--slo-errors", type=float, default=0.01, help="error share marked * (the policy's default: 1%%)"
    )
    args = parser.parse_args()
    result = run_scenario(args.scenario, profile=args.profile)
    slo_errors = result.scenario.slo.error_share
    policy = result.rules.policy if result.rules else None
    weight_sum = sum(result.rules.initial_weights.values()) if result.rules else 100
    found = judged_minutes(result.minutes, result.scenario, policy, weight_sum)
    print("\n".join(render(found, slo_errors or args.slo_errors)))
    print(f"verdict: {result.summary.verdict}")
    for violation in result.summary.violations:
        print(f"  {violation}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
