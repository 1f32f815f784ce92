"""Fetching a prefix against moto's S3: a second start on the same data disk (a warm-pool host whose EBS
volume survived its stop) downloads nothing that is still current, and anything that changed again."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from entrypoint.s3_fetch import (
    FetchCount,
    FetchError,
    S3Location,
    check_build_manifest,
    current_build,
    download_prefix,
    upload_build,
)
from tests.container.entrypoint.conftest import ARTIFACTS_BUCKET

BUCKET = ARTIFACTS_BUCKET
WEIGHTS = S3Location(BUCKET, "weights/llama")


@pytest.fixture
def s3(artifacts_bucket):
    client = artifacts_bucket
    client.put_object(Bucket=BUCKET, Key="weights/llama/config.json", Body=b"{}")
    client.put_object(Bucket=BUCKET, Key="weights/llama/shards/model-00001.safetensors", Body=b"w" * 64)
    return client


def test_a_second_start_on_the_same_disk_keeps_every_current_file(s3, tmp_path):
    assert download_prefix(s3, WEIGHTS, tmp_path) == FetchCount(downloaded=2, kept=0)
    assert download_prefix(s3, WEIGHTS, tmp_path) == FetchCount(downloaded=0, kept=2)
    assert (tmp_path / "shards" / "model-00001.safetensors").read_bytes() == b"w" * 64


def test_a_changed_object_is_downloaded_again(s3, tmp_path):
    download_prefix(s3, WEIGHTS, tmp_path)
    s3.put_object(Bucket=BUCKET, Key="weights/llama/config.json", Body=b'{"v": 2}')
    assert download_prefix(s3, WEIGHTS, tmp_path) == FetchCount(downloaded=1, kept=1)
    assert (tmp_path / "config.json").read_bytes() == b'{"v": 2}'


def test_a_file_of_the_right_size_but_not_from_this_object_is_replaced(s3, tmp_path):
    """Same size is not enough: only the object's own time on the file says it came from this object."""
    target = tmp_path / "config.json"
    target.write_bytes(b"xx")
    os.utime(target, (0, 0))
    assert download_prefix(s3, WEIGHTS, tmp_path).downloaded == 2
    assert target.read_bytes() == b"{}"


def test_the_count_reads_as_files_and_kept_files():
    assert str(FetchCount(downloaded=3, kept=5)) == "8 files (5 already on disk)"


# ---- keys that would land outside the target folder ----
@pytest.mark.parametrize(
    "bad_key",
    [
        "weights/llama//etc/cron.d/job",  # an absolute part after the prefix
        "weights/llama/../../home/user/.bashrc",
        "weights/llama/shards/../../../x",
        "weights/llama/./config.json",
        "weights/llama/a\\..\\..\\x",
    ],
)
def test_a_key_that_leaves_the_target_folder_stops_the_download(s3, tmp_path, bad_key):
    s3.put_object(Bucket=BUCKET, Key=bad_key, Body=b"#!/bin/sh\n")
    destination = tmp_path / "weights"
    with pytest.raises(FetchError, match=r"refusing object key .* that leaves the target folder"):
        download_prefix(s3, WEIGHTS, destination)
    assert not destination.exists(), "nothing is downloaded when any key is bad"
    assert not list(tmp_path.parent.rglob("cron.d"))


def test_a_symlink_in_the_destination_cannot_lead_out(s3, tmp_path):
    destination = tmp_path / "weights"
    destination.mkdir()
    (destination / "shards").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(FetchError, match="leaves the target folder"):
        download_prefix(s3, WEIGHTS, destination)


# ---- builds under their own prefix, and the pointer written last ----
INDEX = S3Location(BUCKET, "catalog-index")


def _index_folder(folder, products: int):
    """A folder like an index build: data files and the manifest naming them."""
    folder.mkdir(parents=True)
    (folder / "segment.store").write_bytes(b"s" * products)
    (folder / "meta.json").write_text(json.dumps({"products": products}))
    (folder / "assistant-index.json").write_text(json.dumps({"products": products, "files": 2}))
    return folder


