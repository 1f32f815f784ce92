"""`make deploy`'s command lines (make -n: printed, not run): strict validation for a deploy but not for a
dry run, so the shipped configs (which page no one until alarm_email is set) still show the sequence; and
approval only with APPROVE=1."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def make_lines(*variables: str) -> list[str]:
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", "deploy", "CONFIG=config/prime-day.yaml", *variables],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.splitlines()


def line_of(lines: list[str], module: str) -> str:
    (line,) = [line for line in lines if f"-m {module} " in line]
    return line


def test_a_deploy_validates_strictly_and_asks_no_approval_by_itself():
    lines = make_lines()
    assert line_of(lines, "settings").rstrip().endswith("--strict")
    waves = line_of(lines, "ops.deploy_waves")
    assert "--approve" not in waves and "--dry-run" not in waves and "--skip-preflight" not in waves
    assert "--hotfix" not in waves


@pytest.mark.parametrize(("value", "hotfix"), [("1", True), ("0", False), ("yes", False)])
def test_only_hotfix_1_takes_the_hotfix_path(value, hotfix):
    assert ("--hotfix" in line_of(make_lines(f"HOTFIX={value}"), "ops.deploy_waves")) is hotfix


def test_a_dry_run_validates_without_strict_so_the_shipped_configs_show_the_sequence():
    lines = make_lines("DRY_RUN=1")
    assert "--strict" not in line_of(lines, "settings")
    assert "--dry-run" in line_of(lines, "ops.deploy_waves")


@pytest.mark.parametrize(("value", "approved"), [("1", True), ("0", False), ("yes", False)])
def test_only_approve_1_deploys_security_changes_without_asking(value, approved):
    assert ("--approve" in line_of(make_lines(f"APPROVE={value}"), "ops.deploy_waves")) is approved


def test_the_shipped_config_dry_run_runs_through(tmp_path):
    """For real: validation warns (pages no one) and the day-zero sequence prints, exit 0."""
    result = subprocess.run(
        ["make", "--no-print-directory", "deploy", "DRY_RUN=1", "CONFIG=config/prime-day.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "alarms page no one" in result.stderr
    assert "day zero, in order:" in result.stdout and "6 waves" in result.stdout
    # Both paths' worst cases, from the code, for the docs to quote.
    assert "normal: 6 waves, worst case " in result.stdout
    assert "hotfix (HOTFIX=1): 5 waves, worst case " in result.stdout
    assert_whole_sequence(result.stdout, here="deploy")


def assert_whole_sequence(out: str, here: str) -> None:
    """Quotas, permissions, bootstrap, compile, index, deploy, subscribe: in order, this step marked."""
    steps = [out.index(f". {step}: ") for step in ("quotas", "permissions", "bootstrap", "compile", "index")]
    steps += [out.index(f". {step}: ") for step in ("deploy", "subscribe")]
    assert steps == sorted(steps)
    assert "-> " in out and out[out.index("-> ") :].split(". ", 1)[1].startswith(f"{here}: ")


def test_make_compile_dry_run_lists_the_keys_without_credentials(tmp_path):
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    result = subprocess.run(
        ["make", "--no-print-directory", "compile", "DRY_RUN=1", "CONFIG=config/prime-day.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=environment,
    )
    assert result.returncode == 0, result.stderr
    assert "6 compiled-artifact keys" in result.stdout and "not checked (no AWS credentials)" in result.stdout
    assert_whole_sequence(result.stdout, here="compile")


def test_the_deploy_times_in_the_docs_are_the_ones_the_dry_run_prints():
    """docs/deploying.md quotes the dry run's last line for each shipped config: a change that moves a wave's
    limit fails here until the page follows."""
    page = (REPO / "docs" / "deploying.md").read_text(encoding="utf-8")
    quoted = page.split("<!-- deploy-times: start -->")[1].split("<!-- deploy-times: end -->")[0]
    expected = ["```"]
    for command, config in (
        ("make deploy DRY_RUN=1 CONFIG=config/prime-day.yaml", "config/prime-day.yaml"),
        ("make deploy DRY_RUN=1", "config/default.yaml"),
    ):
        result = subprocess.run(
            ["make", "--no-print-directory", "deploy", "DRY_RUN=1", f"CONFIG={config}"],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr
        expected += [f"$ {command}", result.stdout.strip().splitlines()[-1]]
    expected.append("```")
    assert quoted.strip().splitlines() == expected
