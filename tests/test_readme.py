"""The README and the docs pages: every `make <target>` they show is a Makefile target, every config they name
is a file, the README leads with the two commands a new user runs first and stays a front door, and every
section the README used to hold (which issues, pages and code comments linked to) still resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
READMES = [README, ROOT / "container" / "README.md"]
TARGET = re.compile(r"^([a-z][a-z-]*):", re.MULTILINE)
MAX_README_LINES = 200
# The sections of the README before it became a front door (issue 20), by their GitHub anchors.
OLD_ANCHORS = (
    "what-it-deploys",
    "commands",
    "layout",
    "config",
    "peak-events",
    "warm-pools",
    "capacity-reservations-and-capacity-blocks",
    "preflight",
    "cross-region-routing",
    "operating-a-region",
    "what-each-alarm-means-and-what-to-do",
    "neuroncore-metrics-a-sidecar-not-a-daemon-service",
    "the-regional-dashboard",
    "scaling",
    "deploys-surge-hosts-and-rollback",
    "the-neuron-ami-and-how-to-move-it",
    "cells",
    "deploying",
    "deploys-in-waves",
    "destroying",
    "capacity-planner",
    "game-day",
    "network-endpoint-and-operator-access-the-cost-switches",
    "availability-zones",
    "model-artifacts-and-images-per-region",
    "benchmarks",
    "departures-from-the-design-notes",
)


def makefile_targets() -> set[str]:
    return set(TARGET.findall((ROOT / "Makefile").read_text()))


def make_commands(text: str) -> set[str]:
    fenced = "\n".join(text.split("```")[1::2])
    commands = re.findall(r"`(make [^`]*)`", text) + re.findall(r"^\$? ?(make .*)$", fenced, re.MULTILINE)
    return {command.split()[1] for command in commands}


def heading_anchors(text: str) -> set[str]:
    """GitHub's and MkDocs' anchors for a page's headings (lower case, punctuation dropped, spaces to '-'),
    and every explicit <a id>."""
    headings = re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)
    slugs = {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}
    return slugs | set(re.findall(r'<a id="([^"]+)"></a>', text))


@pytest.mark.parametrize("page", READMES + DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_make_command_shown_is_a_target(page: Path) -> None:
    shown = make_commands(page.read_text())
    if page in READMES:
        assert shown, f"{page} shows no make command"
    assert shown <= makefile_targets(), f"not in the Makefile: {sorted(shown - makefile_targets())}"


def test_the_docs_show_the_commands_of_every_task() -> None:
    shown = set().union(*(make_commands(page.read_text()) for page in DOCS))
    assert {"deploy", "preflight", "plan", "gameday", "rehearse-routing", "traffic", "index"} <= shown


def test_configs_named_in_the_readme_and_docs_exist() -> None:
    named = {
        name
        for page in [README, *DOCS]
        for name in re.findall(r"CONFIG=(config/[\w.-]+\.yaml)", page.read_text())
    }
    real = {name for name in named if name != "config/bad.yaml"}  # the error example is made up on purpose
    assert real and all((ROOT / name).is_file() for name in real), sorted(real)


def test_readme_leads_with_synth_and_test() -> None:
    first_block = README.read_text().split("```")[1]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make synth", "make test"]


def test_the_readme_stays_a_front_door() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines: move sections to docs/"


@pytest.mark.parametrize("anchor", OLD_ANCHORS)
def test_every_old_readme_anchor_still_resolves_to_its_new_page(anchor: str) -> None:
    text = README.read_text()
    assert anchor in heading_anchors(text), f"README.md#{anchor} no longer resolves: list it under Moved"
    rows = [line for line in text.splitlines() if f'<a id="{anchor}"></a>' in line]
    if not rows:
        return  # still a section of the README itself
    (row,) = rows
    (target,) = re.findall(r"\]\((docs/[\w.-]+\.md)#([\w-]+)\)", row)
    page, page_anchor = ROOT / target[0], target[1]
    assert page.is_file(), f"README.md#{anchor} points to {target[0]}, which does not exist"
    assert page_anchor in heading_anchors(page.read_text()), f"{target[0]} has no section #{page_anchor}"


def test_code_names_no_readme_section_that_moved() -> None:
    """Comments cite a section as (README, "Cells"); once it moved they name its page."""
    old_titles = {
        "Cells",
        "Game day",
        "Peak events",
        "Capacity planner",
        "Benchmarks",
        "Cross-region routing",
    }
    pattern = re.compile(r'README,? "?(' + "|".join(map(re.escape, old_titles)) + ")")
    sources = (
        "app.py",
        "cdk_constructs",
        "config",
        "gameday",
        "ops",
        "orchestrator",
        "planner",
        "settings",
        "stacks",
    )
    files = (
        [ROOT / "Makefile"]
        + [path for name in sources for path in sorted((ROOT / name).rglob("*")) if (ROOT / name).is_dir()]
        + [ROOT / name for name in sources if (ROOT / name).is_file()]
    )
    cited = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in files
        if path.is_file() and path.suffix in {"", ".py", ".yaml"}
        for match in pattern.finditer(path.read_text())
    ]
    assert not cited, cited


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text().splitlines()
