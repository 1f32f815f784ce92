from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest
from pydantic import ValidationError

from assistant.catalog import (
    CatalogError,
    Product,
    category_names,
    generate_catalog,
    generate_queries,
    iter_catalog,
    main,
    read_catalog,
    write_catalog,
)
from assistant.plan import Intent, plan_query

GOOD = {
    "id": "A1",
    "title": "Trail Boot",
    "description": "A boot.",
    "category": "Hiking Boots",
    "brand": "Northpeak",
    "price": 99.5,
    "url": "https://shop.example.com/p/A1",
    "image_url": "https://images.shop.example.com/A1.jpg",
}


def _line(**changes: object) -> str:
    record = {**GOOD, **changes}
    return json.dumps({key: value for key, value in record.items() if value is not ...})


def test_generator_is_deterministic_per_seed() -> None:
    first = list(generate_catalog(50, seed=3))
    assert first == list(generate_catalog(50, seed=3))
    assert first != list(generate_catalog(50, seed=4))


def test_generated_products_pass_full_validation_and_have_unique_ids() -> None:
    products = list(generate_catalog(2_000, seed=1))
    for product in products:
        assert Product.model_validate(product.model_dump()) == product
    assert len({product.id for product in products}) == len(products)


def test_generator_covers_the_shopping_vocabulary() -> None:
    products = list(generate_catalog(2_000, seed=1))
    assert {product.category for product in products} == set(category_names())
    assert len({product.brand for product in products}) >= 15
    titles = " ".join(product.title.lower() for product in products)
    for word in ("hiking boots", "tent", "headphones", "laptop", "espresso machine"):
        assert word in titles


def test_generated_titles_never_repeat_a_word_back_to_back() -> None:
    for product in generate_catalog(2_000, seed=5):
        words = product.title.lower().split()
        assert all(a != b for a, b in pairwise(words)), product.title


def test_generated_prices_stay_in_each_category_range() -> None:
    prices = [product.price for product in generate_catalog(2_000, seed=2)]
    assert min(prices) >= 10
    assert max(prices) <= 5_001
    assert all(round(price % 1, 2) == 0.99 for price in prices)


def test_negative_count_is_refused() -> None:
    with pytest.raises(ValueError, match="count: must be 0 or more, got -1"):
        list(generate_catalog(-1))


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    products = list(generate_catalog(100, seed=9))
    path = tmp_path / "c.jsonl"
    assert write_catalog(products, path) == 100
    assert read_catalog(path) == products


def test_card_holds_what_a_front_end_renders() -> None:
    card = Product.model_validate(GOOD).card()
    assert card == {
        "id": "A1",
        "title": "Trail Boot",
        "price": 99.5,
        "currency": "USD",
        "rating": None,
        "review_count": None,
        "url": "https://shop.example.com/p/A1",
        "image_url": "https://images.shop.example.com/A1.jpg",
    }
    assert json.loads(json.dumps(card)) == card


def test_product_is_immutable() -> None:
    product = Product.model_validate(GOOD)
    with pytest.raises(ValidationError):
        product.price = 1.0  # type: ignore[misc]


def test_unknown_keys_are_ignored_and_image_is_optional(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(_line(colour="red", image_url=...) + "\n", encoding="utf-8")
    (product,) = read_catalog(path)
    assert product.image_url is None
    assert product.card()["image_url"] is None


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("\n" + _line() + "\n\n   \n" + _line(id="A2") + "\n", encoding="utf-8")
    assert [product.id for product in read_catalog(path)] == ["A1", "A2"]


@pytest.mark.parametrize(
    ("second_line", "fragment"),
    [
        ("{not json", "line 2: invalid JSON"),
        ("[1, 2]", "line 2: input should be an object"),
        (_line(id="B", title=...), "line 2: title: is required"),
        (_line(id="B", title=""), "line 2: title: must not be empty"),
        (_line(id="B", price=-5), "line 2: price: input should be greater than or equal to 0"),
        (_line(id="B", price="cheap"), "line 2: price: must be a number, got 'cheap'"),
        (_line(id="B", url="shop.example.com/x"), "line 2: url: string should match pattern"),
        (_line(), "line 2: id: 'A1' repeats the id on line 1"),
    ],
)
def test_bad_lines_are_reported_with_file_and_line(tmp_path: Path, second_line: str, fragment: str) -> None:
    path = tmp_path / "shop.jsonl"
    path.write_text(_line() + "\n" + second_line + "\n", encoding="utf-8")
    with pytest.raises(CatalogError) as caught:
        read_catalog(path)
    message = str(caught.value)
    assert message.startswith(f"{path} line 2: ")
    assert fragment.lower() in message.lower()


def test_reading_is_lazy_so_good_lines_before_a_bad_one_arrive(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(_line() + "\n{broken\n", encoding="utf-8")
    products = iter_catalog(path)
    assert next(products).id == "A1"
    with pytest.raises(CatalogError, match="line 2"):
        next(products)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"nope\.jsonl: cannot open catalog"):
        read_catalog(tmp_path / "nope.jsonl")


def test_non_utf8_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(_line().encode() + b"\n" + b'{"id": "\xff"}\n')
    with pytest.raises(CatalogError, match="line 2: not valid UTF-8"):
        read_catalog(path)


def test_cli_writes_the_requested_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo.jsonl"
    assert main(["--count", "25", "--seed", "4", "--out", str(out)]) == 0
    assert read_catalog(out) == list(generate_catalog(25, seed=4))
    assert "wrote 25 products" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["--count", "0", "--out", "x.jsonl"], "--count: must be at least 1, got 0"),
        (["--count", "5", "--out", "missing-folder/x.jsonl"], "--out: folder missing-folder does not exist"),
        (["--count", "many", "--out", "x.jsonl"], "invalid int value"),
    ],
)
def test_cli_rejects_bad_arguments_without_a_traceback(
    arguments: list[str],
    fragment: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as caught:
        main(arguments)
    assert caught.value.code == 2
    assert fragment in capsys.readouterr().err


def test_generated_queries_are_deterministic_shopping_questions() -> None:
    queries = generate_queries(500, seed=6)
    assert queries == generate_queries(500, seed=6)
    assert len(set(queries)) > 300
    plans = [plan_query(query) for query in queries]
    assert all(plan.retrieve for plan in plans)
    assert {plan.intent for plan in plans} == {
        Intent.PRODUCT_SEARCH,
        Intent.COMPARISON,
        Intent.GENERAL_QUESTION,
    }
    assert any(plan.max_price is not None for plan in plans)
