"""The README's commands exist: every `make <target>` it shows is a Makefile target, every config it
names is a file, and it leads with the two commands a new user runs first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = [ROOT / "README.md", ROOT / "container" / "README.md"]
TARGET = re.compile(r"^([a-z][a-z-]*):", re.MULTILINE)


def makefile_targets() -> set[str]:
    return set(TARGET.findall((ROOT / "Makefile").read_text()))


@pytest.mark.parametrize("readme", READMES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_make_command_shown_is_a_target(readme: Path) -> None:
    text = readme.read_text()
    fenced = "\n".join(text.split("```")[1::2])
    commands = re.findall(r"`(make [^`]*)`", text) + re.findall(r"^\$? ?(make .*)$", fenced, re.MULTILINE)
    shown = {command.split()[1] for command in commands}
    assert shown, f"{readme} shows no make command"
    assert shown <= makefile_targets(), f"not in the Makefile: {sorted(shown - makefile_targets())}"


def test_configs_named_in_the_readme_exist() -> None:
    named = set(re.findall(r"CONFIG=(config/[\w.-]+\.yaml)", (ROOT / "README.md").read_text()))
    real = {name for name in named if name != "config/bad.yaml"}  # the error example is made up on purpose
    assert real and all((ROOT / name).is_file() for name in real)


def test_readme_leads_with_synth_and_test() -> None:
    first_block = (ROOT / "README.md").read_text().split("```")[1]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make synth", "make test"]


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text().splitlines()
