"""Container entrypoint: resolve engine settings, fetch weights, artifacts and the catalog index, exec Triton.

    python -m entrypoint.start             # production: fetch from S3, then replace this process by Triton
    python -m entrypoint.start --dry-run   # no AWS calls: print the artifact key, variables and command
    python -m entrypoint.start --print-manifest   # the completion manifest a compile job writes last

A key miss (no compiled artifacts with a completion manifest for this exact configuration) stops the start
unless ALLOW_COMPILE=true: a host that compiles for an hour during a peak is an outage, not a slow start.
Without ALLOW_COMPILE the downloaded artifacts are made read-only, so a compile the Neuron plugin might start
by itself after a load error cannot write its graphs, and the start fails instead of compiling.
The catalog index is downloaded from the build CATALOG_INDEX_S3_URI's pointer names (or from the prefix itself
where there is none) and checked file by file against its manifest.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assistant.sampling_platforms import neuron_cpu_sampling
from entrypoint.admin_api import new_admin_key, redacted, restricted_api_flags
from entrypoint.artifact_key import (
    MANIFEST_NAME,
    ArtifactKeyError,
    CompileInputs,
    artifact_key,
    check_manifest,
    compile_inputs,
    completion_manifest,
    installed_toolchain,
    pinned_toolchain,
)
from entrypoint.s3_fetch import (
    FetchError,
    S3Location,
    check_build_manifest,
    current_build,
    download_prefix,
    list_keys,
)
from entrypoint.triton_install import TritonInstall, TritonInstallError
from entrypoint.weights import fetch as fetch_weights
from serving.engine_settings import EngineSettingsError, engine_settings
from serving.replicas import ReplicaError, replicas_per_host, with_instance_count

DEFAULTS = {
    "MODEL_REPOSITORY": "/opt/serving/model_repository",
    "COMPILED_ARTIFACTS_DIR": "/opt/models/compiled",
    "ASSISTANT_INDEX_DIR": "/opt/serving/index",
    "TRITON_BACKENDS_DIR": "/opt/tritonserver/backends",
    "HTTP_PORT": "8000",
    "GRPC_PORT": "8001",
    "METRICS_PORT": "8002",
}
REQUIRED = ("MODEL_S3_URI", "COMPILED_ARTIFACTS_S3_URI", "CATALOG_INDEX_S3_URI")
# Triton's own HTTP and gRPC listen here, on loopback only: the public ports (HTTP_PORT, GRPC_PORT, the ALB's
# target group ports and health checks) are the edge's, which caps request bodies (container/edge).
TRITON_LOOPBACK_HTTP_PORT = 18000
TRITON_LOOPBACK_GRPC_PORT = 18001
SERVED_MODEL = "assistant"


class StartError(RuntimeError):
    """The container cannot start; the message names the variable, file or S3 location."""


@dataclass(frozen=True)
class StartPlan:
    key: str
    inputs: CompileInputs
    model_dir: Path
    weights: S3Location
    artifacts: S3Location
    artifacts_dir: Path
    allow_compile: bool
    index: S3Location
    index_dir: Path
    replicas: int
    model_config: Path
    environment: dict[str, str]
    command: list[str]
    quantized_checkpoint: tuple[S3Location, Path] | None = None

    def __repr__(self) -> str:
        # The command holds the admin key: a plan printed in a log or a traceback must not show it.
        fields = {**self.__dict__, "command": redacted(self.command)}
        return f"StartPlan({', '.join(f'{name}={value!r}' for name, value in fields.items())})"


def _flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "false").strip().lower()
    if raw not in {"true", "false", "1", "0", "yes", "no"}:
        raise StartError(f"{name}: must be true or false, got {raw!r}")
    return raw in {"true", "1", "yes"}


def _port(environ: Mapping[str, str], name: str) -> int:
    raw = environ.get(name, DEFAULTS[name])
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise StartError(f"{name}: must be a port number, got {raw!r}")
    return int(raw)


def plan_start(
    environ: Mapping[str, str], *, toolchain: tuple[tuple[str, str], ...] | None = None
) -> StartPlan:
    """Everything the start will do, decided from the environment, model.json and the image's toolchain
    (read from its packages unless given) alone: no AWS calls."""
    get = lambda name: environ.get(name) or DEFAULTS.get(name, "")  # noqa: E731
    missing = [name for name in REQUIRED if not environ.get(name)]
    if missing:
        raise StartError(f"environment: {', '.join(missing)} must be set (see the task definition)")
    repository = Path(get("MODEL_REPOSITORY"))
    model_json = repository / SERVED_MODEL / "1" / "model.json"
    try:
        settings: dict[str, Any] = engine_settings(model_json, environ)
        # The kit's pin, verified against the image (artifact_key.pinned_toolchain): offline tools key the
        # same artifacts (`make compile`, the preflight). Tests hand in a toolchain of their own.
        if toolchain is None:
            toolchain = pinned_toolchain(installed_toolchain(), environ)
        inputs = compile_inputs(settings, environ, toolchain)
        key = artifact_key(inputs)
        replicas = replicas_per_host(environ)
        neuron_cpu_sampling(environ)  # vllm-neuron would crash on a bad value minutes into the load
    except (EngineSettingsError, ArtifactKeyError, ReplicaError, ValueError) as err:
        raise StartError(str(err)) from None
    try:
        weights = S3Location.parse(environ["MODEL_S3_URI"], variable="MODEL_S3_URI")
        artifacts = S3Location.parse(
            environ["COMPILED_ARTIFACTS_S3_URI"], variable="COMPILED_ARTIFACTS_S3_URI"
        ).child(key)
        index = S3Location.parse(environ["CATALOG_INDEX_S3_URI"], variable="CATALOG_INDEX_S3_URI")
        checkpoint = _quantized_checkpoint(settings, environ)
    except FetchError as err:
        raise StartError(str(err)) from None
    artifacts_dir = Path(get("COMPILED_ARTIFACTS_DIR")) / key
    try:
        install = TritonInstall.find()
    except TritonInstallError as err:
        raise StartError(str(err)) from None
    tensor_parallel = settings["tensor_parallel_size"]
    # Each replica (a model instance) pins its own cores from REPLICAS_PER_HOST and the TP degree.
    environment = {
        "NEURON_COMPILED_ARTIFACTS": str(artifacts_dir),
        "ENGINE_TENSOR_PARALLEL_SIZE": str(tensor_parallel),
        "REPLICAS_PER_HOST": str(replicas),
        "ASSISTANT_INDEX_DIR": get("ASSISTANT_INDEX_DIR"),
        "HF_HUB_OFFLINE": "1",
        "LD_LIBRARY_PATH": install.loader_path(environ.get("LD_LIBRARY_PATH", "")),
    }
    http_port, grpc_port = _port(environ, "HTTP_PORT"), _port(environ, "GRPC_PORT")
    metrics_port = _port(environ, "METRICS_PORT")
    taken = {http_port, grpc_port, metrics_port} & {TRITON_LOOPBACK_HTTP_PORT, TRITON_LOOPBACK_GRPC_PORT}
    if taken:
        raise StartError(
            f"HTTP_PORT, GRPC_PORT, METRICS_PORT: {sorted(taken)} is Triton's own loopback port behind the "
            "edge; pick another"
        )
    triton = [
        environ.get("TRITON_SERVER_BIN") or str(install.binary),
        f"--model-repository={repository}",
        f"--backend-directory={get('TRITON_BACKENDS_DIR')}",
        "--model-control-mode=explicit",
        f"--load-model={SERVED_MODEL}",
        "--exit-on-error=true",
        "--strict-readiness=true",
        "--http-address=127.0.0.1",
        f"--http-port={TRITON_LOOPBACK_HTTP_PORT}",
        "--grpc-address=127.0.0.1",
        f"--grpc-port={TRITON_LOOPBACK_GRPC_PORT}",
        # Triton binds metrics to --http-address unless told: the metrics port stays on every interface
        # (the CloudWatch agent scrapes it; the ALB never forwards it).
        "--metrics-address=0.0.0.0",
        f"--metrics-port={metrics_port}",
        "--allow-gpu-metrics=false",
        # Model load/unload, shared memory, config, logging, trace and statistics behind a fresh key.
        *restricted_api_flags(new_admin_key()),
        # Streams in flight get time to finish when ECS stops the task (its stopTimeout must be longer).
        "--exit-timeout-secs=110",
    ]
    # The edge holds the public ports and starts Triton as its child (edge/run.py).
    command = [
        sys.executable,
        "-m",
        "edge.run",
        f"--http=0.0.0.0:{http_port}",
        f"--grpc=0.0.0.0:{grpc_port}",
        f"--triton-http=127.0.0.1:{TRITON_LOOPBACK_HTTP_PORT}",
        f"--triton-grpc=127.0.0.1:{TRITON_LOOPBACK_GRPC_PORT}",
        "--",
        *triton,
    ]
    return StartPlan(
        key=key,
        inputs=inputs,
        model_dir=Path(settings["model"]),
        weights=weights,
        artifacts=artifacts,
        artifacts_dir=artifacts_dir,
        allow_compile=_flag(environ, "ALLOW_COMPILE"),
        index=index,
        index_dir=Path(get("ASSISTANT_INDEX_DIR")),
        replicas=replicas,
        model_config=repository / SERVED_MODEL / "config.pbtxt",
        environment=environment,
        command=command,
        quantized_checkpoint=checkpoint,
    )


def _quantized_checkpoint(
    settings: dict[str, Any], environ: Mapping[str, str]
) -> tuple[S3Location, Path] | None:
    """Where an INT8 weight-only checkpoint comes from and where the engine reads it, when quantized."""
    neuron = (settings.get("additional_config") or {}).get("override_neuron_config") or {}
    if not neuron.get("quantized"):
        return None
    uri = environ.get("QUANTIZED_CHECKPOINT_S3_URI", "")
    path = neuron.get("quantized_checkpoints_path")
    if not uri or not path:
        raise FetchError(
            "quantized: set QUANTIZED_CHECKPOINT_S3_URI and "
            "override_neuron_config.quantized_checkpoints_path "
            "(the INT8 checkpoint is fetched like the weights)"
        )
    return S3Location.parse(uri, variable="QUANTIZED_CHECKPOINT_S3_URI"), Path(path)


def _artifacts_complete(s3, plan: StartPlan) -> bool:
    """True when the prefix holds a completion manifest for exactly this configuration; StartError when it
    holds one for another (a key collision or a tampered prefix)."""
    keys = list_keys(s3, plan.artifacts)
    manifest_key = f"{plan.artifacts.prefix}/{MANIFEST_NAME}"
    if manifest_key not in keys:
        return False
    try:
        body = s3.get_object(Bucket=plan.artifacts.bucket, Key=manifest_key)["Body"].read()
        check_manifest(json.loads(body), plan.inputs)
    except (ValueError, ArtifactKeyError) as err:
        raise StartError(f"{plan.artifacts}/{MANIFEST_NAME}: {err}") from None
    return True


def _effective_uid() -> int:
    return os.geteuid()


def check_user(environ: Mapping[str, str], uid: int) -> None:
    """Refuse to serve as root unless told to: root's CAP_DAC_OVERRIDE writes through the read-only
    artifact tree, so a compile the Neuron plugin starts after a load error would run instead of failing."""
    if uid == 0 and not _flag(environ, "ALLOW_ROOT"):
        raise StartError(
            "running as root (uid 0): root writes through the read-only compiled artifacts, so a "
            "recompile after a load error would not fail; run as the image's serving user (the task "
            "definition's user, uid 10001), or set ALLOW_ROOT=true where root is unavoidable"
        )


def _writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def _read_only(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def fetch(plan: StartPlan, s3) -> str:
    """Download weights, artifacts and the catalog index; return what happened. StartError on a key miss
    that may not compile, or an index that does not match its manifest."""
    from assistant.retrieve import CatalogIndexError, verify_files

    try:
        if not _artifacts_complete(s3, plan):
            if not plan.allow_compile:
                raise StartError(
                    f"no complete compiled Neuron artifacts for key {plan.key} at {plan.artifacts} "
                    f"(none, or no {MANIFEST_NAME} written last by the compile job); "
                    "refusing to compile on a "
                    "serving host (compile in the build pipeline, or set ALLOW_COMPILE=true)"
                )
            plan.artifacts_dir.mkdir(parents=True, exist_ok=True)
            artifacts_note = f"artifacts: key miss, compiling into {plan.artifacts_dir} (ALLOW_COMPILE=true)"
        else:
            if plan.artifacts_dir.exists():  # read-only from an earlier start of this host (warm pool)
                _writable(plan.artifacts_dir)
            count = download_prefix(s3, plan.artifacts, plan.artifacts_dir)
            if not plan.allow_compile:
                _read_only(plan.artifacts_dir)
            artifacts_note = f"artifacts: {count} from {plan.artifacts}"
        # The build the weights' pointer names, checked file by file against its manifest (weights.py).
        weights = fetch_weights(s3, plan.weights, plan.model_dir)
        if plan.quantized_checkpoint is not None:
            location, path = plan.quantized_checkpoint
            download_prefix(s3, location, path)
        # The build the pointer names (`make index UPLOAD=` writes it last), else the prefix itself.
        build = current_build(s3, plan.index)
        index_location = build.location if build is not None else plan.index
        shutil.rmtree(plan.index_dir, ignore_errors=True)
        download_prefix(s3, index_location, plan.index_dir)
        if build is not None:
            check_build_manifest(plan.index_dir, build)
        manifest = verify_files(plan.index_dir)
    except FetchError as err:
        raise StartError(str(err)) from None
    except CatalogIndexError as err:
        raise StartError(f"catalog index from {plan.index}: {err}") from None
    index_note = (
        f"catalog index: {manifest['products']:,} products from {manifest.get('catalog')} "
        f"({index_location}) "
        f"(sha256 {str(manifest.get('catalog_sha256'))[:12]}) verified"
    )
    return f"weights: {weights} from {plan.weights} into {plan.model_dir}; {artifacts_note}; {index_note}"


def fetch_or_explain(plan: StartPlan, s3) -> str:
    """fetch(), with S3 being down, slow or refusing (no network, no permission, no bucket) turned into a
    StartError that names what was being fetched, instead of a botocore traceback."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return fetch(plan, s3)
    except ClientError as err:
        error = err.response.get("Error", {})
        raise StartError(
            f"S3 refused a request while fetching the weights ({plan.weights}), compiled artifacts "
            f"({plan.artifacts}) or catalog index ({plan.index}): {error.get('Code', 'error')}: "
            f"{error.get('Message', err)} (check the task role's permissions and the bucket)"
        ) from None
    except BotoCoreError as err:
        raise StartError(
            f"S3 is not reachable while fetching the weights ({plan.weights}), compiled artifacts "
            f"({plan.artifacts}) or catalog index ({plan.index}): {err} (check the network path to S3: "
            "the VPC's S3 endpoint or NAT); ECS will start the task again"
        ) from None


