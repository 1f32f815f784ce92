"""The configuration reference is generated from the settings models and cannot drift from them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from docsite.config_reference import PAGE, main, render_page, sections
from settings import Settings


def test_the_committed_reference_is_what_the_models_generate() -> None:
    assert PAGE.read_text() == render_page(Settings), "docs/configuration.md is stale: run `make docs`"


def test_every_key_of_every_section_is_in_the_reference() -> None:
    """Walked from the root model, whichever module each section lives in: a section added anywhere shows."""
    page = PAGE.read_text()
    found = list(sections(Settings))
    paths = {section.path for section in found}
    expected = {
        "",
        "serving",
        "serving.deployment",
        "regions.<region>",
        "regions.<region>.fleets[]",
        "regions.<region>.fleets[].warm_pool",
        "events[]",
        "events[].regions.<region>.<instance_type>",
        "load_balancer.waf",
        "routing",
    }
    assert expected <= paths
    for section in found:
        if section.path:
            assert f"## `{section.path}`" in page
        for row in section.rows:
            assert f"| `{row.key}` |" in page


class _Inner(BaseModel):
    """Hosts kept warm."""

    model_config = ConfigDict(extra="forbid")

    size: Annotated[int, Field(ge=0, le=40)] = 2  # stopped hosts


class _Root(BaseModel):
    # Share of requests, above which a region is bad ...
    share: Annotated[float, Field(gt=0, lt=1)] = 0.01  # ... per minute
    name: Annotated[str, Field(pattern=r"^[a-z]+$")]
    limit: Annotated[int, Field(ge=10)] | None = None
    mode: Literal["ip", "header"] = "ip"
    zones: Annotated[list[str], Field(min_length=2, max_length=6)] = Field(default_factory=list)
    pools: dict[str, list[_Inner]] = Field(default_factory=dict)
    described: int = Field(default=3, description="the Field's own description wins")  # not this comment


def test_types_defaults_bounds_and_comments_come_from_the_model() -> None:
    root, inner = list(sections(_Root))
    rows = {row.key: row for row in root.rows}
    assert (rows["share"].type, rows["share"].default, rows["share"].bounds) == (
        "float",
        "`0.01`",
        "> 0, < 1",
    )
    assert rows["share"].description == "Share of requests, above which a region is bad ... ... per minute"
    assert (rows["name"].default, rows["name"].bounds) == ("required", "matches `^[a-z]+$`")
    assert (rows["limit"].type, rows["limit"].default, rows["limit"].bounds) == (
        "int or null",
        "`null`",
        "≥ 10",
    )
    assert rows["mode"].type == '"ip" or "header"'
    assert (rows["zones"].default, rows["zones"].bounds) == ("`[]`", "at least 2, at most 6")
    assert rows["pools"].type == "map of key to list of [pools.<key>[]](#poolskey)"
    assert rows["described"].description == "the Field's own description wins"
    assert inner.path == "pools.<key>[]"
    assert [(row.key, row.bounds, row.description) for row in inner.rows] == [
        ("size", "0 to 40", "stopped hosts")
    ]
    page = render_page(_Root)
    assert "## `pools.<key>[]`\n\nHosts kept warm.\n" in page
    assert "| `share` | float | `0.01` | > 0, < 1 |" in page


def test_check_fails_on_a_stale_page_and_passes_once_written(tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    page.write_text("# an old reference\n")
    assert main(["--out", str(page), "--check"]) == 1
    assert main(["--out", str(page)]) == 0
    assert main(["--out", str(page), "--check"]) == 0
    assert page.read_text() == render_page(Settings)
