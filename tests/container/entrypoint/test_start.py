"""The entrypoint: its plan (dry-run), the key-miss policy, and the S3 fetch against moto."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from assistant.catalog import generate_catalog, write_catalog
from assistant.retrieve import MANIFEST_NAME as INDEX_MANIFEST
from assistant.retrieve import build_index
from entrypoint.artifact_key import MANIFEST_NAME, artifact_key, compile_inputs, completion_manifest
from entrypoint.s3_fetch import S3Location, upload_build, upload_folder
from entrypoint.start import StartError, check_user, main, neuron_cores_present, plan_start
from entrypoint.weights import upload as upload_weights
from serving.engine_settings import engine_settings

pytestmark = pytest.mark.vllm_version

REPOSITORY = Path(__file__).resolve().parents[3] / "container" / "model_repository"
BUCKET = "kit-models"


@pytest.fixture(autouse=True)
def serving_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests run as root in this sandbox; the image runs as uid 10001, which the start expects."""
    monkeypatch.setattr("entrypoint.start._effective_uid", lambda: 10001)


@pytest.fixture()
def repository(tmp_path: Path) -> Path:
    """A copy of the real model repository whose model.json points the weights at tmp_path."""
    copy = tmp_path / "model_repository"
    shutil.copytree(REPOSITORY, copy, symlinks=True)
    model_json = copy / "assistant" / "1" / "model.json"
    settings = json.loads(model_json.read_text())
    settings["model"] = settings["tokenizer"] = str(tmp_path / "weights")
    model_json.write_text(json.dumps(settings))
    return copy


