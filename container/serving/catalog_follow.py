"""The live catalog: a host follows the index's pointer (`current.json`) and swaps a new build in.

`make index UPLOAD=` writes each build under `builds/<UTC time>-<manifest sha>/` and the pointer last
(entrypoint/s3_fetch.py). Every CATALOG_FOLLOW_SECONDS a replica reads the pointer; when it names a build
other than the one served (by the manifest's sha256), the build is downloaded beside the served one, checked
file by file against its manifest, opened, and handed to the model, which rebinds its index between
requests: a request already past retrieval keeps the products it found, the next one searches the new build.
All of it runs on this thread, never on Triton's or the engine loop's.

Only s3:GetObject is needed: the build is fetched by the files its manifest lists, not by listing the prefix.
The replicas of one host share a download folder; a lock file makes the first download a build and the
others open it.

Whatever goes wrong (no pointer, a corrupt one, one naming a build that is missing or half uploaded, S3
throttling or not answering within the client's timeouts, an index that does not open) leaves the served
index as it is: the failure is printed and counted (`IndexFollowFailed` on the follow's EMF line), and the
next poll tries again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from assistant.environ_number import whole_number_from_environ
from entrypoint.s3_fetch import CurrentBuild, FetchError, S3Location, current_build, local_path
from serving.line_out import emit

FOLLOW_SECONDS_ENV = "CATALOG_FOLLOW_SECONDS"
FOLLOW_DIR_ENV = "CATALOG_FOLLOW_DIR"
INDEX_URI_ENV = "CATALOG_INDEX_S3_URI"
# Bounds on one S3 call, so a hanging S3 holds a poll for seconds, not for ever (botocore's defaults are 60 s
# each, with up to 3 tries in its standard mode): at most 2 x (3 + 10) s.
S3_CONNECT_TIMEOUT_S = 3
S3_READ_TIMEOUT_S = 10
S3_MAX_ATTEMPTS = 2
# Builds kept on the data disk: the one served, and the ones before it a slower replica may still serve.
BUILDS_KEPT = 3
_BUILD_TIME = re.compile(r"^(\d{8}T\d{6}Z)-")


def index_version(build: str) -> int:
    """The build's upload time in Unix seconds (its name starts with it): the IndexVersion gauge, which
    grows with every upload, so hosts on different builds show as a spread between its minimum and maximum.
    0 for a build named otherwise."""
    found = _BUILD_TIME.match(build)
    if found is None:
        return 0
    return int(datetime.strptime(found.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp())


def build_name(build: CurrentBuild) -> str:
    return build.location.prefix.rsplit("/", 1)[-1]


def follow_seconds(environ: Mapping[str, str]) -> int:
    return whole_number_from_environ(environ, FOLLOW_SECONDS_ENV, 0, "seconds (0: off)")


def s3_client():
    """boto3's S3 client with bounded timeouts and tries."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        config=Config(
            connect_timeout=S3_CONNECT_TIMEOUT_S,
            read_timeout=S3_READ_TIMEOUT_S,
            # total_max_attempts counts the first try; botocore's max_attempts would count retries only.
            retries={"total_max_attempts": S3_MAX_ATTEMPTS, "mode": "standard"},
        ),
    )


