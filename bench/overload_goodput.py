"""Goodput of game-day scenarios under overload, as the game day's verdict judges it.

    python bench/overload_goodput.py scenarios/gameday/surge-2.5x-no-event.yaml [...]

Per scenario, one line: goodput = requests served within the first-token objective over
min(offered, the fleets' capacity), summed over the day (the verdict's overall figure, gameday/verdict.py),
where capacity is the serving tasks' full-batch throughput bound; so a region overloaded while another has
room counts against the routing, and demand beyond every fleet does not. Also: how many times a routing
target's Route 53 health check changed state (DNS flaps), the requests lost, and the verdict.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gameday.run import run_scenario  # noqa: E402


def figures(path: Path) -> dict[str, object]:
    run = run_scenario(path)
    last: dict[str, bool] = {}
    changes = 0
    for minute in run.minutes:
        for name, row in (minute.cells or minute.regions).items():
            if name in last and last[name] != row.healthy:
                changes += 1
            last[name] = row.healthy
    return {
        "goodput": run.summary.goodput.get("overall", 1.0),
        "dns_changes": changes,
        "lost": run.summary.requests_lost,
        "verdict": run.summary.verdict,
    }


def main(argv: list[str]) -> int:
    for name in argv:
        result = figures(Path(name))
        print(
            f"{Path(name).stem}: goodput {result['goodput']:.1%}, Route 53 health-check changes "
            f"{result['dns_changes']}, requests lost {result['lost']:,}, verdict {result['verdict']}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