@pytest.fixture()
def environ(repository: Path, tmp_path: Path) -> dict[str, str]:
    return {
        "MODEL_REPOSITORY": str(repository),
        "MODEL_S3_URI": f"s3://{BUCKET}/weights/llama",
        "COMPILED_ARTIFACTS_S3_URI": f"s3://{BUCKET}/compiled",
        "COMPILED_ARTIFACTS_DIR": str(tmp_path / "compiled"),
        "CATALOG_INDEX_S3_URI": f"s3://{BUCKET}/catalog-index/",
        "ASSISTANT_INDEX_DIR": str(tmp_path / "index"),
        "REPLICAS_PER_HOST": "3",
        "INSTANCE_TYPE": "inf2.48xlarge",
        "MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }


# What the serving image's packages report (this machine has no Neuron SDK: its lookup refuses to key).
TOOLCHAIN = (("neuronx-cc", "2.23.6484.0"), ("torch-neuronx", "2.9.0.2.12.22436"), ("vllm", "0.13.0"))
INF2_48XLARGE_DEVICES = 12


@pytest.fixture()
def devices(tmp_path: Path) -> Path:
    """The /dev of a container on an inf2.48xlarge with every Neuron device mapped (24 NeuronCores)."""
    folder = tmp_path / "dev"
    folder.mkdir()
    for number in range(INF2_48XLARGE_DEVICES):
        (folder / f"neuron{number}").touch()
    (folder / "null").touch()
    return folder


def start(argv: list[str], environ: dict[str, str], devices: Path | None = None, **kwargs) -> int:
    return main(argv, environ, toolchain=TOOLCHAIN, device_dir=devices or Path("/nonexistent"), **kwargs)


def expected_inputs(environ: dict[str, str]):
    model_json = Path(environ["MODEL_REPOSITORY"]) / "assistant" / "1" / "model.json"
    return compile_inputs(engine_settings(model_json, environ), environ, TOOLCHAIN)


def expected_key(environ: dict[str, str]) -> str:
    return artifact_key(expected_inputs(environ))


def put_artifacts(s3, environ: dict[str, str], *, manifest: dict | None = None) -> str:
    """A compile job's output: the graphs, then the completion manifest last."""
    key = expected_key(environ)
    s3.put_object(Bucket=BUCKET, Key=f"compiled/{key}/model.pt", Body=b"neff")
    body = json.dumps(manifest if manifest is not None else completion_manifest(expected_inputs(environ)))
    s3.put_object(Bucket=BUCKET, Key=f"compiled/{key}/{MANIFEST_NAME}", Body=body.encode())
    return key


def test_dry_run_prints_key_variables_and_command(environ, capsys) -> None:
    assert start(["--dry-run"], {**environ, "ENGINE_TENSOR_PARALLEL_SIZE": "32"}) == 0
    out = capsys.readouterr().out
    key = expected_key({**environ, "ENGINE_TENSOR_PARALLEL_SIZE": "32"})
    assert f"artifact key: {key}" in out and "-tp32-" in key
    assert "engine replicas: 3 x tensor parallel 32 (NeuronCores 0-95)" in out
    assert "REPLICAS_PER_HOST=3" in out
    assert f"NEURON_COMPILED_ARTIFACTS={environ['COMPILED_ARTIFACTS_DIR']}/{key}" in out
    for flag in (
        "--http=0.0.0.0:8000",
        "--grpc=0.0.0.0:8001",
        "--metrics-port=8002",
        "--load-model=assistant",
    ):
        assert flag in out


def test_the_edge_holds_the_public_ports_and_triton_listens_on_loopback_behind_it(environ) -> None:
    """The ALB's ports are the body cap's (container/edge): Triton 2.51 would take any body."""
    command = plan_start(environ, toolchain=TOOLCHAIN).command
    separator = command.index("--")
    edge, triton = command[:separator], command[separator + 1 :]
    assert edge[1:3] == ["-m", "edge.run"]
    assert "--http=0.0.0.0:8000" in edge and "--grpc=0.0.0.0:8001" in edge
    assert "--triton-http=127.0.0.1:18000" in edge and "--triton-grpc=127.0.0.1:18001" in edge
    assert triton[0].endswith("tritonserver")
    assert "--metrics-address=0.0.0.0" in triton, "metrics would follow --http-address onto loopback"
    for flag in (
        "--http-address=127.0.0.1",
        "--http-port=18000",
        "--grpc-address=127.0.0.1",
        "--grpc-port=18001",
    ):
        assert flag in triton


def test_a_public_port_on_tritons_loopback_port_is_refused(environ) -> None:
    with pytest.raises(StartError, match="HTTP_PORT, GRPC_PORT, METRICS_PORT: \\[18000\\]"):
        plan_start({**environ, "HTTP_PORT": "18000"}, toolchain=TOOLCHAIN)


def test_admin_apis_are_restricted_behind_a_fresh_key_never_printed(environ, capsys) -> None:
    from entrypoint.admin_api import HTTP_HEADER, RESTRICTED_APIS

    first, second = plan_start(environ, toolchain=TOOLCHAIN), plan_start(environ, toolchain=TOOLCHAIN)
    groups = ",".join(RESTRICTED_APIS)
    for flag in ("--http-restricted-api", "--grpc-restricted-protocol"):
        (argument,) = [a for a in first.command if a.startswith(f"{flag}=")]
        apis, key = argument.split("=", 1)[1].split(f":{HTTP_HEADER}=")
        assert apis == groups and len(key) >= 32
        assert argument not in second.command, "the key is generated at every start"
    assert set(RESTRICTED_APIS) == {
        "model-repository",
        "model-config",
        "shared-memory",
        "logging",
        "trace",
        "statistics",
    }
    assert start(["--dry-run"], environ) == 0
    out = capsys.readouterr().out
    assert f"--http-restricted-api={groups}:{HTTP_HEADER}=<redacted>" in out
    assert f"--grpc-restricted-protocol={groups}:{HTTP_HEADER}=<redacted>" in out


def test_instance_type_override_changes_the_key(environ) -> None:
    inf2 = plan_start({**environ, "ENGINE_TENSOR_PARALLEL_SIZE": "24"}, toolchain=TOOLCHAIN)
    trn1 = plan_start({**environ, "ENGINE_TENSOR_PARALLEL_SIZE": "32"}, toolchain=TOOLCHAIN)
    assert inf2.key != trn1.key
    assert "NEURON_RT_VISIBLE_CORES" not in inf2.environment, "each replica pins its own cores"


def test_print_manifest_is_what_the_host_accepts(environ, capsys) -> None:
    assert start(["--print-manifest"], environ) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(
        json.dumps(completion_manifest(expected_inputs(environ)))
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"MODEL_S3_URI": ""}, "MODEL_S3_URI must be set"),
        ({"CATALOG_INDEX_S3_URI": ""}, "CATALOG_INDEX_S3_URI must be set"),
        ({"REPLICAS_PER_HOST": "0"}, "REPLICAS_PER_HOST: must be a whole number of at least 1"),
        ({"COMPILED_ARTIFACTS_S3_URI": "bucket/compiled"}, "COMPILED_ARTIFACTS_S3_URI: must be an s3://"),
        ({"INSTANCE_TYPE": ""}, "INSTANCE_TYPE must be set"),
        ({"HTTP_PORT": "http"}, "HTTP_PORT: must be a port number"),
        ({"ALLOW_COMPILE": "maybe"}, "ALLOW_COMPILE: must be true or false"),
        ({"ENGINE_MAX_NUM_SEQS": "0"}, "max_num_seqs"),
        ({"MODEL_REPOSITORY": "/nonexistent/repository"}, "engine settings file not found"),
    ],
)
def test_bad_environment_fails_with_a_clear_message(environ, capsys, change, message) -> None:
    assert start(["--dry-run"], {**environ, **change}) == 2
    err = capsys.readouterr().err
    assert err.startswith("entrypoint: cannot start:") and message in err
    assert "Traceback" not in err


