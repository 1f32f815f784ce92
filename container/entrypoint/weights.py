"""Model weights as builds with a manifest, like the catalog index (s3_fetch.py): uploaded each to a prefix of
its own with `weights-manifest.json` (every file's size and sha256) written last, then the pointer
`current.json` switched to it. A host downloads the build the pointer names, checks every file against the
manifest and removes what the manifest does not list, so a data disk kept by a warm-pool host never mixes two
versions of the weights, and a host never starts on a partial or altered upload.

    python -m entrypoint.weights upload FOLDER s3://bucket/prefix/weights/   # the operator, once per model
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from entrypoint.s3_fetch import (
    FetchCount,
    FetchError,
    S3Location,
    check_build_manifest,
    current_build,
    download_prefix,
    upload_build,
)

MANIFEST_NAME = "weights-manifest.json"
_CHUNK = 8 * 1024 * 1024


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def build_manifest(folder: Path) -> dict[str, Any]:
    """Every file under the folder but the manifest itself: relative path -> size and sha256."""
    files = {
        path.relative_to(folder).as_posix(): {"size": path.stat().st_size, "sha256": file_sha256(path)}
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST_NAME
    }
    if not files:
        raise FetchError(f"{folder}: no files to upload")
    return {"files": files}


def verify(folder: Path) -> tuple[int, int]:
    """FetchError naming the first file missing or different from the manifest; then remove every file the
    manifest does not list (left from an earlier version). Returns (files checked, files removed)."""
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError):
        raise FetchError(f"{folder}: no readable {MANIFEST_NAME}") from None
    for name, expected in files.items():
        path = folder / name
        if not path.is_file():
            raise FetchError(f"{folder}: {name} is missing (the download is incomplete)")
        if path.stat().st_size != expected["size"] or file_sha256(path) != expected["sha256"]:
            raise FetchError(f"{folder}: {name} does not match the weights manifest (size or sha256)")
    removed = 0
    for path in sorted(folder.rglob("*"), reverse=True):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and relative != MANIFEST_NAME and relative not in files:
            path.unlink()
            removed += 1
    return len(files), removed


def upload(s3: Any, folder: Path, location: S3Location) -> S3Location:
    """Write the manifest into the folder, upload it as a new build (manifest last), switch the pointer."""
    (folder / MANIFEST_NAME).write_text(json.dumps(build_manifest(folder), indent=1), encoding="utf-8")
    return upload_build(s3, folder, location, manifest=MANIFEST_NAME)


def fetch(s3: Any, location: S3Location, destination: Path) -> str:
    """Download the current build of the weights and verify it; FetchError when there is no pointer (weights
    uploaded without a manifest cannot be checked) or anything differs."""
    build = current_build(s3, location)
    if build is None:
        raise FetchError(
            f"{location}: no {MANIFEST_NAME} build pointer; upload the weights with "
            f"`python -m entrypoint.weights upload FOLDER {location}/`"
        )
    # The manifest is always fetched anew: a kept copy of the same size and second would pass for current.
    (destination / MANIFEST_NAME).unlink(missing_ok=True)
    count: FetchCount = download_prefix(s3, build.location, destination)
    check_build_manifest(destination, build)
    checked, removed = verify(destination)
    return f"{count} from {build.location}, {checked} verified, {removed} stale removed"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m entrypoint.weights", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    put = commands.add_parser("upload", help="upload a weights folder as a new build")
    put.add_argument("folder", type=Path)
    put.add_argument("uri", help="s3://bucket/prefix/weights/ (the config's artifacts_s3_uri + weights/)")
    args = parser.parse_args(argv)
    import boto3

    try:
        location = S3Location.parse(args.uri, variable="uri")
        build = upload(boto3.client("s3"), args.folder, location)
    except FetchError as error:
        print(f"weights: {error}", file=sys.stderr)
        return 1
    print(f"weights: uploaded {build}, pointer {location}/current.json switched to it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
