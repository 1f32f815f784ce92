"""The Makefile's CDK commands against the pinned CLI: every option a recipe passes is one the CLI accepts
(its own --help), and synth starts from an empty cdk.out/."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CDK_ENV = {**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "1", "CDK_DISABLE_VERSION_CHECK": "1"}


def recipe(target: str, *variables: str) -> list[str]:
    """The commands `make TARGET` would run, without running them or their prerequisites' recipes."""
    done = subprocess.run(
        ["make", "-n", "-W", "venv", "-W", "node", "-W", "validate", target, *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if line.strip()]


def cdk_command(lines: list[str], subcommand: str) -> list[str]:
    (line,) = [line for line in lines if f"cdk --no-notices {subcommand} " in line]
    words = shlex.split(line)
    return words[words.index(subcommand) + 1 :]


@cache
def accepted_options(subcommand: str) -> set[str]:
    """Every --option and -o the pinned CLI lists for a subcommand."""
    done = subprocess.run(
        ["npx", "--no-install", "cdk", subcommand, "--help", "--no-notices"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=CDK_ENV,
        timeout=120,
    )
    return set(re.findall(r"(?<![\w-])(--[a-z][\w-]*|-[a-zA-Z])\b", done.stdout + done.stderr))


@pytest.mark.parametrize(("target", "subcommand"), [("diff", "diff"), ("synth", "synth")])
def test_recipe_options_are_ones_the_pinned_cli_accepts(target, subcommand):
    # yargs takes --no-X for a boolean --X
    passed = {
        re.sub(r"^--no-", "--", word)
        for word in cdk_command(recipe(target), subcommand)
        if word.startswith("-")
    }
    assert passed, "no options found in the recipe"
    assert passed <= accepted_options(subcommand), sorted(passed - accepted_options(subcommand))


def test_what_deploy_waves_passes_the_cli_is_accepted():
    """ops/deploy_waves.py runs `synth --quiet -c ... -o DIR` and `deploy --app DIR --exclusively STACK`."""
    assert {"--quiet", "-c", "-o"} <= accepted_options("synth")
    assert {"--app", "--exclusively", "--all", "-c"} <= accepted_options("deploy")


def test_synth_empties_cdk_out_first():
    lines = recipe("synth", "CONFIG=config/prime-day.yaml")
    synth = next(i for i, line in enumerate(lines) if "cdk --no-notices synth " in line)
    assert any(re.fullmatch(r"rm -rf cdk\.out/?", line.strip()) for line in lines[:synth])
    assert cdk_command(lines, "synth")[-2:] == ["-o", "cdk.out"]


def test_deploy_goes_in_waves_unless_waves_is_zero():
    (waves,) = [line for line in recipe("deploy") if "ops.deploy_waves" in line]
    assert "--all-at-once" not in waves and "--dry-run" not in waves
    (at_once,) = [line for line in recipe("deploy", "WAVES=0", "DRY_RUN=1") if "ops.deploy_waves" in line]
    assert "--all-at-once" in at_once and "--dry-run" in at_once
