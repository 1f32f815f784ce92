"""Copy an S3 prefix to local disk (model weights, compiled artifacts); boto3 does the work. A file already
on the data disk with the object's size and modification time is kept: a warm-pool host whose EBS data disk
survived its stop starts without downloading again. An object key that would land outside the target folder
(an absolute or `..` part) stops the download.

Builds that replace each other (the catalog index) are uploaded each to a prefix of its own, `builds/<id>/`,
and a pointer object beside them (`current.json`), written last, names the current one: a host that starts
while a build uploads reads the previous pointer and gets the previous build whole, never a mix of the two.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

POINTER_NAME = "current.json"
BUILDS_FOLDER = "builds"
_BUILD_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]{0,127}$")


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


def local_path(key: str, location: S3Location, destination: Path) -> Path:
    """Where an object under the location lands in destination; FetchError for a key that would land
    elsewhere: an absolute part ("prefix//etc/cron.d/x"), a `..` part, or nothing after the prefix."""
    prefix = f"{location.prefix}/" if location.prefix else ""
    if not key.startswith(prefix):
        raise FetchError(f"{location}: refusing object key {key!r} outside the prefix")
    relative = key[len(prefix) :]
    parts = relative.split("/")
    if relative.startswith("/") or "\\" in relative or any(part in {"", ".", ".."} for part in parts):
        raise FetchError(f"{location}: refusing object key {key!r} that leaves the target folder")
    target = destination.joinpath(*parts)
    # A symlink already in the destination could still lead out of it.
    if not target.resolve().is_relative_to(destination.resolve()):
        raise FetchError(f"{location}: refusing object key {key!r} that leaves the target folder")
    return target


def download_prefix(s3, location: S3Location, destination: Path) -> FetchCount:
    """Download every object under the prefix, keeping relative paths, skipping files already current.
    Every key is checked before any download, so a bad key leaves the destination as it was."""
    objects = list_objects(s3, location)
    if not objects:
        raise FetchError(f"{location}: no objects under this prefix")
    targets = [local_path(item.key, location, destination) for item in objects]
    downloaded = kept = 0
    for item, target in zip(objects, targets, strict=True):
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


def build_id(manifest_bytes: bytes, now: datetime | None = None) -> str:
    """A new build's prefix name: when it was uploaded, and whose manifest (so two uploads of one second
    still differ when their content does)."""
    moment = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{moment}-{hashlib.sha256(manifest_bytes).hexdigest()[:12]}"


def upload_build(
    s3, folder: Path, location: S3Location, *, manifest: str, now: datetime | None = None
) -> S3Location:
    """Upload the folder as a new build under <location>/builds/<id>/ (its manifest last), then point
    <location>/current.json at it. Returns the build's location."""
    manifest_bytes = (folder / manifest).read_bytes()
    build = build_id(manifest_bytes, now)
    target = location.child(f"{BUILDS_FOLDER}/{build}")
    upload_folder(s3, folder, target, last=manifest)
    pointer = {
        "build": build,
        "manifest": manifest,
        "manifest_sha256": hashlib.sha256(manifest_bytes).hexdigest(),
    }
    s3.put_object(
        Bucket=location.bucket,
        Key=location.child(POINTER_NAME).prefix,
        Body=json.dumps(pointer, indent=1).encode(),
        ContentType="application/json",
    )
    return target


@dataclass(frozen=True)
class CurrentBuild:
    location: S3Location
    manifest: str
    manifest_sha256: str


def current_build(s3, location: S3Location) -> CurrentBuild | None:
    """The build the pointer under the location names, or None where there is no pointer (an index
    uploaded straight to the prefix). FetchError for a pointer that is unreadable or names a place outside
    the location's builds."""
    key = location.child(POINTER_NAME).prefix
    try:
        body = s3.get_object(Bucket=location.bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    try:
        pointer = json.loads(body)
        build, manifest, digest = pointer["build"], pointer["manifest"], pointer["manifest_sha256"]
    except (ValueError, KeyError, TypeError):
        raise FetchError(
            f"s3://{location.bucket}/{key}: not a build pointer (build, manifest, manifest_sha256)"
        ) from None
    for name, value in (("build", build), ("manifest", manifest)):
        if not isinstance(value, str) or not _BUILD_ID.match(value):
            raise FetchError(f"s3://{location.bucket}/{key}: {name} {value!r} is not a plain name")
    if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise FetchError(f"s3://{location.bucket}/{key}: manifest_sha256 is not a sha256")
    return CurrentBuild(location.child(f"{BUILDS_FOLDER}/{build}"), manifest, digest)


def check_build_manifest(folder: Path, build: CurrentBuild) -> None:
    """FetchError unless the downloaded manifest is the one the pointer names (by sha256)."""
    try:
        actual = hashlib.sha256((folder / build.manifest).read_bytes()).hexdigest()
    except OSError:
        raise FetchError(f"{build.location}: no {build.manifest} in the build") from None
    if actual != build.manifest_sha256:
        raise FetchError(
            f"{build.location}/{build.manifest}: not the manifest the pointer names (sha256 differs)"
        )
