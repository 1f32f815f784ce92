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
    assert 'ENTRYPOINT ["tini", "-s", "--", "python3", "-m", "entrypoint.start"]' in DOCKERFILE
    assert (CONTAINER_DIR / "entrypoint" / "start.py").is_file()
    assert "EXPOSE 8000 8001 8002" in DOCKERFILE


def test_no_catalog_is_baked_into_the_image() -> None:
    """Production serves the shop's index from S3; a demo index in the image would be served silently."""
    assert "assistant.catalog" not in DOCKERFILE and "--catalog" not in DOCKERFILE


def test_the_image_runs_as_a_non_root_user_under_an_init_process() -> None:
    users = re.findall(r"^USER (\S+)$", DOCKERFILE, re.M)
    assert users == ["${SERVING_UID}:${SERVING_UID}"], "the last USER is the one the container runs as"
    (uid,) = re.findall(r"^ARG SERVING_UID=(\d+)$", DOCKERFILE, re.M)
    assert int(uid) != 0
    assert re.search(r"useradd .*--uid \"\$\{SERVING_UID\}\"", DOCKERFILE)
    assert "apt-get install -y --no-install-recommends tini" in DOCKERFILE
    # The user owns its download folders only; the code it runs stays root's.
    (chown,) = re.findall(r"chown serving:serving ([^\n]+(?:\n\s+[^\n]+)?)", DOCKERFILE)
    assert "/opt/serving " not in chown + " " and "model.py" not in chown


def test_the_image_health_check_is_the_cold_start_aware_probe() -> None:
    assert '"entrypoint.healthcheck"' in DOCKERFILE
    assert (CONTAINER_DIR / "entrypoint" / "healthcheck.py").is_file()
