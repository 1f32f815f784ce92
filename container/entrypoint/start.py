"""Container entrypoint: resolve engine settings, fetch weights and compiled artifacts, exec Triton.

    python -m entrypoint.start             # production: fetch from S3, then replace this process by Triton
    python -m entrypoint.start --dry-run   # no AWS calls: print the artifact key, variables and command

A key miss (no compiled artifacts for this exact configuration) stops the start unless ALLOW_COMPILE=true:
a host that compiles for an hour during a peak is an outage, not a slow start.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from entrypoint.artifact_key import ArtifactKeyError, artifact_key, compile_inputs
from entrypoint.s3_fetch import FetchError, S3Location, download_prefix, list_keys
from entrypoint.triton_install import TritonInstall, TritonInstallError
from serving.engine_settings import EngineSettingsError, engine_settings

DEFAULTS = {
    "MODEL_REPOSITORY": "/opt/serving/model_repository",
    "COMPILED_ARTIFACTS_DIR": "/opt/models/compiled",
    "ASSISTANT_INDEX_DIR": "/opt/serving/index",
    "TRITON_BACKENDS_DIR": "/opt/tritonserver/backends",
    "HTTP_PORT": "8000",
    "GRPC_PORT": "8001",
    "METRICS_PORT": "8002",
}
REQUIRED = ("MODEL_S3_URI", "COMPILED_ARTIFACTS_S3_URI")


class StartError(RuntimeError):
    """The container cannot start; the message names the variable, file or S3 location."""


@dataclass(frozen=True)
class StartPlan:
    key: str
    model_dir: Path
    weights: S3Location
    artifacts: S3Location
    artifacts_dir: Path
    allow_compile: bool
    environment: dict[str, str]
    command: list[str]


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


def visible_cores(tensor_parallel: int) -> str:
    """NeuronCores 0..TP-1: one model instance per host uses the first TP cores."""
    return "0" if tensor_parallel == 1 else f"0-{tensor_parallel - 1}"


def plan_start(environ: Mapping[str, str]) -> StartPlan:
    """Everything the start will do, decided from the environment and model.json alone (no AWS calls)."""
    get = lambda name: environ.get(name) or DEFAULTS.get(name, "")  # noqa: E731
    missing = [name for name in REQUIRED if not environ.get(name)]
    if missing:
        raise StartError(f"environment: {', '.join(missing)} must be set (see the task definition)")
    repository = Path(get("MODEL_REPOSITORY"))
    model_json = repository / "assistant" / "1" / "model.json"
    try:
        settings: dict[str, Any] = engine_settings(model_json, environ)
        key = artifact_key(compile_inputs(settings, environ))
    except (EngineSettingsError, ArtifactKeyError) as err:
        raise StartError(str(err)) from None
    try:
        weights = S3Location.parse(environ["MODEL_S3_URI"], variable="MODEL_S3_URI")
        artifacts = S3Location.parse(
            environ["COMPILED_ARTIFACTS_S3_URI"], variable="COMPILED_ARTIFACTS_S3_URI"
        ).child(key)
    except FetchError as err:
        raise StartError(str(err)) from None
    artifacts_dir = Path(get("COMPILED_ARTIFACTS_DIR")) / key
    try:
        install = TritonInstall.find()
    except TritonInstallError as err:
        raise StartError(str(err)) from None
    tensor_parallel = settings["tensor_parallel_size"]
    environment = {
        "NEURON_COMPILED_ARTIFACTS": str(artifacts_dir),
        "NEURON_RT_VISIBLE_CORES": environ.get("NEURON_RT_VISIBLE_CORES") or visible_cores(tensor_parallel),
        "ENGINE_TENSOR_PARALLEL_SIZE": str(tensor_parallel),
        "ASSISTANT_INDEX_DIR": get("ASSISTANT_INDEX_DIR"),
        "HF_HUB_OFFLINE": "1",
        "LD_LIBRARY_PATH": install.loader_path(environ.get("LD_LIBRARY_PATH", "")),
    }
    command = [
        environ.get("TRITON_SERVER_BIN") or str(install.binary),
        f"--model-repository={repository}",
        f"--backend-directory={get('TRITON_BACKENDS_DIR')}",
        "--model-control-mode=explicit",
        "--load-model=assistant",
        "--exit-on-error=true",
        "--strict-readiness=true",
        f"--http-port={_port(environ, 'HTTP_PORT')}",
        f"--grpc-port={_port(environ, 'GRPC_PORT')}",
        f"--metrics-port={_port(environ, 'METRICS_PORT')}",
        "--allow-gpu-metrics=false",
        # Streams in flight get time to finish when ECS stops the task (its stopTimeout must be longer).
        "--exit-timeout-secs=110",
    ]
    return StartPlan(
        key=key,
        model_dir=Path(settings["model"]),
        weights=weights,
        artifacts=artifacts,
        artifacts_dir=artifacts_dir,
        allow_compile=_flag(environ, "ALLOW_COMPILE"),
        environment=environment,
        command=command,
    )


def fetch(plan: StartPlan, s3) -> str:
    """Download weights and artifacts; return what happened. StartError on a key miss that may not compile."""
    try:
        if not list_keys(s3, plan.artifacts):
            if not plan.allow_compile:
                raise StartError(
                    f"no compiled Neuron artifacts for key {plan.key} at {plan.artifacts}; "
                    "refusing to compile on a serving host "
                    "(compile in the build pipeline, or set ALLOW_COMPILE=true)"
                )
            plan.artifacts_dir.mkdir(parents=True, exist_ok=True)
            artifacts_note = f"artifacts: key miss, compiling into {plan.artifacts_dir} (ALLOW_COMPILE=true)"
        else:
            count = download_prefix(s3, plan.artifacts, plan.artifacts_dir)
            artifacts_note = f"artifacts: {count} from {plan.artifacts}"
        weights = download_prefix(s3, plan.weights, plan.model_dir)
    except FetchError as err:
        raise StartError(str(err)) from None
    return f"weights: {weights} from {plan.weights} into {plan.model_dir}; {artifacts_note}"


def describe(plan: StartPlan) -> str:
    variables = " ".join(f"{name}={shlex.quote(value)}" for name, value in sorted(plan.environment.items()))
    return f"artifact key: {plan.key}\nexec: {variables} {shlex.join(plan.command)}"


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    s3_client: Callable[[], Any] | None = None,
    exec_fn: Callable[[str, list[str], dict[str, str]], None] = os.execve,
) -> int:
    parser = argparse.ArgumentParser(prog="entrypoint", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan; no AWS calls, no exec")
    args = parser.parse_args(argv)
    environ = dict(os.environ if environ is None else environ)
    try:
        plan = plan_start(environ)
        if args.dry_run:
            print(describe(plan))
            return 0
        if s3_client is None:
            import boto3

            s3_client = lambda: boto3.client("s3")  # noqa: E731
        print(fetch(plan, s3_client()), flush=True)
    except StartError as err:
        print(f"entrypoint: cannot start: {err}", file=sys.stderr)
        return 2
    print(describe(plan), flush=True)
    exec_fn(plan.command[0], plan.command, {**environ, **plan.environment})
    return 0


if __name__ == "__main__":
    sys.exit(main())
