from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

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
