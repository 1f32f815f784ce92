"""The app through the pinned CDK CLI, exactly as `make synth` runs it: offline, no account, no Docker."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from app import cli_context

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = "config/default.yaml"
OFFLINE = {
    "CDK_DISABLE_CLI_TELEMETRY": "1",
    "CDK_DISABLE_VERSION_CHECK": "1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
}


def cdk_synth(config: str, outdir: Path) -> subprocess.CompletedProcess[str]:
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith("AWS_") and not k.startswith("CDK_")
    }
    environment.update(OFFLINE)
    return subprocess.run(
        [
            "npx",
            "--no-install",
            "cdk",
            "--no-notices",
            "synth",
            "--quiet",
            "-c",
            f"config={config}",
            "-o",
            str(outdir),
        ],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def default_synth(tmp_path_factory):
    outdir = tmp_path_factory.mktemp("cdk.out")
    return cdk_synth(DEFAULT_CONFIG, outdir), outdir


def test_cli_synthesizes_one_template_per_configured_region_and_the_global_one(default_synth):
    result, outdir = default_synth
    assert result.returncode == 0, result.stderr[-3000:]
    templates = sorted(path.name for path in outdir.glob("*.template.json"))
    assert templates == [
        "shopping-assistant-global.template.json",
        "shopping-assistant-us-east-1.template.json",
        "shopping-assistant-us-east-2.template.json",
        "shopping-assistant-us-west-2.template.json",
    ]
    manifest = json.loads((outdir / "manifest.json").read_text())
    environments = {
        a["environment"] for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"
    }
    assert environments == {f"aws://111111111111/{r}" for r in ("us-east-1", "us-west-2", "us-east-2")}


def test_cli_synth_needed_no_lookups(default_synth):
    result, outdir = default_synth
    assert result.returncode == 0
    manifest = json.loads((outdir / "manifest.json").read_text())
    assert "missing" not in manifest  # every context value (zones) was seeded, nothing left to look up


def test_bad_config_exits_non_zero_with_the_message_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "model:\n  artifacts_s3_uri: s3://bucket/prefix/\n"
        "regions:\n  us-east-1:\n    weight: 1\n    fleets:\n"
        "      - instance_type: inf2.48xlarge\n        tensor_parallel: 7\n        min: 1\n        max: 2\n"
    )
    result = cdk_synth(str(bad), tmp_path / "out")
    assert result.returncode != 0
    assert "bad.yaml" in result.stderr and "tensor_parallel 7 does not divide" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not list((tmp_path / "out").glob("*.template.json"))


def test_missing_config_file_is_named(tmp_path):
    result = cdk_synth(str(tmp_path / "nope.yaml"), tmp_path / "out")
    assert result.returncode != 0
    assert "nope.yaml: config file not found" in result.stderr
    assert "Traceback" not in result.stderr


def test_context_is_read_like_the_cli_hands_it_over(tmp_path):
    overflow = tmp_path / "context.json"
    overflow.write_text(json.dumps({"config": "from-file.yaml"}))
    assert cli_context({}) == {}
    assert cli_context({"CDK_CONTEXT_JSON": '{"config": "a.yaml"}'}) == {"config": "a.yaml"}
    both = cli_context({"CDK_CONTEXT_JSON": '{"other": 1}', "CONTEXT_OVERFLOW_LOCATION_ENV": str(overflow)})
    assert both == {"other": 1, "config": "from-file.yaml"}


def test_bad_config_stops_before_any_cdk_code_is_loaded(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("regions: {}\n")
    probe = "import sys, app; code = app.main(); print('aws_cdk' in sys.modules); sys.exit(code)"
    result = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-c", probe],
        cwd=REPO,
        env={**os.environ, "CDK_CONTEXT_JSON": json.dumps({"config": str(bad)})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout.strip() == "False"
    assert result.stderr.startswith("config error:\n") and "bad.yaml" in result.stderr
