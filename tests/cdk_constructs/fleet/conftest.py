"""Fixtures: the default inf2.48xlarge fleet and its template."""

import pytest

from tests.cdk_constructs.fleet.builders import build, fleet_props


@pytest.fixture
def inf2(stack, vpc):
    return build(stack, vpc, fleet_props())


@pytest.fixture
def template(inf2):
    return inf2[1]
