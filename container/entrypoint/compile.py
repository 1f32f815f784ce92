"""The serving image's compile mode: `python3 -m entrypoint.compile`, run by `make compile` as an ECS task of
the fleet's own task definition on a host of the fleet's type (same image, same environment, same devices).

It plans the start exactly as a serving host would (entrypoint/start.py: the same key), fetches and verifies
the weights, has the engine compile into an empty folder (vLLM's Neuron plugin compiles when
NEURON_COMPILED_ARTIFACTS holds no graphs, and saves them there), then uploads the folder to
`compiled/<key>/` with the completion manifest written last: a host accepts the prefix only once that
manifest exists. A prefix that already holds the manifest is left alone (two compile tasks of one key, or a
`make compile` run twice)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from entrypoint.artifact_key import MANIFEST_NAME, completion_manifest
from entrypoint.s3_fetch import FetchError, upload_folder
from entrypoint.start import StartError, StartPlan, _artifacts_complete, plan_start
from entrypoint.weights import fetch as fetch_weights

Compiler = Callable[[StartPlan, dict[str, Any]], None]  # compiles into plan.artifacts_dir


def engine_compile(plan: StartPlan, environment: dict[str, Any]) -> None:  # pragma: no cover - Neuron only
    """Load the engine once with an empty NEURON_COMPILED_ARTIFACTS: the Neuron plugin compiles and saves."""
    os.environ.update(environment)
    from vllm import LLM

    from serving.engine_settings import engine_settings

    # model.json holds vLLM's engine arguments (additional_config carries the Neuron override config).
    LLM(**engine_settings(plan.model_config.parent / "1" / "model.json", os.environ))


def run(plan: StartPlan, s3: Any, compiler: Compiler) -> str:
    if _artifacts_complete(s3, plan):
        return f"{plan.artifacts}: already complete; nothing compiled"
    weights = fetch_weights(s3, plan.weights, plan.model_dir)
    shutil.rmtree(plan.artifacts_dir, ignore_errors=True)
    plan.artifacts_dir.mkdir(parents=True)
    compiler(plan, {**plan.environment, "NEURON_COMPILED_ARTIFACTS": str(plan.artifacts_dir)})
    if not any(path.is_file() for path in plan.artifacts_dir.rglob("*")):
        raise StartError(f"the engine wrote no compiled artifacts into {plan.artifacts_dir}")
    (plan.artifacts_dir / MANIFEST_NAME).write_text(json.dumps(completion_manifest(plan.inputs), indent=1))
    count = upload_folder(s3, plan.artifacts_dir, plan.artifacts, last=MANIFEST_NAME)
    return f"weights: {weights}; compiled {plan.key}: {count} files to {plan.artifacts}, {MANIFEST_NAME} last"


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    s3_client: Callable[[], Any] | None = None,
    compiler: Compiler = engine_compile,
    toolchain: tuple[tuple[str, str], ...] | None = None,
) -> int:
    environ = dict(os.environ if environ is None else environ)
    try:
        plan = plan_start(environ, toolchain=toolchain)
        if s3_client is None:
            import boto3

            s3_client = lambda: boto3.client("s3")  # noqa: E731
        print(run(plan, s3_client(), compiler), flush=True)
    except (StartError, FetchError) as error:
        print(f"compile: cannot compile: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # S3 refusing a read or an upload (botocore/boto3), one line, no traceback
        if type(error).__module__.split(".")[0] not in ("botocore", "boto3"):
            raise
        print(f"compile: cannot compile: S3: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
