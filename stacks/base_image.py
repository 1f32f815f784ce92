"""The serving image's base by digest: the Dockerfile names a tag, container/base-image.digest its digest.

A tag can be moved to other contents by its publisher; a digest cannot. The digest cannot be resolved offline
(it needs the registry), so `make pin-base-image` writes it once with Docker, `make image` and the CDK asset
build FROM `<repository>@<digest>`, and `make deploy` refuses a fleet built from the Dockerfile while the
digest is missing. `docker buildx imagetools inspect --format '{{.Manifest.Digest}}'` prints the index
digest, the one a multi-platform tag points at (docs.docker.com: reference/cli/docker/buildx/imagetools).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

CONTAINER_DIRECTORY = Path(__file__).resolve().parents[1] / "container"
DIGEST_FILE_NAME = "base-image.digest"
_BASE_IMAGE_ARG = re.compile(r"^ARG BASE_IMAGE=(?P<reference>\S+)$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class BaseImageError(ValueError):
    """The Dockerfile's base or the digest file is not what the build needs; the message names file, line."""


def base_image_tag(container_directory: Path = CONTAINER_DIRECTORY) -> str:
    """The tagged reference the Dockerfile's `ARG BASE_IMAGE=` names."""
    dockerfile = container_directory / "Dockerfile"
    for line in dockerfile.read_text().splitlines():
        found = _BASE_IMAGE_ARG.match(line.strip())
        if found:
            return found["reference"]
    raise BaseImageError(f"{dockerfile}: no `ARG BASE_IMAGE=<repository>:<tag>` line")


def pinned_base_image(container_directory: Path = CONTAINER_DIRECTORY) -> str | None:
    """`<repository>@sha256:…` when the digest file holds a digest, None when there is no digest file."""
    digest_file = container_directory / DIGEST_FILE_NAME
    if not digest_file.exists():
        return None
    lines = [
        (number, line.strip())
        for number, line in enumerate(digest_file.read_text().splitlines(), start=1)
        if line.strip() and not line.strip().startswith("#")
    ]
    if len(lines) != 1 or not _DIGEST.match(lines[0][1]):
        where = f"{digest_file}:{lines[0][0]}" if lines else str(digest_file)
        shown = lines[0][1] if lines else "nothing"
        raise BaseImageError(
            f"{where}: expected one line `sha256:<64 hex digits>`, found {shown!r} "
            "(write it with `make pin-base-image`)"
        )
    repository = base_image_tag(container_directory).split("@", 1)[0]
    # The tag goes: only a colon after the last slash is a tag (a registry host may carry a port).
    name_start = repository.rfind("/") + 1
    if ":" in repository[name_start:]:
        repository = repository[: name_start + repository[name_start:].index(":")]
    return f"{repository}@{lines[0][1]}"


def builds_from_dockerfile(config_path: str) -> bool:
    """Whether any fleet of the config has no image URI of its own, so CDK builds it from container/."""
    from settings.loader import load_settings  # late: the plain digest lookup needs no settings

    settings = load_settings(config_path)
    return any(
        settings.image_uri(name, fleet.instance.family) is None
        for name, region in settings.regions.items()
        for fleet in region.fleets
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the serving image's base, pinned by digest.")
    parser.add_argument("--tag", action="store_true", help="print the Dockerfile's tagged base instead")
    parser.add_argument(
        "--allow-unpinned", action="store_true", help="print the tag when no digest is pinned"
    )
    parser.add_argument(
        "--config",
        help="only require a digest when some fleet of this config builds its image from container/",
    )
    arguments = parser.parse_args(argv)
    try:
        if arguments.config and not builds_from_dockerfile(arguments.config):
            return 0
        if arguments.tag:
            print(base_image_tag())
            return 0
        pinned = pinned_base_image()
    except BaseImageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if pinned is None:
        if arguments.allow_unpinned:
            print(base_image_tag())
            return 0
        print(
            f"error: the serving image's base {base_image_tag()} is not pinned by digest "
            f"(container/{DIGEST_FILE_NAME} is missing): run `make pin-base-image` (needs Docker and the "
            "registry), review and commit the file",
            file=sys.stderr,
        )
        return 2
    print(pinned)
    return 0


if __name__ == "__main__":
    sys.exit(main())
