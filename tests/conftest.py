"""Options of every test session (the infrastructure suite and the serving suites alike)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import moto_recorder
from tests.aws_calls_on_moto import claims_by_test
from tests.cpu_hog import ENVIRONMENT_VARIABLE, CpuHog, hog_count

_HOG = pytest.StashKey[CpuHog]()
_RECORD = pytest.StashKey[dict[str, list[str]]]()

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
    parser.addoption(
        "--record-moto-calls",
        default=None,
        metavar="FILE",
        help="write the AWS calls moto answered in each test to FILE (JSON), for tests/aws_calls_on_moto.py",
    )


def pytest_configure(config: pytest.Config) -> None:
    raw = config.getoption("--cpu-hog")
    try:
        processes = hog_count(raw if raw is not None else os.environ.get(ENVIRONMENT_VARIABLE))
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None
    if processes:
        config.stash[_HOG] = CpuHog(processes).start()
    if config.getoption("--record-moto-calls"):
        config.stash[_RECORD] = {}


@pytest.fixture(autouse=True)
def _claimed_aws_calls_run_on_moto(request: pytest.FixtureRequest):
    """A test that tests/aws_calls_on_moto.py names for an AWS call must make that call against moto, in its
    body or its function-scoped fixtures; it fails otherwise, so the table cannot claim more than the tests
    do. Without moto (the serving environments) there is nothing to check."""
    claimed = claims_by_test().get(request.node.nodeid, [])
    record = request.config.stash.get(_RECORD, None)
    if not (claimed or record is not None) or not moto_recorder.install():
        yield
        return
    with moto_recorder.recording() as made:
        yield
    if record is not None and made:
        record[request.node.nodeid] = sorted(f"{service}:{operation}" for service, operation in made)
    missing = moto_recorder.unmet(claimed, made)
    if missing:
        pytest.fail(
            f"tests/aws_calls_on_moto.py says {request.node.nodeid} runs {', '.join(missing)} against moto, "
            f"and it made no such call that moto answered (it made: {sorted(made) or 'none'}). Name a test "
            "that does, or make this one do it under mock_aws.",
            pytrace=False,
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    record = config.stash.get(_RECORD, None)
    if record is not None:
        Path(config.getoption("--record-moto-calls")).write_text(json.dumps(record, indent=1, sort_keys=True))
    hog = config.stash.get(_HOG, None)
    if hog is not None:
        hog.stop()


def pytest_report_header(config: pytest.Config) -> str | None:
    hog = config.stash.get(_HOG, None)
    return f"cpu hog: {hog.processes} busy processes {hog.pids}" if hog is not None else None
