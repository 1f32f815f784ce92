"""Every shipped game-day scenario with the orchestrator on and off: the table of docs/gameday.md's "Results
under this judge", measured on the kit as it is.

Each scenario runs twice (its day, then the same day with the orchestrator off) and prints one Markdown row:
the verdict, SLO minutes and requests lost on / off, goodput and the first violation. The rows are what the
docs quote; a scenario that fails today is a strict expected failure in
tests/gameday/test_shipped_scenarios.py.

    .venv/bin/python bench/gameday_results.py [--profile low|nominal|high] [SCENARIO.yaml ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SCENARIOS = REPO / "scenarios" / "gameday"


def row(path: Path, profile: str) -> str:
    from gameday.run import run_scenario

    result = run_scenario(path, profile=profile, counterfactual=True)
    on, off = result.summary, result.without_orchestrator
    off_minutes = "-" if off is None else f"{off.slo_minutes:,}"
    off_lost = "-" if off is None else f"{off.requests_lost:,}"
    goodput = on.goodput.get("overall")
    why = "" if on.verdict == "pass" else f": {on.violations[0]}"
    return (
        f"| `{path.stem}` | {on.slo_minutes:,} / {off_minutes} | {on.requests_lost:,} / {off_lost} | "
        f"{'-' if goodput is None else f'{goodput:.2%}'} | {on.verdict}{why} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=("low", "nominal", "high"), default="nominal")
    parser.add_argument("scenarios", nargs="*", type=Path, help="default: every file in scenarios/gameday/")
    args = parser.parse_args()
    paths = args.scenarios or sorted(SCENARIOS.glob("*.yaml"))
    print(f"profile: {args.profile}")
    print("| scenario | SLO minutes on / off | requests lost on / off | goodput (on) | verdict (on) |")
    print("|---|---|---|---|---|")
    started = time.process_time()
    for path in paths:
        print(row(path, args.profile), flush=True)
    print(f"({time.process_time() - started:.0f} s of CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
