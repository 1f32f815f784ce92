from __future__ import annotations

import hashlib
import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assistant.catalog import CatalogError, Product, generate_catalog, read_catalog, write_catalog
from assistant.retrieve import (
    MANIFEST_NAME,
    MAX_TOP_K,
    CatalogIndexError,
    ProductIndex,
    build_index,
    main,
)


@pytest.fixture()
def small_catalog(tmp_path: Path) -> Path:
    path = tmp_path / "small.jsonl"
    write_catalog(generate_catalog(300, seed=2), path)
    return path


def test_index_holds_every_product(product_index: ProductIndex, catalog_file: Path) -> None:
    assert product_index.product_count == len(read_catalog(catalog_file)) == 2_000


@pytest.mark.parametrize(
    ("query", "category"),
    [
        ("waterproof hiking boots", "Hiking Boots"),
        ("noise cancelling headphones", "Headphones"),
        ("ultralight backpacking tent", "Tents"),
        ("espresso machine with milk frother", "Coffee Makers"),
        ("gaming laptop", "Laptops"),
    ],
)
def test_top_results_come_from_the_asked_for_category(
    product_index: ProductIndex, query: str, category: str
) -> None:
    results = product_index.search(query, 5)
    assert len(results) == 5
    assert all(product.category == category for product in results), [p.title for p in results]


def test_brand_and_noun_together_rank_that_brands_products_first(product_index: ProductIndex) -> None:
    (best,) = product_index.search("Northpeak tent", 1)
    assert (best.brand, best.category) == ("Northpeak", "Tents")


def test_results_are_whole_products(product_index: ProductIndex, catalog_file: Path) -> None:
    catalog = {product.id: product for product in read_catalog(catalog_file)}
    for product in product_index.search("rain jacket", 10):
        assert catalog[product.id] == product


def test_price_cap_filters_results(product_index: ProductIndex) -> None:
    results = product_index.search("laptop", 10, max_price=600)
    assert results
    assert all(product.price <= 600 for product in results)
    assert all(product.category == "Laptops" for product in results)


@pytest.mark.parametrize("top_k", [1, 3, 7])
def test_top_k_bounds_the_result_count(product_index: ProductIndex, top_k: int) -> None:
    assert len(product_index.search("boots", top_k)) == top_k


def test_top_k_is_capped(product_index: ProductIndex) -> None:
    assert len(product_index.search("waterproof", 10_000)) == MAX_TOP_K


@pytest.mark.parametrize("query", ["", "   ", "the and of", "!!!", "a an the to"])
def test_queries_without_terms_return_nothing(product_index: ProductIndex, query: str) -> None:
    assert product_index.search(query, 5) == []


def test_zero_or_negative_top_k_returns_nothing(product_index: ProductIndex) -> None:
    assert product_index.search("boots", 0) == []
    assert product_index.search("boots", -3) == []


@pytest.mark.parametrize(
    "query",
    [
        "title:boots",
        "boots AND OR NOT",
        '"unbalanced',
        "(boots",
        "boots)",
        "*",
        "price:[0 TO 10]",
        "+-!^~",
        "boot~2",
        "\\",
        "/regex.*/",
        "IN [a b]",
        "brand:Northpeak^5",
    ],
)
def test_query_syntax_is_just_text(product_index: ProductIndex, query: str) -> None:
    results = product_index.search(query, 5)
    assert all(isinstance(product, Product) for product in results)


def test_field_syntax_does_not_restrict_the_field(product_index: ProductIndex) -> None:
    assert product_index.search("title:boots", 5) == product_index.search("title boots", 5)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=200), top_k=st.integers(min_value=-5, max_value=20))
def test_any_text_searches_safely(product_index: ProductIndex, query: str, top_k: int) -> None:
    results = product_index.search(query, top_k)
    assert len(results) <= max(top_k, 0)


def test_many_threads_get_the_same_answers_as_one(product_index: ProductIndex) -> None:
    queries = [
        "hiking boots",
        "tent",
        "headphones",
        "laptop 16gb",
        "yoga mat",
        "bike",
        "chef knife",
        "monitor",
    ] * 25
    expected = [[p.id for p in product_index.search(query, 5)] for query in queries]
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda query: [p.id for p in product_index.search(query, 5)], queries))
    assert got == expected


def test_build_reports_stats_and_writes_a_manifest(small_catalog: Path, tmp_path: Path) -> None:
    stats = build_index(small_catalog, tmp_path / "idx")
    assert stats.products == 300
    assert stats.size_bytes > 0
    assert stats.index_dir == tmp_path / "idx"
    manifest = json.loads((tmp_path / "idx" / MANIFEST_NAME).read_text())
    assert {key: manifest[key] for key in ("format", "products", "skipped_rows", "catalog")} == {
        "format": 2,
        "products": 300,
        "skipped_rows": 0,
        "catalog": "small.jsonl",
    }
    assert manifest["catalog_sha256"] == hashlib.sha256(small_catalog.read_bytes()).hexdigest()
    assert manifest["built_at"].endswith("+00:00") and manifest["build_seconds"] >= 0
    assert manifest["files"] and "meta.json" in manifest["files"]
    assert [entry.name for entry in tmp_path.iterdir() if ".building" in entry.name] == []


