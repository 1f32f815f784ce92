"""The serving image's base pinned by digest: the file, the CDK asset's build argument, the make targets."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stacks import base_image
from stacks.base_image import BaseImageError, base_image_tag, pinned_base_image

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def container(tmp_path: Path) -> Path:
    folder = tmp_path / "container"
    folder.mkdir()
    shutil.copy(ROOT / "container" / "Dockerfile", folder / "Dockerfile")
    return folder


def test_the_tag_is_the_dockerfiles_own(container: Path) -> None:
    assert base_image_tag(container).startswith("public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:")
    assert pinned_base_image(container) is None


def test_a_digest_replaces_the_tag(container: Path) -> None:
    (container / "base-image.digest").write_text(f"# pinned by make pin-base-image\n{DIGEST}\n")
    assert pinned_base_image(container) == f"public.ecr.aws/neuron/pytorch-inference-vllm-neuronx@{DIGEST}"


def test_a_registry_port_is_not_taken_for_a_tag(container: Path) -> None:
    dockerfile = container / "Dockerfile"
    dockerfile.write_text("ARG BASE_IMAGE=registry.local:5000/team/base:1.0\nFROM ${BASE_IMAGE}\n")
    (container / "base-image.digest").write_text(DIGEST)
    assert pinned_base_image(container) == f"registry.local:5000/team/base@{DIGEST}"


@pytest.mark.parametrize("content", ["sha256:abc\n", "latest\n", f"{DIGEST}\n{DIGEST}\n", "\n"])
def test_a_bad_digest_file_is_named_with_its_line(container: Path, content: str) -> None:
    (container / "base-image.digest").write_text(content)
    with pytest.raises(BaseImageError, match=r"base-image\.digest.*expected one line `sha256:"):
        pinned_base_image(container)


def test_the_asset_build_gets_the_pinned_base(monkeypatch: pytest.MonkeyPatch, container: Path) -> None:
    from stacks import props

    (container / "base-image.digest").write_text(DIGEST)
    monkeypatch.setattr(props, "pinned_base_image", lambda _folder: pinned_base_image(container))
    from settings.loader import load_settings

    settings = load_settings(ROOT / "config" / "default.yaml")
    region = next(iter(settings.regions))
    source = props.image_source(settings, region, settings.regions[region].fleets[0])
    assert dict(source.asset_build_args) == {
        "BASE_IMAGE": f"{base_image_tag(container).split(':0')[0]}@{DIGEST}"
    }


def test_unpinned_is_refused_with_what_to_run() -> None:
    assert pinned_base_image() is None, "a digest was committed: this test then needs a folder without one"
    done = subprocess.run(
        [sys.executable, "-m", "stacks.base_image"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "not pinned by digest" in done.stderr and "make pin-base-image" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_config_whose_fleets_all_have_image_uris_needs_no_digest(tmp_path: Path) -> None:
    default = ROOT / "config" / "default.yaml"
    assert base_image.builds_from_dockerfile(str(default))
    assert base_image.main(["--config", str(default)]) == 2  # nothing pinned here, and a fleet builds from it
    prebuilt = tmp_path / "prebuilt.yaml"
    repository = "123456789012.dkr.ecr.us-east-1.amazonaws.com/assistant"
    prebuilt.write_text(
        default.read_text()
        + f"\ncontainer:\n  image_uris:\n    inf2: {repository}:inf2\n    trn1: {repository}:trn1\n"
    )
    assert not base_image.builds_from_dockerfile(str(prebuilt))
    assert base_image.main(["--config", str(prebuilt)]) == 0


def test_make_deploy_checks_the_pin_and_make_image_builds_from_it() -> None:
    def recipe(*arguments: str) -> str:
        return subprocess.run(
            ["make", "--no-print-directory", "-n", "-W", "venv", *arguments],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            env={k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}},
        ).stdout

    assert "-m stacks.base_image --config config/prime-day.yaml" in recipe(
        "deploy", "CONFIG=config/prime-day.yaml"
    )
    assert "stacks.base_image" not in recipe("deploy", "DRY_RUN=1", "CONFIG=config/prime-day.yaml")
    image = recipe("image")
    assert '-m stacks.base_image )" &&' in image and '--build-arg BASE_IMAGE="$base"' in image
    assert "--allow-unpinned" in recipe("image", "UNPINNED=1")