@contextlib.contextmanager
def _locked(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fetch_build(
    s3, build: CurrentBuild, builds_dir: Path, verify: Callable[[Path], object] | None = None
) -> Path:
    """The build on local disk, complete and checked against its manifest: downloaded into a staging folder
    and renamed into place only once every file matches (`verify`, by default the index's file check), so a
    folder under its own name is always whole. FetchError or CatalogIndexError when the build is not (yet)
    whole in S3."""
    from botocore.exceptions import ClientError

    if verify is None:
        from assistant.retrieve import verify_files as verify

    target = builds_dir / build_name(build)
    with _locked(builds_dir):
        if target.is_dir():
            return target  # another replica of this host fetched it
        staging = builds_dir / f".staging-{build_name(build)}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        try:
            manifest_key = build.location.child(build.manifest).prefix
            try:
                body = s3.get_object(Bucket=build.location.bucket, Key=manifest_key)["Body"].read()
            except s3.exceptions.NoSuchKey:
                raise FetchError(
                    f"{build.location}: no {build.manifest} (the build is missing or its upload has not "
                    "finished)"
                ) from None
            if hashlib.sha256(body).hexdigest() != build.manifest_sha256:
                raise FetchError(f"{build.location}/{build.manifest}: not the manifest the pointer names")
            try:
                files = json.loads(body)["files"]
                names = [name for name in files if isinstance(name, str)]
            except (ValueError, KeyError, TypeError):
                raise FetchError(f"{build.location}/{build.manifest}: lists no files") from None
            for name in names:
                key = build.location.child(name).prefix
                path = local_path(key, build.location, staging)
                path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    s3.download_file(build.location.bucket, key, str(path))
                except ClientError as err:
                    if err.response.get("Error", {}).get("Code") in {"404", "NoSuchKey"}:
                        raise FetchError(f"{build.location}: {name} is missing (half uploaded?)") from None
                    raise
            (staging / build.manifest).write_bytes(body)
            verify(staging)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def prune(builds_dir: Path, keep: int = BUILDS_KEPT) -> None:
    """Remove all but the newest `keep` builds (their names sort by upload time)."""
    with _locked(builds_dir):
        builds = sorted(
            path for path in builds_dir.iterdir() if path.is_dir() and not path.name.startswith(".")
        )
        for old in builds[:-keep]:
            shutil.rmtree(old, ignore_errors=True)


@dataclass
class FollowReport:
    """One poll's outcome, for the EMF line."""

    version: int | None
    build: str | None
    swapped: bool
    error: str | None


class CatalogFollower:
    """Polls the pointer on its own thread; `swap(index)` receives each new build's opened index."""

    def __init__(
        self,
        location: S3Location,
        builds_dir: Path,
        interval_s: float,
        serving_manifest_sha256: str,
        swap: Callable[[Any], None],
        report: Callable[[FollowReport], None],
        s3_factory: Callable[[], Any] = s3_client,
    ) -> None:
        self.location = location
        self.builds_dir = builds_dir
        self.interval_s = interval_s
        self.serving_sha = serving_manifest_sha256
        self.version: int | None = None
        self.build: str | None = None
        self.failures = 0
        self._swap = swap
        self._report = report
        self._s3_factory = s3_factory
        self._s3 = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="catalog-follow", daemon=True)

    def start(self) -> CatalogFollower:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            outcome = self.poll_once()
            try:
                self._report(outcome)
            except Exception as err:  # a metric line that cannot be written must not end the follow
                emit(f"catalog follow: could not report: {type(err).__name__}: {err}")
            self._stop.wait(self.interval_s)

    def poll_once(self) -> FollowReport:
        """Read the pointer; fetch, open and swap in the build it names when that is not the one served."""
        from botocore.exceptions import BotoCoreError, ClientError

        from assistant.retrieve import CatalogIndexError, ProductIndex

        try:
            if self._s3 is None:
                self._s3 = self._s3_factory()
            build = current_build(self._s3, self.location)
            if build is None:
                raise FetchError(f"{self.location}/current.json: no pointer to follow")
            name = build_name(build)
            if build.manifest_sha256 == self.serving_sha:
                self.version, self.build = index_version(name), name
                return FollowReport(self.version, name, False, None)
            folder = fetch_build(self._s3, build, self.builds_dir)
            index = ProductIndex.open(folder)
            self._swap(index)
            self.serving_sha = build.manifest_sha256
            self.version, self.build = index_version(name), name
            prune(self.builds_dir)
            emit(f"catalog follow: now serving {name} ({index.describe()})")
            return FollowReport(self.version, name, True, None)
        except (FetchError, CatalogIndexError, BotoCoreError, ClientError, OSError) as err:
            self.failures += 1
            message = f"{type(err).__name__}: {err}"
            serving = self.build or "the index loaded at start"
            emit(f"catalog follow: keeping {serving}: {message}")
            return FollowReport(self.version, self.build, False, message)


def manifest_sha256(index_dir: Path) -> str:
    from assistant.retrieve import MANIFEST_NAME

    return hashlib.sha256((index_dir / MANIFEST_NAME).read_bytes()).hexdigest()