@pytest.fixture()
def s3(environ, monkeypatch):
    for name in ("AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, environ[name])
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        weights = Path(environ["ASSISTANT_INDEX_DIR"]).with_name("weights-upload")
        (weights / "shards").mkdir(parents=True)
        (weights / "config.json").write_bytes(b"{}")
        (weights / "shards" / "model-00001.safetensors").write_bytes(b"w" * 64)
        upload_weights(client, weights, S3Location(BUCKET, "weights/llama"))
        catalog = Path(environ["ASSISTANT_INDEX_DIR"]).with_name("catalog.jsonl")
        write_catalog(generate_catalog(50, seed=1), catalog)
        built = build_index(catalog, catalog.with_name("built-index"))
        upload_folder(client, built.index_dir, S3Location(BUCKET, "catalog-index"), last=INDEX_MANIFEST)
        yield client


def test_start_fetches_weights_artifacts_and_index_then_execs_triton(
    environ, s3, devices, tmp_path, capsys
) -> None:
    key = put_artifacts(s3, environ)
    calls = []
    code = start([], environ, devices, s3_client=lambda: s3, exec_fn=lambda *args: calls.append(args))
    assert code == 0
    assert (tmp_path / "weights" / "shards" / "model-00001.safetensors").read_bytes() == b"w" * 64
    artifact = tmp_path / "compiled" / key / "model.pt"
    assert artifact.read_bytes() == b"neff"
    assert not artifact.stat().st_mode & 0o222, "artifacts are read-only: no compile can write over them"
    ((binary, command, env),) = calls
    assert binary == sys.executable and command[0] == binary and command[1:3] == ["-m", "edge.run"]
    assert command[command.index("--") + 1].endswith("tritonserver")
    assert env["NEURON_COMPILED_ARTIFACTS"] == str(tmp_path / "compiled" / key)
    assert "catalog index: 50 products from catalog.jsonl" in capsys.readouterr().out
    assert (tmp_path / "index" / INDEX_MANIFEST).is_file()
    config = (Path(environ["MODEL_REPOSITORY"]) / "assistant" / "config.pbtxt").read_text()
    assert "count: 3 kind: KIND_CPU" in config, "one model instance per engine replica"


def test_artifacts_without_a_completion_manifest_are_refused(environ, s3, devices, capsys) -> None:
    key = expected_key(environ)
    s3.put_object(Bucket=BUCKET, Key=f"compiled/{key}/model.pt", Body=b"half a compile")
    assert start([], environ, devices, s3_client=lambda: s3, exec_fn=lambda *args: None) == 2
    assert f"no {MANIFEST_NAME} written last by the compile job" in capsys.readouterr().err


def test_a_manifest_for_other_inputs_is_refused(environ, s3, devices, capsys) -> None:
    manifest = completion_manifest(expected_inputs(environ))
    put_artifacts(s3, environ, manifest={**manifest, "inputs": {**manifest["inputs"], "dtype": "float16"}})
    assert start([], environ, devices, s3_client=lambda: s3, exec_fn=lambda *args: None) == 2
    assert "lists other compile inputs" in capsys.readouterr().err


def test_a_corrupted_index_download_fails_the_start(environ, s3, devices, capsys) -> None:
    put_artifacts(s3, environ)
    listing = s3.list_objects_v2(Bucket=BUCKET, Prefix="catalog-index/")["Contents"]
    victim = next(item["Key"] for item in listing if item["Key"].endswith(".store"))
    s3.put_object(Bucket=BUCKET, Key=victim, Body=b"not the index")
    assert start([], environ, devices, s3_client=lambda: s3, exec_fn=lambda *args: None) == 2
    assert "does not match the manifest" in capsys.readouterr().err


def test_key_miss_refuses_to_compile(environ, s3, devices, capsys) -> None:
    s3.put_object(Bucket=BUCKET, Key="compiled/some-other-key/model.pt", Body=b"neff")
    calls = []
    assert start([], environ, devices, s3_client=lambda: s3, exec_fn=lambda *args: calls.append(args)) == 2
    err = capsys.readouterr().err
    assert f"no complete compiled Neuron artifacts for key {expected_key(environ)}" in err
    assert "ALLOW_COMPILE=true" in err
    assert calls == []


def test_key_miss_compiles_when_allowed(environ, s3, devices, tmp_path) -> None:
    calls = []
    code = start(
        [],
        {**environ, "ALLOW_COMPILE": "true"},
        devices,
        s3_client=lambda: s3,
        exec_fn=lambda *args: calls.append(args),
    )
    assert code == 0 and len(calls) == 1
    assert (tmp_path / "compiled" / expected_key(environ)).is_dir()


def test_missing_weights_fail_the_start(environ, s3, devices, capsys) -> None:
    put_artifacts(s3, environ)
    environ = {**environ, "MODEL_S3_URI": f"s3://{BUCKET}/weights/missing"}
    assert start([], environ, devices, s3_client=lambda: s3, exec_fn=lambda *args: None) == 2
    assert f"s3://{BUCKET}/weights/missing: no weights-manifest.json build pointer" in capsys.readouterr().err


def test_a_fresh_start_says_what_it_keys_on(environ, capsys) -> None:
    assert start(["--dry-run"], environ) == 0
    out = capsys.readouterr().out
    assert "hardware target: inf2; toolchain: neuronx-cc 2.23.6484.0, torch-neuronx" in out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"REPLICAS_PER_HOST": "4"},
            "REPLICAS_PER_HOST (4) x tensor parallel (8) needs 32 NeuronCores, this host has 24 (inf2)",
        ),
        (
            {"ENGINE_TENSOR_PARALLEL_SIZE": "32", "REPLICAS_PER_HOST": "1"},
            "REPLICAS_PER_HOST (1) x tensor parallel (32) needs 32 NeuronCores, this host has 24",
        ),
    ],
)
def test_replicas_that_do_not_fit_the_host_stop_the_start_before_any_download(
    environ, devices, capsys, change, message
) -> None:
    fetched = []
    code = start([], {**environ, **change}, devices, s3_client=lambda: fetched.append(1), exec_fn=print)
    assert code == 2 and fetched == [], "nothing is downloaded for a start that cannot serve"
    err = capsys.readouterr().err
    assert err.startswith("entrypoint: cannot start:") and message in err


