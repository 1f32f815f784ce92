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


def test_the_serving_code_writes_its_lines_through_emit_only() -> None:
    """The model's own lines come from Triton's thread, the engine loop, the engine watch and the catalog
    follower at once, beside the EMF writer: each print() is two writes, so any of them could glue its
    text to another line (the engine's death notice once went out that way). Every line goes through emit."""
    import ast
    from pathlib import Path

    import serving

    found = []
    for path in sorted(Path(serving.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                found.append(f"{path.name}:{node.lineno}")
    assert found == []
