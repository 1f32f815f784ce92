"""The live catalog's follow: a new build swaps in; anything wrong keeps the served index and is counted.

S3 is moto's (in process); a hanging S3 is a real socket that accepts and never answers, so the client's own
timeouts are what bound the poll. Throttling is botocore's SlowDown error from a wrapper around moto's
client (moto does not throttle): a stand-in for S3's answer, named as such.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from assistant.retrieve import MANIFEST_NAME, ProductIndex, build_index
from entrypoint.s3_fetch import POINTER_NAME, S3Location, upload_build
from serving.catalog_follow import CatalogFollower, FollowReport, index_version, manifest_sha256
from tests.container.conftest import ARTIFACTS_BUCKET

BUCKET = ARTIFACTS_BUCKET
LOCATION = S3Location(BUCKET, "catalog-index")


def write_catalog(path: Path, boots_price: float) -> Path:
    rows = [
        {"id": "B-1", "title": "Zephyr trail hiking boots", "category": "Boots", "price": boots_price},
        {"id": "T-1", "title": "Alpine dome tent for two", "category": "Tents", "price": 240.0},
        {"id": "S-1", "title": "Down sleeping bag", "category": "Sleeping bags", "price": 180.0},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def index_with_price(folder: Path, price: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    build_index(write_catalog(folder / "catalog.jsonl", price), folder / "index")
    return folder / "index"


def boots_price(index: ProductIndex) -> float:
    return index.search("zephyr boots", 1)[0].price


@pytest.fixture
def s3(artifacts_bucket):
    """The catalog's bucket: the artifacts bucket on moto's S3 (tests/container/conftest.py)."""
    return artifacts_bucket


class Served:
    """What the model holds: the index, swapped by the follower; and the follower's reports."""

    def __init__(self, index_dir: Path) -> None:
        self.index = ProductIndex.open(index_dir)
        self.reports: list[FollowReport] = []

    def follower(self, s3, builds_dir: Path, **kwargs) -> CatalogFollower:
        return CatalogFollower(
            LOCATION,
            builds_dir,
            1.0,
            manifest_sha256(self.index.path),
            swap=lambda index: setattr(self, "index", index),
            report=self.reports.append,
            s3_factory=kwargs.pop("s3_factory", lambda: s3),
        )


@pytest.fixture
def first(tmp_path: Path, s3) -> Served:
    """A host serving the first upload (price 100), as the entrypoint left it."""
    index = index_with_price(tmp_path / "v1", 100.0)
    upload_build(s3, index, LOCATION, manifest=MANIFEST_NAME)
    return Served(index)


def publish(s3, tmp_path: Path, price: float, name: str) -> str:
    index = index_with_price(tmp_path / name, price)
    location = upload_build(s3, index, LOCATION, manifest=MANIFEST_NAME)
    return location.prefix.rsplit("/", 1)[-1]


def test_the_version_is_the_builds_upload_time() -> None:
    assert index_version("20261203T110000Z-0123456789ab") == 1796295600
    assert index_version("by-hand") == 0


def test_the_served_build_is_named_and_nothing_swaps(first: Served, s3, tmp_path: Path) -> None:
    follower = first.follower(s3, tmp_path / "builds")
    before = first.index
    report = follower.poll_once()
    assert report.error is None and not report.swapped and report.version and report.version > 0
    assert first.index is before


def test_a_new_build_is_fetched_opened_and_swapped_in(first: Served, s3, tmp_path: Path) -> None:
    follower = first.follower(s3, tmp_path / "builds")
    follower.poll_once()
    name = publish(s3, tmp_path, 55.0, "v2")
    report = follower.poll_once()
    assert (report.swapped, report.build, report.error) == (True, name, None)
    assert boots_price(first.index) == 55.0
    assert first.index.path == tmp_path / "builds" / name
    # The next poll finds it served.
    assert follower.poll_once().swapped is False


def _pointer(s3, body: bytes) -> None:
    s3.put_object(Bucket=BUCKET, Key=f"{LOCATION.prefix}/{POINTER_NAME}", Body=body)


def _keeps_serving(first: Served, follower: CatalogFollower, expected: str) -> FollowReport:
    before = first.index
    report = follower.poll_once()
    assert report.error is not None and expected in report.error, report.error
    assert first.index is before and boots_price(first.index) == 100.0
    assert not report.swapped and follower.failures >= 1
    return report


def test_a_missing_pointer_keeps_the_index(first: Served, s3, tmp_path: Path) -> None:
    s3.delete_object(Bucket=BUCKET, Key=f"{LOCATION.prefix}/{POINTER_NAME}")
    _keeps_serving(first, first.follower(s3, tmp_path / "builds"), "no pointer to follow")