def test_a_container_without_neuron_devices_says_so(environ, tmp_path, capsys) -> None:
    empty = tmp_path / "empty-dev"
    empty.mkdir()
    assert start([], environ, empty, s3_client=lambda: None, exec_fn=print) == 2
    assert "no Neuron devices (/dev/neuronN) in this container" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("target", "devices_mapped", "lnc", "cores"),
    [("inf2", 1, None, 2), ("trn1", 16, None, 32), ("trn2", 16, None, 64), ("trn2", 16, "1", 128)],
)
def test_neuron_cores_per_device_follow_the_chip(tmp_path, target, devices_mapped, lnc, cores) -> None:
    for number in range(devices_mapped):
        (tmp_path / f"neuron{number}").touch()
    (tmp_path / "neuron_monitor").touch()
    environ = {} if lnc is None else {"NEURON_LOGICAL_NC_CONFIG": lnc}
    assert neuron_cores_present(tmp_path, target, environ) == cores


def test_the_start_fetches_the_index_build_the_pointer_names(environ, s3, devices, tmp_path, capsys) -> None:
    """`make index UPLOAD=` builds: the host follows the pointer, not the files left under the prefix."""
    put_artifacts(s3, environ)
    catalog = tmp_path / "bigger.jsonl"
    write_catalog(generate_catalog(70, seed=4), catalog)
    built = build_index(catalog, tmp_path / "bigger-index")
    build = upload_build(s3, built.index_dir, S3Location(BUCKET, "catalog-index"), manifest=INDEX_MANIFEST)
    assert start([], environ, devices, s3_client=lambda: s3, exec_fn=lambda *args: None) == 0
    out = capsys.readouterr().out
    assert f"catalog index: 70 products from bigger.jsonl ({build})" in out


