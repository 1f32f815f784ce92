"""Weights as builds with a manifest on moto's S3: the host gets the build the pointer names, whole and
checked, with files of an earlier version removed from its disk; a partial or altered upload never starts."""

from __future__ import annotations

import json

import pytest

from entrypoint.s3_fetch import FetchError, S3Location
from entrypoint.weights import MANIFEST_NAME, fetch, upload
from tests.container.entrypoint.conftest import ARTIFACTS_BUCKET

BUCKET = ARTIFACTS_BUCKET
WEIGHTS = S3Location(BUCKET, "model/weights")


@pytest.fixture
def s3(artifacts_bucket):
    return artifacts_bucket


def weights(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(body)
    return folder


def test_the_manifest_is_uploaded_last_and_lists_every_file(s3, tmp_path):
    calls = []
    real = s3.upload_file
    s3.upload_file = lambda path, bucket, key: (calls.append(key), real(path, bucket, key))
    build = upload(
        s3, weights(tmp_path / "v1", {"config.json": b"{}", "shards/a.safetensors": b"a" * 10}), WEIGHTS
    )
    assert calls[-1] == f"{build.prefix}/{MANIFEST_NAME}"
    manifest = json.loads((tmp_path / "v1" / MANIFEST_NAME).read_text())
    assert manifest["files"]["shards/a.safetensors"]["size"] == 10
    assert len(manifest["files"]["config.json"]["sha256"]) == 64


def test_a_new_version_replaces_the_old_and_stale_files_are_removed(s3, tmp_path):
    disk = tmp_path / "disk"
    upload(s3, weights(tmp_path / "v1", {"config.json": b"{}", "old-shard.safetensors": b"o" * 8}), WEIGHTS)
    assert "0 stale removed" in fetch(s3, WEIGHTS, disk)
    upload(
        s3, weights(tmp_path / "v2", {"config.json": b'{"v":2}', "new-shard.safetensors": b"n" * 8}), WEIGHTS
    )
    note = fetch(s3, WEIGHTS, disk)
    assert "1 stale removed" in note
    assert sorted(p.name for p in disk.iterdir()) == ["config.json", "new-shard.safetensors", MANIFEST_NAME]
    assert (disk / "config.json").read_bytes() == b'{"v":2}'


def test_an_altered_file_stops_the_start_naming_it(s3, tmp_path):
    build = upload(s3, weights(tmp_path / "v1", {"config.json": b"{}", "a.safetensors": b"a" * 8}), WEIGHTS)
    s3.put_object(Bucket=BUCKET, Key=f"{build.prefix}/a.safetensors", Body=b"b" * 8)  # same size, other bytes
    with pytest.raises(FetchError, match=r"a\.safetensors does not match the weights manifest"):
        fetch(s3, WEIGHTS, tmp_path / "disk")


def test_weights_without_a_manifest_are_refused(s3, tmp_path):
    s3.put_object(Bucket=BUCKET, Key="model/weights/config.json", Body=b"{}")
    with pytest.raises(FetchError, match=r"no weights-manifest\.json build pointer"):
        fetch(s3, WEIGHTS, tmp_path / "disk")