class UploadCutShort:
    """The uploader's S3 client dying after some uploads (a laptop closed mid-`make index`)."""

    def __init__(self, client, uploads: int) -> None:
        self.client, self.left = client, uploads

    def upload_file(self, *args, **kwargs):
        if self.left == 0:
            raise ConnectionError("connection lost")
        self.left -= 1
        return self.client.upload_file(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.client, name)


def _fetch_index(s3, destination):
    build = current_build(s3, INDEX)
    download_prefix(s3, build.location, destination)
    check_build_manifest(destination, build)
    return json.loads((destination / "meta.json").read_text())["products"]


def test_a_host_starting_mid_upload_gets_the_previous_build_whole(s3, tmp_path):
    first = upload_build(s3, _index_folder(tmp_path / "one", 10), INDEX, manifest="assistant-index.json")
    assert first.prefix.startswith("catalog-index/builds/")
    with pytest.raises(ConnectionError):
        upload_build(
            UploadCutShort(s3, uploads=2),
            _index_folder(tmp_path / "two", 20),
            INDEX,
            manifest="assistant-index.json",
        )
    assert _fetch_index(s3, tmp_path / "host-a") == 10
    assert sorted(path.name for path in (tmp_path / "host-a").iterdir()) == [
        "assistant-index.json",
        "meta.json",
        "segment.store",
    ]
    upload_build(s3, _index_folder(tmp_path / "three", 30), INDEX, manifest="assistant-index.json")
    assert _fetch_index(s3, tmp_path / "host-b") == 30


def test_each_build_has_its_own_prefix(s3, tmp_path):
    moment = datetime(2026, 12, 1, 16, 0, tzinfo=UTC)
    one = upload_build(
        s3, _index_folder(tmp_path / "one", 1), INDEX, manifest="assistant-index.json", now=moment
    )
    two = upload_build(
        s3, _index_folder(tmp_path / "two", 2), INDEX, manifest="assistant-index.json", now=moment
    )
    assert one != two and one.prefix.startswith("catalog-index/builds/20261201T160000Z-")
    assert current_build(s3, INDEX).location == two


def test_no_pointer_means_the_prefix_itself(s3):
    assert current_build(s3, INDEX) is None


@pytest.mark.parametrize(
    ("pointer", "message"),
    [
        (b"{oops", "not a build pointer"),
        (json.dumps({"build": "x"}).encode(), "not a build pointer"),
        (
            json.dumps({"build": "../weights", "manifest": "m.json", "manifest_sha256": "0" * 64}).encode(),
            "build '../weights' is not a plain name",
        ),
        (
            json.dumps({"build": "b1", "manifest": "/etc/passwd", "manifest_sha256": "0" * 64}).encode(),
            "manifest '/etc/passwd' is not a plain name",
        ),
        (
            json.dumps({"build": "b1", "manifest": "m.json", "manifest_sha256": "abc"}).encode(),
            "manifest_sha256 is not a sha256",
        ),
    ],
)
def test_a_bad_pointer_is_refused(s3, pointer, message):
    s3.put_object(Bucket=BUCKET, Key="catalog-index/current.json", Body=pointer)
    with pytest.raises(FetchError, match=message):
        current_build(s3, INDEX)


def test_a_build_whose_manifest_is_not_the_pointers_is_refused(s3, tmp_path):
    build = upload_build(s3, _index_folder(tmp_path / "one", 10), INDEX, manifest="assistant-index.json")
    s3.put_object(Bucket=BUCKET, Key=f"{build.prefix}/assistant-index.json", Body=b'{"products": 11}')
    with pytest.raises(FetchError, match="not the manifest the pointer names"):
        _fetch_index(s3, tmp_path / "host")
