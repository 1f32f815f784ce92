"""The image's compile mode on moto's S3, with the engine's compile replaced by a STAND-IN (no Neuron device
here): it plans the serving host's own key, writes the artifacts under compiled/<key>/ with the completion
manifest last, and a serving host then accepts them."""

# ruff: noqa: F811 (the serving start tests' fixtures, imported by name, are the tests' arguments)
from __future__ import annotations

import json

import pytest

from entrypoint.artifact_key import MANIFEST_NAME
from entrypoint.compile import main as compile_main
from tests.container.entrypoint.test_start import (  # noqa: F401 (fixtures)
    BUCKET,
    TOOLCHAIN,
    devices,
    environ,
    repository,
    s3,
    serving_user,
    start,
)

pytestmark = pytest.mark.vllm_version


def neuron_stand_in(plan, environment):
    """What vLLM's Neuron plugin leaves in NEURON_COMPILED_ARTIFACTS after compiling (a STAND-IN)."""
    folder = environment["NEURON_COMPILED_ARTIFACTS"]
    with open(f"{folder}/model.pt", "wb") as handle:
        handle.write(b"neff")


def test_compile_uploads_the_key_with_its_manifest_last_and_a_host_then_starts(environ, s3, devices, capsys):
    uploads = []
    real = s3.upload_file
    s3.upload_file = lambda path, bucket, key: (uploads.append(key), real(path, bucket, key))
    assert compile_main([], environ, s3_client=lambda: s3, compiler=neuron_stand_in, toolchain=TOOLCHAIN) == 0
    out = capsys.readouterr().out
    assert uploads[-1].endswith(f"/{MANIFEST_NAME}") and "model.pt" in uploads[0]
    key = uploads[-1].split("/")[-2]
    assert f"compiled {key}: 2 files" in out
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=uploads[-1])["Body"].read())
    assert manifest["key"] == key
    calls = []
    assert start([], environ, devices, s3_client=lambda: s3, exec_fn=lambda *a: calls.append(a)) == 0
    assert calls and calls[0][2]["NEURON_COMPILED_ARTIFACTS"].endswith(key)


def test_a_key_already_complete_is_not_compiled_again(environ, s3, capsys):
    assert compile_main([], environ, s3_client=lambda: s3, compiler=neuron_stand_in, toolchain=TOOLCHAIN) == 0
    again = []
    assert (
        compile_main(
            [], environ, s3_client=lambda: s3, compiler=lambda p, e: again.append(p), toolchain=TOOLCHAIN
        )
        == 0
    )
    assert again == [] and "already complete; nothing compiled" in capsys.readouterr().out


def test_an_engine_that_wrote_nothing_uploads_no_manifest(environ, s3, capsys):
    assert (
        compile_main([], environ, s3_client=lambda: s3, compiler=lambda p, e: None, toolchain=TOOLCHAIN) == 2
    )
    assert "wrote no compiled artifacts" in capsys.readouterr().err
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="compiled/").get("Contents", [])
    assert not [o for o in listed if o["Key"].endswith(MANIFEST_NAME)]
