"""Goodput of game-day scenarios: requests served within the objective over what the fleets could serve.

    python bench/overload_goodput.py scenarios/gameday/surge-2.5x-no-event.yaml [...]

Per scenario, one line: goodput = sum over minutes and routing targets of served x (1 - slow share),
over the sum of min(offered, capacity), where capacity is the region's serving hosts at their nominal
rate (the twin's throughput bound) and offered the scenario's demand; so a region overloaded while
another has room counts against the routing, and demand beyond every fleet does not. Also: minutes in
which any routing target's Route 53 health check changed state (DNS flaps), and the requests lost.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gameday.loop import Twin
from gameday.run import check_against_config
from gameday.scenario import load_scenario
from gameday.templates import read_deployment, synthesize
from settings.loader import load_settings


def goodput(path: Path) -> dict[str, float]:
    scenario, document, config = load_scenario(path)
    settings = load_settings(config)
    check_against_config(scenario, document, settings, config)
    twin = Twin(scenario, settings, read_deployment(synthesize(config)))
    good = possible = lost = 0.0
    flaps = 0
    last: dict[str, bool] = {}

    def count(minute) -> None:
        nonlocal good, possible, lost, flaps
        offered = sum(row.offered_rps for row in minute.regions.values())
        capacity = 0.0
        for name, row in minute.cells.items():
            cell = twin.cells[name]
            if not row.down:
                capacity += sum(f.serving * cell.curve.per_host_rps[t] for t, f in cell.fleets.items())
            good += row.served_rps * (1.0 - row.slow_share) * 60
            lost += row.shed_rps * 60
            if name in last and last[name] != row.healthy:
                flaps += 1
            last[name] = row.healthy
        possible += min(offered, capacity) * 60

    twin.run(count)
    return {"goodput": good / possible if possible else 1.0, "dns_changes": flaps, "lost": lost}


def main(argv: list[str]) -> int:
    for name in argv:
        figures = goodput(Path(name))
        print(
            f"{Path(name).stem}: goodput {figures['goodput']:.1%}, "
            f"Route 53 health-check changes {figures['dns_changes']}, requests lost {figures['lost']:,.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
