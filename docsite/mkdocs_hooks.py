"""MkDocs hook: the site's home page is the repository's README.md, with its links made relative to docs/.

The README is the front door on GitHub and links into docs/ (`docs/deploying.md`); on the site the same
pages sit beside the home page (`deploying.md`). Rewriting the links here keeps one text for both; the
strict build then checks every rewritten link like any other."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

HOME = "index.md"
README = Path(__file__).resolve().parents[1] / "README.md"
# container/README.md is shown on the site as the serving page.
_LINK = re.compile(r"\]\((?:docs/|(container/README\.md))([^)]*)\)")


def readme_for_site(text: str) -> str:
    """The README with `docs/X` links as `X` and `container/README.md` links as `serving.md`."""
    return _LINK.sub(
        lambda match: "](" + ("serving.md" if match.group(1) else "") + match.group(2) + ")", text
    )


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != HOME:
        return markdown
    return readme_for_site(README.read_text())
