"""The compile task (`make compile`: the serving image's `python3 -m entrypoint.compile`) run under the
compile task role's policy from the synthesized template, with moto enforcing it: it reads the weights, writes
`compiled/<key>/` with `artifact-manifest.json` last; it cannot write the weights; and the policy without its
write statement fails the compile with a one-line error, not a traceback. The compile task definitions hold
that role (no serving one does), their execution roles write only their own log group, and the operator
may run them and no serving task definition.

The engine's compile itself is a STAND-IN (no Neuron device here), and so is the Triton lookup the plan makes
(the infra environment has no Triton binary; the serving tests run the real one)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from cdk_constructs.fleet.task_definition import COMPILE_COMMAND
from settings import load_settings
from stacks.routing_names import stack_name
from stacks.serving_app import build_app
from tests.iam.policies import ACCOUNT, assumed_session, enforced, role_policy

os.environ.setdefault("CDK_VALIDATION", "false")
REPO = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO / "container"))

from entrypoint import start as start_module  # noqa: E402
from entrypoint.artifact_key import MANIFEST_NAME, TOOLCHAIN_PIN  # noqa: E402
from entrypoint.compile import main as compile_main  # noqa: E402
from entrypoint.s3_fetch import S3Location  # noqa: E402
from entrypoint.weights import upload as upload_weights  # noqa: E402

SETTINGS = load_settings(REPO / "config" / "default.yaml")
REGION = "us-east-1"


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory) -> dict:
    outdir = tmp_path_factory.mktemp("cdk.out")
    assembly = build_app(SETTINGS, outdir=str(outdir), nag=False).synth()
    return assembly.get_stack_by_name(stack_name(SETTINGS, REGION)).template


@pytest.fixture(scope="module")
def compile_policy(synthesized) -> dict:
    return role_policy(synthesized, "ModelStoreCompileTaskRole", REGION)


def _compile_task_definition(template: dict) -> dict:
    """The fleet's compile task definition (the first fleet's): the one `make compile` runs."""
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::ECS::TaskDefinition":
            continue
        (first, *_) = resource["Properties"]["ContainerDefinitions"]
        if first.get("Command") == COMPILE_COMMAND:
            return resource["Properties"]
    raise LookupError("no compile task definition in the template")


def _task_environment(template: dict) -> dict[str, str]:
    """The compile container's environment as the fleet's compile task definition sets it."""
    (container,) = _compile_task_definition(template)["ContainerDefinitions"]
    return {v["Name"]: v["Value"] for v in container.get("Environment", []) if isinstance(v["Value"], str)}


class _NoTriton(start_module.TritonInstall):
    """STAND-IN for the Triton install lookup (not part of the compile's S3 calls): paths nothing runs."""

    @classmethod
    def find(cls) -> start_module.TritonInstall:
        nowhere = Path("/nonexistent/tritonserver")
        return start_module.TritonInstall(nowhere, nowhere, nowhere, nowhere, nowhere)


def neuron_stand_in(plan, environment) -> None:
    """What vLLM's Neuron plugin leaves in NEURON_COMPILED_ARTIFACTS after compiling (a STAND-IN)."""
    Path(environment["NEURON_COMPILED_ARTIFACTS"], "model.pt").write_bytes(b"neff")


@pytest.fixture
def environ(synthesized, monkeypatch, tmp_path) -> dict[str, str]:
    monkeypatch.setattr(start_module, "TritonInstall", _NoTriton)
    monkeypatch.setattr(start_module, "_effective_uid", lambda: 10001)  # the image's user; root here
    for name, value in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    repository = tmp_path / "model_repository"
    shutil.copytree(REPO / "container" / "model_repository", repository, symlinks=True)
    model_json = repository / "assistant" / "1" / "model.json"
    engine = json.loads(model_json.read_text())
    engine["model"] = engine["tokenizer"] = str(tmp_path / "weights")
    model_json.write_text(json.dumps(engine))
    environment = _task_environment(synthesized)
    environment |= {
        "MODEL_REPOSITORY": str(repository),
        "COMPILED_ARTIFACTS_DIR": str(tmp_path / "compiled"),
        "ASSISTANT_INDEX_DIR": str(tmp_path / "index"),
    }
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        weights = S3Location.parse(environment["MODEL_S3_URI"], variable="MODEL_S3_URI")
        s3.create_bucket(Bucket=weights.bucket)
        source = tmp_path / "weights-upload"
        source.mkdir()
        (source / "config.json").write_bytes(b"{}")
        upload_weights(s3, source, weights)
        yield environment


def _run(environ, session) -> int:
    return compile_main(
        [],
        environ,
        s3_client=lambda: session.client("s3"),
        compiler=neuron_stand_in,
        toolchain=tuple(sorted(TOOLCHAIN_PIN)),
    )


def test_the_compile_writes_its_key_and_the_manifest_last_under_the_shipped_compile_role(
    compile_policy, environ, capsys
):
    session = assumed_session(compile_policy, REGION)
    with enforced():
        assert _run(environ, session) == 0
    out = capsys.readouterr().out
    assert f"{MANIFEST_NAME} last" in out
    compiled = S3Location.parse(environ["COMPILED_ARTIFACTS_S3_URI"], variable="COMPILED_ARTIFACTS_S3_URI")
    s3 = boto3.client("s3", region_name=REGION)
    listed = s3.list_objects_v2(Bucket=compiled.bucket, Prefix=f"{compiled.prefix}/")["Contents"]
    names = sorted(o["Key"].rsplit("/", 1)[-1] for o in listed)
    assert names == [MANIFEST_NAME, "model.pt"]


def test_the_compile_role_cannot_write_the_weights(compile_policy, environ):
    from botocore.exceptions import ClientError

    weights = S3Location.parse(environ["MODEL_S3_URI"], variable="MODEL_S3_URI")
    session = assumed_session(compile_policy, REGION)
    with enforced(), pytest.raises(ClientError, match="AccessDenied"):
        session.client("s3").put_object(Bucket=weights.bucket, Key=f"{weights.prefix}/config.json", Body=b"x")


def test_without_its_write_statement_the_compile_fails_in_one_line(compile_policy, environ, capsys):
    without_put = {
        **compile_policy,
        "Statement": [s for s in compile_policy["Statement"] if s["Action"] != "s3:PutObject"],
    }
    assert len(without_put["Statement"]) == len(compile_policy["Statement"]) - 1
    session = assumed_session(without_put, REGION, name="narrower")
    with enforced():
        assert _run(environ, session) == 2
    err = capsys.readouterr().err
    assert err.startswith("compile: cannot compile: ") and "AccessDenied" in err and "Traceback" not in err


def test_the_serving_task_role_cannot_write_compiled_artifacts(synthesized, environ, capsys):
    """Only the compile role writes what every host loads: the serving role running the compile fails."""
    serving = role_policy(synthesized, "ModelStoreTaskRole", REGION)
    session = assumed_session(serving, REGION, name="serving")
    with enforced():
        assert _run(environ, session) == 2
    assert "AccessDenied" in capsys.readouterr().err


def test_the_compile_task_definitions_hold_the_compile_role_and_the_serving_ones_do_not(synthesized):
    """RunTask overrides no role: the compile task definition names the compile task role itself, and no
    other task definition names it."""
    (compile_role,) = (
        logical
        for logical, r in synthesized["Resources"].items()
        if r["Type"] == "AWS::IAM::Role" and logical.startswith("ModelStoreCompileTaskRole")
    )
    roles = {}
    for logical, resource in synthesized["Resources"].items():
        if resource["Type"] == "AWS::ECS::TaskDefinition":
            containers = resource["Properties"]["ContainerDefinitions"]
            compiles = containers[0].get("Command") == COMPILE_COMMAND
            roles[logical] = (compiles, resource["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0])
    assert {compiles for compiles, _ in roles.values()} == {True, False}
    for logical, (compiles, role) in roles.items():
        assert (role == compile_role) == compiles, logical


def test_a_compile_tasks_execution_role_writes_only_its_own_log_group(synthesized):
    """The compile task's logs land in its own group, and its execution role can write no other (the
    fleet's serving group feeds the NeuronRuntimeFailures metric filter)."""
    task = _compile_task_definition(synthesized)
    (container,) = task["ContainerDefinitions"]
    group = container["LogConfiguration"]["Options"]["awslogs-group"]["Ref"]
    execution_role = task["ExecutionRoleArn"]["Fn::GetAtt"][0]
    policy = role_policy(synthesized, execution_role, REGION)
    logs = [s for s in policy["Statement"] if any(a.startswith("logs:") for a in _list(s["Action"]))]
    assert [s["Resource"] for s in logs] == [{"Fn::GetAtt": [group, "Arn"]}]
    filtered = {
        r["Properties"]["LogGroupName"]["Ref"]
        for r in synthesized["Resources"].values()
        if r["Type"] == "AWS::Logs::MetricFilter"
    }
    assert filtered and group not in filtered


def _list(value) -> list:
    return value if isinstance(value, list) else [value]


def test_the_operator_may_run_the_compile_task_definitions_and_no_serving_one(synthesized):
    """The operator policy's RunTask statement matches each compile task definition's family (CDK names it
    after the construct path: the fleet's `Compile` construct) and no serving task definition's."""
    from fnmatch import fnmatchcase

    from ops.operator_policy import render

    (statement,) = (s for s in render(SETTINGS, ACCOUNT)["Statement"] if s["Action"] == ["ecs:RunTask"])
    (pattern,) = statement["Resource"]
    runnable = {}
    for resource in synthesized["Resources"].values():
        if resource["Type"] == "AWS::ECS::TaskDefinition":
            family = resource["Properties"]["Family"]
            arn = f"arn:aws:ecs:{REGION}:{ACCOUNT}:task-definition/{family}:3"
            compiles = resource["Properties"]["ContainerDefinitions"][0].get("Command") == COMPILE_COMMAND
            runnable[family] = (compiles, fnmatchcase(arn, pattern))
    assert len(runnable) == 2 * len(SETTINGS.regions[REGION].fleets)
    assert all(compiles == allowed for compiles, allowed in runnable.values()), runnable
