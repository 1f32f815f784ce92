"""The shared reader of a number from the environment: blank is the default, a non-number names the
variable."""

from __future__ import annotations

import pytest

from assistant.environ_number import number_from_environ


@pytest.mark.parametrize("environ", [{}, {"X_MS": ""}, {"X_MS": "  "}])
def test_blank_or_missing_gives_the_default(environ: dict[str, str]) -> None:
    assert number_from_environ(environ, "X_MS", 7.5, "milliseconds") == (7.5, "")


def test_a_number_is_read_and_its_text_kept_for_the_callers_range_message() -> None:
    assert number_from_environ({"X_MS": " 2.5 "}, "X_MS", 7.5, "milliseconds") == (2.5, "2.5")


def test_a_non_number_names_the_variable_the_unit_and_the_text() -> None:
    with pytest.raises(ValueError, match=r"X_S: must be a number of seconds, got 'soon'"):
        number_from_environ({"X_S": "soon"}, "X_S", 1.0, "seconds")