def test_the_start_refuses_root_unless_allowed(environ, s3, devices, capsys, monkeypatch) -> None:
    """Root would write through the read-only artifacts (a recompile would run instead of failing)."""
    put_artifacts(s3, environ)
    monkeypatch.setattr("entrypoint.start._effective_uid", lambda: 0)
    execs = []
    assert start([], environ, devices, s3_client=lambda: s3, exec_fn=lambda *call: execs.append(call)) == 2
    assert "running as root (uid 0)" in capsys.readouterr().err and not execs
    assert start(["--dry-run"], environ) == 0, "a dry run needs no user"
    assert check_user({"ALLOW_ROOT": "true"}, 0) is None
    assert check_user({}, 10001) is None


def test_the_admin_key_is_not_in_the_plans_repr(environ) -> None:
    from entrypoint.admin_api import HTTP_HEADER

    plan = plan_start(environ, toolchain=TOOLCHAIN)
    (argument,) = [a for a in plan.command if a.startswith("--http-restricted-api=")]
    key = argument.split(f":{HTTP_HEADER}=")[1]
    shown = repr(plan)
    assert key not in shown and "<redacted>" in shown and "artifacts_dir=" in shown


def test_the_admin_key_is_in_no_environment_the_start_hands_on(environ) -> None:
    """The key reaches Triton only as its restricted-API options (Triton 2.51 takes it no other way); the
    environment every process of the container inherits (edge, Triton, stubs, engines) holds it not."""
    from entrypoint.admin_api import HTTP_HEADER

    plan = plan_start(environ, toolchain=TOOLCHAIN)
    (argument,) = [a for a in plan.command if a.startswith("--http-restricted-api=")]
    key = argument.split(f":{HTTP_HEADER}=")[1]
    inherited = {**environ, **plan.environment}
    assert not [name for name, value in inherited.items() if key in value or key in name]


def test_s3_down_at_boot_is_a_clear_message_not_a_traceback(environ, devices, capsys) -> None:
    """Nothing listens at the endpoint (connection refused): as an S3 outage or a missing VPC endpoint."""
    import socket

    from botocore.config import Config

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nobody listens there now
    client = boto3.client(
        "s3",
        region_name="us-east-1",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=2),
    )
    assert start([], environ, devices, s3_client=lambda: client, exec_fn=lambda *args: None) == 2
    err = capsys.readouterr().err
    assert err.startswith("entrypoint: cannot start: S3 is not reachable") and "Traceback" not in err
    assert "s3://" in err


def test_s3_refusing_access_is_a_clear_message(environ, s3, devices, capsys) -> None:
    s3.delete_object(Bucket=BUCKET, Key="weights/llama/config.json")
    s3.delete_object(Bucket=BUCKET, Key="weights/llama/shards/model-00001.safetensors")
    put_artifacts(s3, environ)
    missing_bucket = {**environ, "MODEL_S3_URI": "s3://no-such-bucket-here/weights/"}
    assert start([], missing_bucket, devices, s3_client=lambda: s3, exec_fn=lambda *args: None) == 2
    err = capsys.readouterr().err
    assert err.startswith("entrypoint: cannot start: S3 refused a request") and "NoSuchBucket" in err


def test_a_cpu_sampling_switch_vllm_neuron_cannot_read_stops_the_start_before_downloads(environ) -> None:
    with pytest.raises(StartError, match="NEURON_ON_DEVICE_SAMPLING_DISABLED: must be 1"):
        plan_start({**environ, "NEURON_ON_DEVICE_SAMPLING_DISABLED": "true"}, toolchain=TOOLCHAIN)
