"""Copy an S3 prefix to local disk (model weights, compiled artifacts); boto3 does the work."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath


class FetchError(RuntimeError):
    """Nothing to fetch, or S3 refused; the message names the URI."""


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str, *, variable: str) -> S3Location:
        if not uri.startswith("s3://") or len(uri) <= len("s3://"):
            raise FetchError(f"{variable}: must be an s3://bucket/prefix URI, got {uri!r}")
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        if not bucket:
            raise FetchError(f"{variable}: no bucket in {uri!r}")
        return cls(bucket, prefix.strip("/"))

    def child(self, name: str) -> S3Location:
        return S3Location(self.bucket, f"{self.prefix}/{name}" if self.prefix else name)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def list_keys(s3, location: S3Location) -> list[str]:
    prefix = f"{location.prefix}/" if location.prefix else ""
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=prefix):
        keys.extend(item["Key"] for item in page.get("Contents", []) if not item["Key"].endswith("/"))
    return keys


def download_prefix(s3, location: S3Location, destination: Path) -> int:
    """Download every object under the prefix, keeping relative paths; return how many files."""
    keys = list_keys(s3, location)
    if not keys:
        raise FetchError(f"{location}: no objects under this prefix")
    prefix = f"{location.prefix}/" if location.prefix else ""
    for key in keys:
        relative = PurePosixPath(key[len(prefix) :])
        if ".." in relative.parts:
            raise FetchError(f"{location}: refusing object key {key!r} that leaves the target folder")
        target = destination.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(location.bucket, key, str(target))
    return len(keys)
