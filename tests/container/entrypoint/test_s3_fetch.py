"""Fetching a prefix against moto's S3: a second start on the same data disk (a warm-pool host whose EBS
volume survived its stop) downloads nothing that is still current, and anything that changed again."""

from __future__ import annotations

import os

import boto3
import pytest
from moto import mock_aws

from entrypoint.s3_fetch import FetchCount, S3Location, download_prefix

BUCKET = "artifacts"
WEIGHTS = S3Location(BUCKET, "weights/llama")


@pytest.fixture
def s3(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        client.put_object(Bucket=BUCKET, Key="weights/llama/config.json", Body=b"{}")
        client.put_object(Bucket=BUCKET, Key="weights/llama/shards/model-00001.safetensors", Body=b"w" * 64)
        yield client


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