def test_rebuild_replaces_the_index(small_catalog: Path, tmp_path: Path) -> None:
    build_index(small_catalog, tmp_path / "idx")
    bigger = tmp_path / "bigger.jsonl"
    write_catalog(generate_catalog(450, seed=2), bigger)
    build_index(bigger, tmp_path / "idx")
    assert ProductIndex.open(tmp_path / "idx").product_count == 450
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["bigger.jsonl", "idx", "small.jsonl"]


def test_a_bad_catalog_keeps_the_previous_index(small_catalog: Path, tmp_path: Path) -> None:
    build_index(small_catalog, tmp_path / "idx")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(small_catalog.read_text().splitlines()[0] + "\n{oops\n")
    with pytest.raises(CatalogError, match=r"broken\.jsonl line 2"):
        build_index(broken, tmp_path / "idx")
    assert ProductIndex.open(tmp_path / "idx").product_count == 300
    assert not [entry for entry in tmp_path.iterdir() if ".building" in entry.name]


def test_build_refuses_to_overwrite_a_folder_that_is_not_an_index(
    small_catalog: Path, tmp_path: Path
) -> None:
    precious = tmp_path / "docs"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(CatalogIndexError, match="folder is not empty and holds no product index"):
        build_index(small_catalog, precious)
    assert (precious / "notes.txt").read_text() == "keep me"


def test_open_missing_index_says_how_to_build_one(tmp_path: Path) -> None:
    with pytest.raises(CatalogIndexError) as caught:
        ProductIndex.open(tmp_path / "absent")
    message = str(caught.value)
    assert str(tmp_path / "absent") in message
    assert "folder does not exist" in message
    assert "python -m assistant.retrieve --catalog" in message


def test_open_folder_without_manifest(tmp_path: Path) -> None:
    with pytest.raises(CatalogIndexError, match=f"no product index here \\(no {MANIFEST_NAME}\\)"):
        ProductIndex.open(tmp_path)


@pytest.mark.parametrize(
    ("damage", "fragment"),
    [
        ("truncate_store", "index files are corrupt or incomplete"),
        ("delete_term", "index files are corrupt or incomplete"),
        ("garbage_meta", "index files are corrupt or incomplete"),
        ("wrong_count", "index holds 300 products but its manifest says 301"),
        ("old_format", "index format 0 is not the supported format 2"),
        ("garbage_manifest", "unreadable index manifest"),
    ],
)
def test_damaged_index_fails_open_with_the_path(
    small_catalog: Path, tmp_path: Path, damage: str, fragment: str
) -> None:
    index_dir = tmp_path / "idx"
    build_index(small_catalog, index_dir)
    manifest_path = index_dir / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    if damage == "truncate_store":
        for path in index_dir.glob("*.store"):
            with path.open("r+b") as handle:
                handle.truncate(50)
    elif damage == "delete_term":
        for path in index_dir.glob("*.term"):
            path.unlink()
    elif damage == "garbage_meta":
        (index_dir / "meta.json").write_text("{garbage")
    elif damage == "wrong_count":
        manifest_path.write_text(json.dumps({**manifest, "products": 301}))
    elif damage == "old_format":
        manifest_path.write_text(json.dumps({**manifest, "format": 0}))
    elif damage == "garbage_manifest":
        manifest_path.write_text("not json")
    with pytest.raises(CatalogIndexError) as caught:
        ProductIndex.open(index_dir)
    assert str(index_dir) in str(caught.value)
    assert fragment in str(caught.value)


def test_cli_builds_and_queries(
    small_catalog: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index_dir = tmp_path / "idx"
    assert (
        main(["--catalog", str(small_catalog), "--index", str(index_dir), "--query", "tent", "--top-k", "2"])
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"indexed 300 products into {index_dir}")
    assert [line[:3] for line in out[1:]] == ["1. ", "2. "]
    assert all("https://shop.example.com/p/" in line for line in out[1:])


def test_cli_reports_a_missing_index_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--index", str(tmp_path / "none"), "--query", "tent"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "Traceback" not in err


def test_cli_needs_something_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--index", str(tmp_path)])
    assert caught.value.code == 2
    assert "give --catalog to build an index, --query to search one, or both" in capsys.readouterr().err


def test_index_survives_being_moved(small_catalog: Path, tmp_path: Path) -> None:
    build_index(small_catalog, tmp_path / "a")
    shutil.move(tmp_path / "a", tmp_path / "b")
    assert ProductIndex.open(tmp_path / "b").search("tent", 1)
