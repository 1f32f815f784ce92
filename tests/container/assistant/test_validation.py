from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assistant.validation import first_error


class _Sample(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int = Field(ge=1)
    ratio: float = 0.5
    nested: dict[str, int] = {}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, ("count", "is required")),
        ({"count": "x"}, ("count", "must be a whole number, got 'x'")),
        ({"count": 1, "ratio": "abc"}, ("ratio", "must be a number, got 'abc'")),
        ({"count": 1, "colour": 1}, ("colour", "unknown key")),
        ({"count": 0}, ("count", "input should be greater than or equal to 1 (got 0)")),
        ({"count": 1, "nested": {"a": "b"}}, ("nested.a", "must be a whole number, got 'b'")),
    ],
)
def test_first_error_names_the_field_and_the_problem(data: dict, expected: tuple[str, str]) -> None:
    with pytest.raises(ValidationError) as caught:
        _Sample.model_validate(data)
    assert first_error(caught.value) == expected


def test_long_inputs_are_shortened_in_the_message() -> None:
    with pytest.raises(ValidationError) as caught:
        _Sample.model_validate({"count": "y" * 500})
    _, message = first_error(caught.value)
    assert len(message) < 120
    assert message.endswith("...")
