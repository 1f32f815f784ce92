"""The production Dockerfile cannot be built here (no Docker engine); check what it refers to exists."""

from __future__ import annotations

import re
from pathlib import Path

CONTAINER_DIR = Path(__file__).resolve().parents[2] / "container"
DOCKERFILE = (CONTAINER_DIR / "Dockerfile").read_text()


def test_every_copied_path_exists_in_the_build_context() -> None:
    sources = [
        source
        for line in re.findall(r"^COPY (.+)$", DOCKERFILE, re.M)
        for source in line.split()[:-1]
        if not source.startswith("--")
    ]
    assert sources
    for source in sources:
        assert (CONTAINER_DIR / source).exists(), source


def test_every_pip_requirement_is_pinned() -> None:
    files = sorted((CONTAINER_DIR / "requirements").glob("*.txt"))
    assert len(files) >= 7, files  # the image's, and each serving environment's three steps
    for path in files:
        for line in path.read_text().splitlines():
            pin = line.strip()
            if pin and not pin.startswith("#"):
                assert re.fullmatch(r"[A-Za-z0-9_.\-\[\],]+==[0-9][0-9A-Za-z.+]*", pin), (path.name, line)


def test_entrypoint_and_ports() -> None:
    assert 'ENTRYPOINT ["python3", "-m", "entrypoint.start"]' in DOCKERFILE
    assert (CONTAINER_DIR / "entrypoint" / "start.py").is_file()
    assert "EXPOSE 8000 8001 8002" in DOCKERFILE


def test_no_catalog_is_baked_into_the_image() -> None:
    """Production serves the shop's index from S3; a demo index in the image would be served silently."""
    assert "assistant.catalog" not in DOCKERFILE and "--catalog" not in DOCKERFILE
