"""Region plans -> the `events:` overlay the stacks consume: a config file that names its base and adds
one event with the hosts each region's fleets need (min) and may grow to (max) while it lasts, and the
cells a region needs to hold that many hosts (at most `cell_max_hosts` each). It is written only once the
whole config it makes (base + event) validates, so `make synth` takes it."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from planner.forecast import EventWindow
from planner.plan import RegionPlan
from settings.cells import cells_needed
from settings.loader import ConfigError, load_settings
from settings.schema import Settings

DEFAULT_PREWARM_MARGIN_MINUTES = 30


def render(
    base: str,
    window: EventWindow,
    plans: Sequence[RegionPlan],
    prewarm_margin_minutes: int,
    written_by: str,
    made_from: Sequence[tuple[str, str]] = (),
    cells: Mapping[str, int] | None = None,
) -> str:
    """The overlay as YAML in the shape of the `events:` example in docs/peak-events.md, one fleet per line.

    made_from: (what, value) pairs the header records, e.g. ("forecast", path), ("CONFIG", path).
    cells: region -> cells, for the regions whose base has too few for the event (see `cells_for`)."""
    lines = [
        f"# Written by `{written_by}`: change the forecast and run it again rather than",
        "# editing this file. The base config's fleets keep their limits; the event raises them from",
        "# the pre-warm lead time before its start until its end.",
        *(f"# {what}: {value}" for what, value in made_from),
        f"base: {base}",
        *_cell_lines(cells or {}),
        "events:",
        *_event_lines(window, plans, prewarm_margin_minutes),
    ]
    return "\n".join(lines) + "\n"


def _event_lines(window: EventWindow, plans: Sequence[RegionPlan], prewarm_margin_minutes: int) -> list[str]:
    """One `events:` entry; each region's part comes from _region_lines, the place to add per-region keys."""
    lines = [
        f"  - name: {window.name}",
        f'    start: "{window.start.isoformat()}"',
        f'    end: "{window.end.isoformat()}"',
        f"    prewarm_margin_minutes: {prewarm_margin_minutes}",
        "    regions:",
    ]
    for plan in plans:
        lines += _region_lines(plan, indent="      ")
    return lines


def cells_for(plans: Sequence[RegionPlan], settings: Settings) -> dict[str, int]:
    """Regions whose planned maximum needs more cells than the base config gives them: region -> cells, so
    no cell runs more than cell_max_hosts (a region's cells never shrink in the overlay)."""
    found = {}
    for plan in plans:
        hosts = sum(fleet.max_hosts for fleet in plan.fleets)
        needed = cells_needed(hosts, settings.cell_max_hosts)
        have = settings.regions[plan.region].cells if plan.region in settings.regions else 1
        if needed > have:
            found[plan.region] = needed
    return found


def _cell_lines(cells: Mapping[str, int]) -> list[str]:
    if not cells:
        return []
    lines = [
        f"# A cell runs at most cell_max_hosts hosts (docs/peak-events.md, Cells): {', '.join(cells)} split "
        "into cells.",
        "regions:",
    ]
    return lines + [f"  {region}: {{cells: {count}}}" for region, count in cells.items()]


def _region_lines(plan: RegionPlan, indent: str) -> list[str]:
    fleets = [f"{indent}  {f.instance_type}: {{min: {f.hosts}, max: {f.max_hosts}}}" for f in plan.fleets]
    return [f"{indent}{plan.region}:", *fleets]


def base_reference(config: Path, overlay: Path) -> str:
    """The base as the loader resolves it: relative to the overlay's folder."""
    return Path(os.path.relpath(config.resolve(), overlay.resolve().parent)).as_posix()


def write_overlay(path: Path, text: str) -> None:
    """Validate base + overlay as the app will (raises ConfigError, leaving any old file as it was),
    then replace the file in one step."""
    draft = path.with_name(f".{path.name}.draft")
    draft.write_text(text, encoding="utf-8")
    try:
        load_settings(draft)
        draft.replace(path)
    except ConfigError as error:
        raise ConfigError(str(error).replace(str(draft), str(path))) from None
    finally:
        draft.unlink(missing_ok=True)
