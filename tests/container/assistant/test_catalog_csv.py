"""CSV catalogs as shops export them: a stray Latin-1 byte, quoted cells over several lines, a BOM."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

import assistant.retrieve as retrieve
from assistant.catalog import FIELDS, CatalogError, Product, RowError, generate_catalog, iter_catalog_rows
from assistant.retrieve import build_index

LATIN1_ROWS = 10
CATALOG_ROWS = 20_000


def _csv_bytes(products: list[Product]) -> list[bytes]:
    """The header line, then one encoded line per product."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(FIELDS), lineterminator="\n")
    writer.writeheader()
    for product in products:
        writer.writerow(product.model_dump())
    return [line.encode("utf-8") for line in text.getvalue().splitlines(keepends=True)]


def _latin1_catalog(path: Path) -> list[int]:
    """20,000 products as CSV with 10 rows spread through it whose title holds a Latin-1 'é' (one byte,
    0xE9, invalid as UTF-8); returns those rows' line numbers."""
    lines = _csv_bytes(list(generate_catalog(CATALOG_ROWS, seed=5)))
    bad_lines = [2 + step * (CATALOG_ROWS // LATIN1_ROWS) + 37 for step in range(LATIN1_ROWS)]
    for line_number in bad_lines:
        lines[line_number - 1] = lines[line_number - 1].replace(b",", b",Caf\xe9 ", 1)
    path.write_bytes(b"".join(lines))
    return bad_lines


def test_latin1_rows_lose_no_good_products(tmp_path: Path) -> None:
    catalog = tmp_path / "products.csv"
    bad_lines = _latin1_catalog(catalog)
    stats = build_index(catalog, tmp_path / "index")
    assert (stats.products, stats.skipped) == (CATALOG_ROWS - LATIN1_ROWS, LATIN1_ROWS)
    assert [message.split(": ", 1)[0] for message in stats.row_errors] == [
        f"{catalog} line {line}" for line in bad_lines
    ]
    assert "not valid UTF-8 (byte 0xE9 in column 'title')" in stats.row_errors[0]


def test_each_bad_row_is_reported_on_its_own_line(tmp_path: Path) -> None:
    catalog = tmp_path / "products.csv"
    bad_lines = _latin1_catalog(catalog)
    rows = list(iter_catalog_rows(catalog))
    assert [row.line for row in rows if isinstance(row, RowError)] == bad_lines
    assert sum(isinstance(row, Product) for row in rows) == CATALOG_ROWS - LATIN1_ROWS


def test_a_quoted_cell_over_several_lines_keeps_later_line_numbers_right(tmp_path: Path) -> None:
    catalog = tmp_path / "products.csv"
    catalog.write_bytes(
        b"\xef\xbb\xbfid,title,description\n"  # a BOM, as spreadsheet exports write
        b'A-1,Tent,"Sleeps two.\nPacks small.\nTwo doors."\n'
        b"A-2,Boots \xe9t\xe9,Leather\n"
        b"A-3,Stove,Gas\n"
    )
    rows = list(iter_catalog_rows(catalog))
    assert isinstance(rows[0], Product) and rows[0].description == "Sleeps two.\nPacks small.\nTwo doors."
    assert isinstance(rows[1], RowError) and rows[1].line == 5
    assert isinstance(rows[2], Product) and rows[2].id == "A-3"


def test_a_header_that_is_not_utf8_names_line_1(tmp_path: Path) -> None:
    catalog = tmp_path / "products.csv"
    catalog.write_bytes(b"id,t\xeftle\nA-1,Tent\n")
    with pytest.raises(CatalogError, match=r"products\.csv line 1: header is not valid UTF-8"):
        list(iter_catalog_rows(catalog))


@pytest.mark.parametrize("ending", [b"\n", b""])
def test_rows_read_equal_rows_scanned(tmp_path: Path, ending: bytes) -> None:
    catalog = tmp_path / "products.csv"
    catalog.write_bytes(b"".join(_csv_bytes(list(generate_catalog(50, seed=1))))[:-1] + ending)
    assert build_index(catalog, tmp_path / "index").products == 50


def test_a_reader_that_loses_lines_fails_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build's own check, with a reader that stops early as the chunk decoder used to."""
    catalog = tmp_path / "products.csv"
    catalog.write_bytes(b"".join(_csv_bytes(list(generate_catalog(50, seed=1)))))
    real_reader = retrieve.iter_catalog_rows

    def losing_reader(path, *, lines):
        for number, row in enumerate(real_reader(path, lines=lines)):
            if number == 30:
                return
            yield row

    monkeypatch.setattr(retrieve, "iter_catalog_rows", losing_reader)
    with pytest.raises(CatalogError, match=r"read 32 of the file's 51 lines"):
        build_index(catalog, tmp_path / "index")


STRAY_QUOTE_ROWS = 3


def _stray_quote_catalog(path: Path) -> list[int]:
    """20,000 products as CSV where three titles open a quote they never close (as a hand-edited export
    does); returns those rows' line numbers."""
    lines = _csv_bytes(list(generate_catalog(CATALOG_ROWS, seed=6)))
    bad_lines = [2 + 1_000, 2 + 7_000, 2 + 15_000]
    for line_number in bad_lines:
        row = lines[line_number - 1]
        product_id, rest = row.split(b",", 1)
        lines[line_number - 1] = product_id + b',"' + rest
    path.write_bytes(b"".join(lines))
    return bad_lines


def test_stray_quotes_cost_their_own_rows_only(tmp_path: Path) -> None:
    """A csv.reader let each unclosed quote swallow the rows up to the next one: 3 stray quotes in 20,000
    rows lost 7,997 products while the build reported 0.025% bad rows."""
    catalog = tmp_path / "products.csv"
    bad_lines = _stray_quote_catalog(catalog)
    rows = list(iter_catalog_rows(catalog))
    errors = [row for row in rows if isinstance(row, RowError)]
    assert [row.line for row in errors] == bad_lines
    assert "a quoted cell is not closed" in errors[0].message or "joins" in errors[0].message
    # Every row of the file is accounted for: read + bad = rows.
    products = sum(isinstance(row, Product) for row in rows)
    assert products + len(errors) == CATALOG_ROWS
    assert products == CATALOG_ROWS - STRAY_QUOTE_ROWS


def test_stray_quotes_close_to_each_other_each_cost_one_row(tmp_path: Path) -> None:
    catalog = tmp_path / "products.csv"
    catalog.write_bytes(
        b"id,title,price\n"
        b'A-1,"Tent,10\n'
        b"A-2,Stove,20\n"
        b'A-3,Boots 5" high,30\n'
        b'A-4,"Lamp, LED",40\n'
        b'A-5,"Mat\n'
        b"A-6,Pad,50\n"
    )
    rows = list(iter_catalog_rows(catalog))
    good = {row.id for row in rows if isinstance(row, Product)}
    bad = [row.line for row in rows if isinstance(row, RowError)]
    assert good == {"A-2", "A-3", "A-4", "A-6"}  # a quote inside an unquoted cell is text
    assert bad == [2, 6]
    assert len(good) + len(bad) == 6


def test_a_jsonl_catalog_with_a_byte_order_mark_keeps_its_first_row(tmp_path: Path) -> None:
    catalog = tmp_path / "products.jsonl"
    catalog.write_bytes(b'\xef\xbb\xbf{"id": "A-1", "title": "Tent"}\n{"id": "A-2", "title": "Stove"}\n')
    rows = list(iter_catalog_rows(catalog))
    assert [row.id for row in rows if isinstance(row, Product)] == ["A-1", "A-2"]
