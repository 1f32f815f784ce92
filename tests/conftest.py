"""Options of every test session (the infrastructure suite and the serving suites alike)."""

from __future__ import annotations

import os

import pytest

from tests.cpu_hog import ENVIRONMENT_VARIABLE, CpuHog, hog_count

_HOG = pytest.StashKey[CpuHog]()


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
