"""Options of every test session (the infrastructure suite and the serving suites alike)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.cpu_hog import ENVIRONMENT_VARIABLE, CpuHog, hog_count

_HOG = pytest.StashKey[CpuHog]()

# Hypothesis fails an example that runs past 200 ms, or whose data takes long to draw, by default: timing
# checks, which a busy machine fails where the code is right (a cell-weights property took 253 ms once
# beside a game day, 0.7 ms when Hypothesis ran it again). Speed is the benches' job (bench/), not the
# tests'. The profile is the default of every test that does not set these itself
# (hypothesis.readthedocs.io, "Settings profiles").
settings.register_profile("busy-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("busy-machine")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-hog",
        default=None,
        metavar="N",
        help=f"run N busy processes beside the session, as on a busy machine (or set {ENVIRONMENT_VARIABLE})",
    )


def pytest_configure(config: pytest.Config) -> None:
    raw = config.getoption("--cpu-hog")
    try:
        processes = hog_count(raw if raw is not None else os.environ.get(ENVIRONMENT_VARIABLE))
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None
    if processes:
        config.stash[_HOG] = CpuHog(processes).start()


def pytest_unconfigure(config: pytest.Config) -> None:
    hog = config.stash.get(_HOG, None)
    if hog is not None:
        hog.stop()


def pytest_report_header(config: pytest.Config) -> str | None:
    hog = config.stash.get(_HOG, None)
    return f"cpu hog: {hog.processes} busy processes {hog.pids}" if hog is not None else None
