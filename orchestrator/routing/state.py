"""What one run leaves for the next, as JSON in an SSM parameter only the orchestrator writes: each
region's streaks, the minute last decided with the absolute weights decided for it (so a repeated or
retried delivery of that minute re-applies the same targets instead of stepping again), how many runs
each record no longer in config has been seen, the last few decisions, which `make traffic` shows (and
which say what weights a minute's requests followed), and the metrics minute each target last read.

A standard SSM parameter holds 4 KB: the state drops its oldest decisions, then shortens their reasons,
until it fits (SSM API reference, PutParameter: Value, standard tier 4 KB)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .policy import RegionMemory

KEEP_DECISIONS = 5
MAX_BYTES = 4096  # an SSM standard parameter
SHORT_REASON = 120  # a decision's reason once the state has to shrink


class StateTooLarge(ValueError):
    """Even without decisions the state does not fit one standard parameter (too many regions)."""


@dataclass(frozen=True)
class RunState:
    memory: dict[str, RegionMemory] = field(default_factory=dict)
    minute: str | None = None  # the run minute last decided (ISO 8601, UTC)
    targets: dict[str, int] = field(default_factory=dict)  # the weights decided for that minute
    removed: dict[str, int] = field(default_factory=dict)  # record not in config -> runs seen since
    decisions: tuple[dict[str, Any], ...] = ()
    read: dict[str, str] = field(default_factory=dict)  # target -> the metrics minute it last read

    def _json(self, decisions: list[dict[str, Any]]) -> str:
        return json.dumps(
            {
                "memory": {
                    region: [m.bad_runs, m.good_runs, m.recent, m.slow] for region, m in self.memory.items()
                },
                "minute": self.minute,
                "targets": self.targets,
                "removed": self.removed,
                "decisions": decisions,
                "read": self.read,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    def to_json(self) -> str:
        """At most MAX_BYTES of UTF-8: the newest decisions that fit, shortened if need be."""
        decisions = list(self.decisions[-KEEP_DECISIONS:])
        shortened = [{**d, "reason": str(d.get("reason", ""))[:SHORT_REASON]} for d in decisions]
        for candidates in (decisions, shortened):
            for start in range(len(candidates) + 1):
                text = self._json(candidates[start:])
                if len(text.encode()) <= MAX_BYTES:
                    return text
        raise StateTooLarge(
            f"the orchestrator's state needs {len(text.encode())} bytes, more than {MAX_BYTES}"
        )


def _memory(value: Any) -> RegionMemory:
    if isinstance(value, dict):  # the layout before the state was bounded
        return RegionMemory(int(value.get("bad_runs", 0)), int(value.get("good_runs", 0)))
    # [bad, good] before the M-of-N window was kept; [bad, good, recent] before the latency term's history;
    # [bad, good, recent, slow] since.
    bad, good, *bits = value
    recent, slow = [*[int(b) for b in bits], 0, 0][:2]
    return RegionMemory(int(bad), int(good), recent, slow)


def parse_state(text: str | None) -> RunState:
    """An absent or unreadable state starts afresh: streaks are rebuilt within a few runs."""
    if not text:
        return RunState()
    try:
        data = json.loads(text)
        return RunState(
            memory={region: _memory(m) for region, m in data.get("memory", {}).items()},
            minute=data.get("minute"),
            targets={region: int(w) for region, w in (data.get("targets") or {}).items()},
            removed={region: int(n) for region, n in (data.get("removed") or {}).items()},
            decisions=tuple(data.get("decisions", ())),
            read={region: str(m) for region, m in (data.get("read") or {}).items()},
        )
    except (ValueError, TypeError, AttributeError):
        return RunState()
