"""What one run leaves for the next, as JSON in an SSM parameter only the orchestrator writes: each
region's streaks, the schedule time of the last run (a repeated delivery of the same event is skipped)
and the last few decisions, which `make traffic` shows."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .policy import RegionMemory

KEEP_DECISIONS = 5  # an SSM standard parameter holds 4 KB


@dataclass(frozen=True)
class RunState:
    memory: dict[str, RegionMemory] = field(default_factory=dict)
    last_event_time: str | None = None
    decisions: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {
                "memory": {
                    region: {"bad_runs": m.bad_runs, "good_runs": m.good_runs}
                    for region, m in self.memory.items()
                },
                "last_event_time": self.last_event_time,
                "decisions": list(self.decisions[-KEEP_DECISIONS:]),
            },
            sort_keys=True,
            separators=(",", ":"),
        )


def parse_state(text: str | None) -> RunState:
    """An absent or unreadable state starts afresh: streaks are rebuilt within a few runs."""
    if not text:
        return RunState()
    try:
        data = json.loads(text)
        memory = {
            region: RegionMemory(int(m.get("bad_runs", 0)), int(m.get("good_runs", 0)))
            for region, m in data.get("memory", {}).items()
        }
        return RunState(memory, data.get("last_event_time"), tuple(data.get("decisions", ())))
    except (ValueError, TypeError, AttributeError):
        return RunState()
