"""Copy an S3 prefix to local disk (model weights, compiled artifacts); boto3 does the work. A file already
on the data disk with the object's size and modification time is kept: a warm-pool host whose EBS data disk
survived its stop starts without downloading again."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
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


@dataclass(frozen=True)
class S3Object:
    key: str
    size: int
    last_modified: datetime


@dataclass(frozen=True)
class FetchCount:
    downloaded: int
    kept: int  # already on disk from an earlier start of this host

    def __str__(self) -> str:
        return f"{self.downloaded + self.kept} files ({self.kept} already on disk)"


def list_objects(s3, location: S3Location) -> list[S3Object]:
    prefix = f"{location.prefix}/" if location.prefix else ""
    found: list[S3Object] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=prefix):
        found.extend(
            S3Object(item["Key"], item["Size"], item["LastModified"])
            for item in page.get("Contents", [])
            if not item["Key"].endswith("/")
        )
    return found


def list_keys(s3, location: S3Location) -> list[str]:
    return [item.key for item in list_objects(s3, location)]


def is_current(target: Path, item: S3Object) -> bool:
    """The file is this object as downloaded before: same size, and the object's time set on it after the
    download (boto3 renames a download into place only once complete, so a partial file is never here)."""
    try:
        stat = target.stat()
    except FileNotFoundError:
        return False
    return stat.st_size == item.size and int(stat.st_mtime) == int(item.last_modified.timestamp())


def download_prefix(s3, location: S3Location, destination: Path) -> FetchCount:
    """Download every object under the prefix, keeping relative paths, skipping files already current."""
    objects = list_objects(s3, location)
    if not objects:
        raise FetchError(f"{location}: no objects under this prefix")
    prefix = f"{location.prefix}/" if location.prefix else ""
    downloaded = kept = 0
    for item in objects:
        relative = PurePosixPath(item.key[len(prefix) :])
        if ".." in relative.parts:
            raise FetchError(f"{location}: refusing object key {item.key!r} that leaves the target folder")
        target = destination.joinpath(*relative.parts)
        if is_current(target, item):
            kept += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(location.bucket, item.key, str(target))
        moment = item.last_modified.timestamp()
        os.utime(target, (moment, moment))
        downloaded += 1
    return FetchCount(downloaded, kept)


def upload_folder(s3, folder: Path, location: S3Location, *, last: str | None = None) -> int:
    """Upload every file under folder to the prefix, keeping relative paths; the file named `last` goes
    last, so a reader that sees it knows the rest is complete. Return how many files."""
    files = sorted(path for path in folder.rglob("*") if path.is_file())
    files.sort(key=lambda path: path.name == last)
    prefix = f"{location.prefix}/" if location.prefix else ""
    for path in files:
        s3.upload_file(str(path), location.bucket, prefix + path.relative_to(folder).as_posix())
    return len(files)
