"""Every Hypothesis test runs without its timing checks, on a busy machine as on a quiet one."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def test_the_session_profile_has_no_deadline_and_no_slowness_check():
    assert settings().deadline is None
    assert HealthCheck.too_slow in settings().suppress_health_check


@given(st.integers())
def test_a_property_without_its_own_settings_inherits_them(number):
    assert settings().deadline is None
    assert isinstance(number, int)
