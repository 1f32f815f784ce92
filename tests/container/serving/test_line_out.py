"""Lines written whole: the orphan guard and the target-group thread write to stdout and stderr at once, and
a line whose newline went out after another line's text glued the two together in a shared log (the serving
tests once read no EMF line for a dead model process because of it)."""

from __future__ import annotations

import sys

import pytest

from serving import leave_target_groups, orphan_guard
from serving.line_out import emit


class RecordingStream:
    """Keeps each write() call apart: a line is whole when one call carries it with its newline."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_a_line_goes_out_in_one_write_with_its_newline() -> None:
    stream = RecordingStream()
    emit('{"Outcome": "failed"}', stream)
    assert stream.writes == ['{"Outcome": "failed"}\n']


@pytest.mark.parametrize(
    "outcome",
    [
        leave_target_groups.Outcome(reason="engine died", skipped="not an ECS task"),
        leave_target_groups.Outcome(
            reason="engine died", deregistered=["arn:tg/a"], ip="10.0.0.5", attempts=1
        ),
    ],
    ids=["skipped", "left"],
)
def test_the_target_group_report_writes_whole_lines_only(monkeypatch, outcome) -> None:
    out, err = RecordingStream(), RecordingStream()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    leave_target_groups.report(outcome, "assistant", {})
    assert err.writes, "the outcome is reported"
    assert all(write.endswith("\n") and write.count("\n") == 1 for write in out.writes + err.writes)


def test_the_orphan_guard_writes_whole_lines_only(monkeypatch) -> None:
    err = RecordingStream()
    monkeypatch.setattr(sys, "stderr", err)
    assert orphan_guard.main([]) == 2
    assert err.writes and all(write.endswith("\n") and write.count("\n") == 1 for write in err.writes)
