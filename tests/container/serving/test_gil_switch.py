"""The stub's GIL switch interval: from the environment, checked, and set for the whole process."""

from __future__ import annotations

import sys

import pytest

from serving.gil_switch import (
    DEFAULT_SWITCH_INTERVAL_MS,
    SWITCH_INTERVAL_ENV,
    apply_switch_interval,
    switch_interval_ms,
)


def test_the_default_is_shorter_than_cpythons_5_ms() -> None:
    """At 5 ms the preparation's wall time was many times its CPU time (docs/benchmarks.md)."""
    assert switch_interval_ms({}) == DEFAULT_SWITCH_INTERVAL_MS < 5.0
    assert switch_interval_ms({SWITCH_INTERVAL_ENV: " "}) == DEFAULT_SWITCH_INTERVAL_MS


@pytest.mark.parametrize("raw", ["fast", "0", "0.01", "50", "-1", "nan"])
def test_a_bad_value_is_refused_with_the_variable_named(raw: str) -> None:
    with pytest.raises(ValueError, match=SWITCH_INTERVAL_ENV):
        switch_interval_ms({SWITCH_INTERVAL_ENV: raw})


def test_applying_sets_the_process_switch_interval() -> None:
    before = sys.getswitchinterval()
    try:
        assert apply_switch_interval({SWITCH_INTERVAL_ENV: "2.5"}) == 2.5
        assert sys.getswitchinterval() == pytest.approx(0.0025)
        apply_switch_interval({})
        assert sys.getswitchinterval() == pytest.approx(DEFAULT_SWITCH_INTERVAL_MS / 1000.0)
    finally:
        sys.setswitchinterval(before)
