"""The container health probe's decision: starting, ready, dead (entrypoint/healthcheck.py)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from entrypoint.healthcheck import verdict


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_not_ready_is_healthy_while_inside_the_cold_start_budget(tmp_path: Path) -> None:
    clock = Clock()
    assert verdict(False, tmp_path, 1800, clock)[0] == 0
    clock.now += 1799
    code, reason = verdict(False, tmp_path, 1800, clock)
    assert code == 0 and "starting" in reason
    clock.now += 2
    code, reason = verdict(False, tmp_path, 1800, clock)
    assert code == 1 and "cold-start budget 1800" in reason


def test_once_ready_any_not_ready_answer_is_unhealthy_at_once(tmp_path: Path) -> None:
    clock = Clock()
    assert verdict(False, tmp_path, 1800, clock)[0] == 0
    clock.now += 60
    assert verdict(True, tmp_path, 1800, clock)[0] == 0
    clock.now += 10
    code, reason = verdict(False, tmp_path, 1800, clock)
    assert code == 1 and "after having been ready" in reason


@given(
    st.lists(st.tuples(st.booleans(), st.floats(min_value=0, max_value=600)), min_size=1, max_size=30),
    st.integers(min_value=60, max_value=3300),
)
def test_a_probe_fails_only_after_the_budget_or_after_having_been_ready(probes, budget) -> None:
    import tempfile

    clock = Clock()
    with tempfile.TemporaryDirectory() as folder:
        start = None  # the budget runs from the first probe
        seen_ready = False
        for ready, step in probes:
            clock.now += step
            start = clock.now if start is None else start
            code, _ = verdict(ready, Path(folder), budget, clock)
            if ready or (not seen_ready and clock.now - start < budget):
                assert code == 0
            else:
                assert code == 1
            seen_ready = seen_ready or ready
