"""MkDocs hook: one text for the GitHub view and the site.

- The site's home page is the repository's README.md. The README links into docs/ (`docs/deploying.md`);
  on the site those pages sit beside the home page (`deploying.md`).
- A page may show a file kept elsewhere with `<!-- include: PATH -->`, or one section of it with
  `<!-- include: PATH#NAME -->`, the section being what lies between `<!-- NAME: start -->` and
  `<!-- NAME: end -->` in that file (PATH from the repository root). On GitHub the comment is invisible and
  the page's own link to the file stands in; on the site the text is there. A missing file or section fails
  the build.
- Links to the two READMEs outside docs/ (`../README.md`, `../container/README.md`) become links to the
  pages that show them on the site (the home page, the serving page).

The strict build then checks every rewritten link like any other."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
HOME = "index.md"
# Where the site shows each README kept outside docs/.
SHOWN_AT = {"README.md": "index.md", "container/README.md": "serving.md"}
_INCLUDE = re.compile(r"^<!-- include: (?P<path>[^#\s]+)(?:#(?P<section>[\w-]+))? -->$", re.MULTILINE)


class IncludeError(PluginError):
    """A page includes a file or section that does not exist."""


def section_of(text: str, name: str, path: str) -> str:
    start, end = f"<!-- {name}: start -->", f"<!-- {name}: end -->"
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise IncludeError(f"{path} has no section {name!r} (one {start} and, after it, one {end})")
    return text.split(start, 1)[1].split(end, 1)[0].strip("\n")


def expand_includes(markdown: str, root: Path = ROOT) -> str:
    def include(match: re.Match[str]) -> str:
        path = match.group("path")
        source = root / path
        if not source.is_file():
            raise IncludeError(f"included file {path} does not exist")
        text = source.read_text()
        return section_of(text, match.group("section"), path) if match.group("section") else text

    return _INCLUDE.sub(include, markdown)


def readme_for_site(text: str) -> str:
    """The README as the home page: `docs/X` links as `X`, `container/README.md` as the serving page."""
    text = re.sub(r"\]\(docs/", "](", text)
    return re.sub(r"\]\(container/README\.md", "](" + SHOWN_AT["container/README.md"], text)


def page_links_for_site(text: str) -> str:
    """A docs page's links to the READMEs outside docs/ as links to the pages that show them."""
    for path, page in SHOWN_AT.items():
        text = text.replace(f"](../{path}", f"]({page}")
    return text


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri == HOME:
        markdown = readme_for_site((ROOT / "README.md").read_text())
    else:
        markdown = page_links_for_site(markdown)
    return expand_includes(markdown)
