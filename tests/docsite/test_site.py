"""The docs site builds strict, offline, and a broken reference fails the build.

The site is built the way `make docs` builds it (`mkdocs build --strict` on mkdocs.yml), from a copy of the
files it reads, so the breakages below never touch the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from docsite.mkdocs_hooks import IncludeError, expand_includes, page_links_for_site, readme_for_site

ROOT = Path(__file__).resolve().parents[2]
# What the build reads: its config, the pages, the README it makes the home page, the files pages include.
SITE_INPUTS = ("mkdocs.yml", "docs", "docsite", "README.md", "container/README.md")


def copy_site(destination: Path) -> Path:
    for name in SITE_INPUTS:
        source = ROOT / name
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)
    return destination


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    # The snippets' base path is the working folder, as under `make docs`.
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_site_builds_strict_with_every_page_and_picture(tmp_path: Path) -> None:
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr
    site = tmp_path / "site"
    home = (site / "index.html").read_text()
    assert 'class="mermaid"' in home  # the architecture picture, drawn from the README's text
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert (site / page.with_suffix(".html").name).is_file(), page.name
    pictures = {picture.name for picture in (ROOT / "docs").glob("*.png")}
    shown = {
        picture
        for picture in pictures
        for html in site.glob("*.html")
        if f'src="{picture}"' in html.read_text()
    }
    assert shown == pictures, f"pictures no page shows: {sorted(pictures - shown)}"
    # The included files arrive whole: the container's README on the serving page, its CVE table on security.
    assert "CVE-2025-23310" in (site / "serving.html").read_text()
    assert "CVE-2025-23310" in (site / "security.html").read_text()


def _replace(relative: str, old: str, new: str) -> Callable[[Path], None]:
    def breaking(root: Path) -> None:
        path = root / relative
        text = path.read_text()
        assert old in text, f"{relative} no longer holds {old!r}: pick another breakage"
        path.write_text(text.replace(old, new, 1))

    return breaking


def _add_page(root: Path) -> None:
    (root / "docs" / "stray.md").write_text("# A page no one can reach\n")


@pytest.mark.parametrize(
    ("breaking", "message"),
    [
        pytest.param(
            _replace("README.md", "(docs/gameday.md)", "(docs/game-day.md)"), "game-day.md", id="link"
        ),
        pytest.param(
            _replace("docs/deploying.md", "(peak-events.md#preflight)", "(peak-events.md#pre-flight)"),
            "pre-flight",
            id="anchor",
        ),
        pytest.param(
            _replace("mkdocs.yml", "Benchmarks: benchmarks.md", "Benchmarks: bench.md"), "bench.md", id="nav"
        ),
        pytest.param(_add_page, "stray.md", id="page-not-in-nav"),
        pytest.param(
            _replace(
                "docs/security.md", "container/README.md#security -->", "container/README.md#secrets -->"
            ),
            "no section 'secrets'",
            id="included-section",
        ),
        pytest.param(
            _replace("README.md", "<!-- picture: end -->", ""),
            "README.md has no section 'picture'",
            id="picture",
        ),
        pytest.param(
            _replace("docs/serving.md", "include: container/README.md", "include: container/READ.md"),
            "container/READ.md does not exist",
            id="included-file",
        ),
    ],
)
def test_a_broken_reference_fails_the_build(
    tmp_path: Path, breaking: Callable[[Path], None], message: str
) -> None:
    root = copy_site(tmp_path / "repo")
    breaking(root)
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    assert message in done.stderr


def test_the_home_page_links_resolve_beside_the_pages() -> None:
    readme = (
        "[Deploying](docs/deploying.md#day-zero-checklist), [serving](container/README.md#security), [x](#m)"
    )
    site = "[Deploying](deploying.md#day-zero-checklist), [serving](serving.md#security), [x](#m)"
    assert readme_for_site(readme) == site


def test_a_page_links_the_readmes_outside_docs_as_the_pages_that_show_them() -> None:
    page = (
        "[front](../README.md#the-picture), [serving](../container/README.md#security), [ops](operating.md)"
    )
    site = "[front](index.md#the-picture), [serving](serving.md#security), [ops](operating.md)"
    assert page_links_for_site(page) == site


def test_an_include_brings_a_whole_file_or_one_section(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text(
        "# Notes\n\nbefore\n<!-- part: start -->\nthe part\n<!-- part: end -->\nafter\n"
    )
    page = "intro\n<!-- include: notes.md#part -->\nmiddle\n<!-- include: notes.md -->\n"
    expanded = expand_includes(page, tmp_path)
    assert expanded.startswith("intro\nthe part\nmiddle\n# Notes\n")
    with pytest.raises(IncludeError, match="no section 'other'"):
        expand_includes("<!-- include: notes.md#other -->", tmp_path)
    with pytest.raises(IncludeError, match=r"missing\.md does not exist"):
        expand_includes("<!-- include: missing.md -->", tmp_path)
