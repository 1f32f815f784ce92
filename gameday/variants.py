"""A scenario's neighbours: the same day with its traffic scaled by a few percent. A verdict that flips
within them says the day sits on an edge (which scale-outs happen before a jump, and at which target, move
its figures more than most changes to the system do), so a change is judged on the neighbours as well as
on the day (docs/gameday.md, "The four that still fail"; bench/gameday_variants.py runs them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gameday.scenario import load_scenario


def scaled(path: Path, factor: float) -> dict[str, Any]:
    """The scenario file's document with every traffic point's requests/s times `factor` and its config
    named by a path that holds wherever the result is written."""
    _, document, config = load_scenario(path)
    data = dict(document.data)
    data["config"] = str(config.resolve())
    data["traffic"] = {
        region: [[minute, rps * factor] for minute, rps in points]
        for region, points in data["traffic"].items()
    }
    return data


def write_scaled(path: Path, factor: float, folder: Path) -> Path:
    """`scaled` written as `<name>-x<factor>.yaml` in `folder`; its path."""
    out = folder / f"{path.stem}-x{factor:g}.yaml"
    out.write_text(yaml.safe_dump(scaled(path, factor), sort_keys=False), encoding="utf-8")
    return out