# NeuronCores per /dev/neuronN device: Inf2 and Trn1 chips have 2; a Trn2 chip has 8 physical cores, shown as
# 8 / NEURON_LOGICAL_NC_CONFIG logical ones (default 2, so 4).
CORES_PER_DEVICE = {"inf2": 2, "trn1": 2}
TRN2_PHYSICAL_CORES = 8
_NEURON_DEVICE = re.compile(r"^neuron\d+$")


def neuron_cores_present(device_dir: Path, target: str, environ: Mapping[str, str]) -> int:
    """NeuronCores this container can use: its /dev/neuronN devices (the task definition maps them)."""
    try:
        devices = sum(1 for entry in device_dir.iterdir() if _NEURON_DEVICE.match(entry.name))
    except OSError:
        devices = 0
    if target in CORES_PER_DEVICE:
        return devices * CORES_PER_DEVICE[target]
    raw = environ.get("NEURON_LOGICAL_NC_CONFIG", "2").strip() or "2"
    if raw not in {"1", "2"}:
        raise StartError(f"NEURON_LOGICAL_NC_CONFIG: must be 1 or 2, got {raw!r}")
    return devices * (TRN2_PHYSICAL_CORES // int(raw))


def check_replicas_fit(plan: StartPlan, cores_present: int) -> None:
    """StartError unless REPLICAS_PER_HOST engines of the plan's tensor-parallel degree fit the cores here:
    a replica without its cores fails only minutes later, deep in the Neuron runtime."""
    needed = plan.replicas * plan.inputs.tensor_parallel
    if cores_present == 0:
        raise StartError(
            "no Neuron devices (/dev/neuronN) in this container; the task definition must map the host's "
            "devices (linuxParameters.devices)"
        )
    if needed > cores_present:
        raise StartError(
            f"REPLICAS_PER_HOST ({plan.replicas}) x tensor parallel ({plan.inputs.tensor_parallel}) needs "
            f"{needed} NeuronCores, this host has {cores_present} ({plan.inputs.hardware_target}); lower "
            "REPLICAS_PER_HOST or ENGINE_TENSOR_PARALLEL_SIZE"
        )


def set_replicas(plan: StartPlan) -> None:
    """One model instance per engine replica: the served model's instance_group count."""
    try:
        text = plan.model_config.read_text()
        plan.model_config.write_text(with_instance_count(text, plan.replicas))
    except (OSError, ReplicaError) as err:
        raise StartError(f"{plan.model_config}: {err}") from None


def describe(plan: StartPlan) -> str:
    variables = " ".join(f"{name}={shlex.quote(value)}" for name, value in sorted(plan.environment.items()))
    tensor_parallel = plan.inputs.tensor_parallel
    toolchain = ", ".join(f"{package} {version}" for package, version in plan.inputs.toolchain)
    return (
        f"artifact key: {plan.key}\n"
        f"hardware target: {plan.inputs.hardware_target}; toolchain: {toolchain}\n"
        f"engine replicas: {plan.replicas} x tensor parallel {tensor_parallel} "
        f"(NeuronCores 0-{plan.replicas * tensor_parallel - 1})\n"
        f"exec: {variables} {shlex.join(redacted(plan.command))}"
    )


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    s3_client: Callable[[], Any] | None = None,
    exec_fn: Callable[[str, list[str], dict[str, str]], None] = os.execve,
    toolchain: tuple[tuple[str, str], ...] | None = None,
    device_dir: Path = Path("/dev"),
) -> int:
    parser = argparse.ArgumentParser(prog="entrypoint", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan; no AWS calls, no exec")
    parser.add_argument(
        "--print-manifest",
        action="store_true",
        help="print the completion manifest a compile job writes last",
    )
    args = parser.parse_args(argv)
    environ = dict(os.environ if environ is None else environ)
    try:
        plan = plan_start(environ, toolchain=toolchain)
        if args.print_manifest:
            print(json.dumps(completion_manifest(plan.inputs), indent=1))
            return 0
        if args.dry_run:
            print(describe(plan))
            return 0
        # Before gigabytes are downloaded: the replicas must fit the cores this host has.
        check_replicas_fit(plan, neuron_cores_present(device_dir, plan.inputs.hardware_target, environ))
        if s3_client is None:
            import boto3

            s3_client = lambda: boto3.client("s3")  # noqa: E731
        check_user(environ, _effective_uid())
        print(fetch_or_explain(plan, s3_client()), flush=True)
        set_replicas(plan)
    except StartError as err:
        print(f"entrypoint: cannot start: {err}", file=sys.stderr)
        return 2
    print(describe(plan), flush=True)
    exec_fn(plan.command[0], plan.command, {**environ, **plan.environment})
    return 0


if __name__ == "__main__":
    sys.exit(main())