def test_a_corrupt_pointer_keeps_the_index(first: Served, s3, tmp_path: Path) -> None:
    _pointer(s3, b'{"build": "20261203T1')
    _keeps_serving(first, first.follower(s3, tmp_path / "builds"), "not a build pointer")


def test_a_pointer_to_a_missing_build_keeps_the_index(first: Served, s3, tmp_path: Path) -> None:
    digest = hashlib.sha256(b"x").hexdigest()
    pointer = {"build": "20991231T000000Z-000000000000", "manifest": MANIFEST_NAME, "manifest_sha256": digest}
    _pointer(s3, json.dumps(pointer).encode())
    follower = first.follower(s3, tmp_path / "builds")
    _keeps_serving(first, follower, "the build is missing or its upload has not finished")
    assert not any((tmp_path / "builds").glob("2099*")), "no folder under the build's name"


def test_a_half_written_build_keeps_the_index(first: Served, s3, tmp_path: Path) -> None:
    name = publish(s3, tmp_path, 55.0, "v2")
    prefix = f"{LOCATION.prefix}/builds/{name}/"
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]]
    one_file = next(key for key in keys if not key.endswith(MANIFEST_NAME))
    # One file missing, then one file cut short: neither reaches the served index.
    s3.delete_object(Bucket=BUCKET, Key=one_file)
    follower = first.follower(s3, tmp_path / "builds")
    _keeps_serving(first, follower, "is missing")
    s3.put_object(Bucket=BUCKET, Key=one_file, Body=b"cut")
    _keeps_serving(first, follower, "does not match the manifest")
    assert not (tmp_path / "builds" / name).exists()
    assert not [path for path in (tmp_path / "builds").iterdir() if path.name.startswith(".staging")]


class Throttled:
    """moto's client whose GetObject answers S3's SlowDown (a stand-in: moto does not throttle)."""

    def __init__(self, client) -> None:
        self._client = client

    def __getattr__(self, name):
        return getattr(self._client, name)

    def get_object(self, **kwargs):
        error = {"Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."}}
        raise ClientError(error, "GetObject")


def test_throttling_keeps_the_index(first: Served, s3, tmp_path: Path) -> None:
    publish(s3, tmp_path, 55.0, "v2")
    follower = first.follower(s3, tmp_path / "builds", s3_factory=lambda: Throttled(s3))
    _keeps_serving(first, follower, "SlowDown")


def test_a_hanging_s3_is_given_up_within_the_clients_timeouts(first: Served, tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))  # bound here, never picked then bound later
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])  # and never answer
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    hanging = boto3.client(
        "s3",
        region_name="us-east-1",
        endpoint_url=f"http://127.0.0.1:{listener.getsockname()[1]}",
        config=Config(connect_timeout=1, read_timeout=1, retries={"max_attempts": 2, "mode": "standard"}),
    )
    follower = first.follower(None, tmp_path / "builds", s3_factory=lambda: hanging)
    started = time.monotonic()
    try:
        _keeps_serving(first, follower, "Read timeout")
        assert accepted, "the request reached the hanging server"
    finally:
        stop.set()
        thread.join()
        for connection in accepted:
            connection.close()
        listener.close()
    assert time.monotonic() - started < 30


def test_the_follower_thread_polls_reports_and_stops(first: Served, s3, tmp_path: Path) -> None:
    follower = first.follower(s3, tmp_path / "builds").start()
    try:
        publish(s3, tmp_path, 55.0, "v2")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(report.swapped for report in first.reports):
            time.sleep(0.05)
    finally:
        follower.stop()
    assert any(report.swapped for report in first.reports)
    assert boots_price(first.index) == 55.0
    assert not follower._thread.is_alive()


def test_the_follows_own_s3_client_is_bounded(s3) -> None:
    # The hanging-S3 test above shows botocore gives up at such bounds; these are the ones a host uses.
    from serving.catalog_follow import S3_CONNECT_TIMEOUT_S, S3_MAX_ATTEMPTS, S3_READ_TIMEOUT_S, s3_client

    config = s3_client().meta.config
    timeouts = (config.connect_timeout, config.read_timeout)
    assert timeouts == (S3_CONNECT_TIMEOUT_S, S3_READ_TIMEOUT_S) == (3, 10)
    # Two tries in all, the first included.
    assert config.retries["total_max_attempts"] == S3_MAX_ATTEMPTS == 2
    assert S3_MAX_ATTEMPTS * (S3_CONNECT_TIMEOUT_S + S3_READ_TIMEOUT_S) < 30
