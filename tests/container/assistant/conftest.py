"""A small generated catalog and its index, built once per test session for the assistant's unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.catalog import generate_catalog, write_catalog
from assistant.retrieve import ProductIndex, build_index

CATALOG_SIZE = 2_000
CATALOG_SEED = 11


@pytest.fixture(scope="session")
def catalog_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("catalog") / "catalog.jsonl"
    write_catalog(generate_catalog(CATALOG_SIZE, CATALOG_SEED), path)
    return path


@pytest.fixture(scope="session")
def product_index(catalog_file: Path, tmp_path_factory: pytest.TempPathFactory) -> ProductIndex:
    index_dir = tmp_path_factory.mktemp("index") / "catalog-index"
    build_index(catalog_file, index_dir)
    return ProductIndex.open(index_dir)
