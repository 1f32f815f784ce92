"""The Makefile's CDK commands against the pinned CLI: every option a recipe passes is one the CLI accepts
(its own --help), and synth starts from an empty cdk.out/."""

from __future__ import annotations

import json
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
    """ops/deploy_waves.py runs `synth --quiet -c ... -o DIR` and `deploy --app DIR --exclusively STACK`
    (the hotfix path's cells: `--concurrency N STACK...`, ops/cdk_cli.py)."""
    assert {"--quiet", "-c", "-o"} <= accepted_options("synth")
    assert {"--app", "--exclusively", "--all", "-c", "--concurrency"} <= accepted_options("deploy")


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


def test_make_gameday_exits_0_on_pass_1_on_fail_and_2_on_a_bad_scenario(tmp_path):
    """The issue's contract is `make gameday`'s own status, not only `python -m gameday`'s: make reports any
    failed recipe as 2, so the Makefile runs the day while it reads itself (see its game-day section)."""
    config = ROOT / "config" / "prime-day.yaml"

    def scenario(name: str, rps: int, minutes: int = 4, faults: str = "") -> str:
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            f'config: {config}\nstart: "2027-07-08T12:00:00-07:00"\nminutes: {minutes}\n'
            f"traffic:\n  us-east-1: [[0, {rps}]]\n  us-west-2: [[0, 1500]]\n  us-east-2: [[0, 1000]]\n"
            + faults
        )
        return str(path)

    def make_gameday(path: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["make", "--no-print-directory", "gameday", f"SCENARIO={path}", *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )

    passed = make_gameday(scenario("steady", 2500), "JSON=1")
    assert passed.returncode == 0, passed.stderr
    assert json.loads(passed.stdout.splitlines()[-1])["summary"]["verdict"] == "pass"
    # Half of us-east-1's requests failing on live engines, under the default budget of no lost request (a
    # flood of demand no longer fails: sheds of what no target could serve are not the system's loss).
    errors = "faults:\n  - {kind: serving_errors, region: us-east-1, share: 0.5, at: 0, until: 4}\n"
    failed = make_gameday(scenario("errors", 2500, faults=errors), "JSON=1")
    assert failed.returncode == 1, failed.stderr
    assert json.loads(failed.stdout.splitlines()[-1])["summary"]["verdict"] == "fail"
    bad = make_gameday(scenario("no-minutes", 2500, minutes=0))
    assert bad.returncode == 2
    assert "no-minutes.yaml:3: minutes" in bad.stderr
    usage = subprocess.run(["make", "gameday"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert usage.returncode == 2 and "usage: make gameday SCENARIO=" in usage.stderr


def test_validate_strict_is_a_make_variable_that_reaches_the_validator():
    """`make validate STRICT=1` is how the validator's --strict is reached through make (make itself would
    reject --strict as an option of its own)."""

    def validate(*variables: str) -> str:
        # Run under another make (as CI's `make test` runs this), the child inherits MAKEFLAGS and prints
        # "Entering/Leaving directory" lines around the recipe; the validator's line is the one to judge.
        done = subprocess.run(
            ["make", "--no-print-directory", "-n", "-W", "venv", "validate", *variables],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return next(line for line in done.stdout.splitlines() if "-m settings" in line).strip()

    assert validate("STRICT=1").endswith("-m settings config/default.yaml --strict")
    assert validate().endswith("-m settings config/default.yaml")


def _make_test_dry_run(*variables: str) -> list[str]:
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "test", *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={key: value for key, value in os.environ.items() if not key.startswith("MAKE")},
    )
    return [line for line in done.stdout.splitlines() if "WARNING" not in line]


def test_make_test_installs_the_serving_environments_while_the_suites_run():
    """A fresh clone's time is mostly the serving environments' installs: they start first and run beside the
    suites (-j), the suites run one after another beside CPU_HOG's busy processes, and every test session
    starts without make's flags (a jobserver a make in a test cannot reach)."""
    lines = _make_test_dry_run("CPU_HOG=2")
    assert re.match(r"make .*-j3 .*serve-env-0\.13\.0", lines[0]), lines[0]
    sessions = [number for number, line in enumerate(lines) if "/bin/pytest tests" in line]
    suites = [lines[number].split("/bin/pytest")[0] for number in sessions]
    # The infrastructure suite, then the serving suite on each vLLM version.
    assert [suite.split()[-1] for suite in suites] == [".venv", ".venv-serve", ".venv-serve-0.13"], suites
    install = lines.index("make --no-print-directory serve-env VLLM=0.13.0")
    assert install < sessions[0], "vLLM 0.13's install must start before the first suite, not after it"
    for number in sessions:
        assert lines[number].startswith("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "), lines[number]
        assert lines[number].endswith("--cpu-hog=2"), lines[number]


def test_make_test_runs_the_suites_one_after_another_and_on_the_second_vllm_only_its_marked_tests():
    """The infrastructure suite, then the serving suite whole on vLLM 0.32, then on 0.13 only the tests marked
    vllm_version: one after another, never two suites at once (the serving tests' timing assumes the machine
    is theirs)."""
    lines = _make_test_dry_run()
    assert not lines[0].endswith("test-infra"), lines[0]
    sessions = [line for line in lines if "/bin/pytest tests" in line]
    assert len(sessions) == 3, sessions
    assert ".venv/bin/pytest tests --ignore=tests/container" in sessions[0], sessions[0]
    assert ".venv-serve/bin/pytest" in sessions[1] and "-m " not in sessions[1], sessions[1]
    assert ".venv-serve-0.13/bin/pytest" in sessions[2] and " -m vllm_version" in sessions[2], sessions[2]
