"""The mutation suite (tests/gameday/test_mutations.py) runs whole game days, minutes of CPU each: it runs
only when asked for by marker (`pytest -m mutation`, `make test-mutations`), not with the rest."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "mutation" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="mutation suite: run it with `make test-mutations` (pytest -m mutation)")
    for item in items:
        if item.get_closest_marker("mutation"):
            item.add_marker(skip)
