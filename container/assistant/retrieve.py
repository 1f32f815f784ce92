"""The embedded product index: built once from a catalog file, opened read-only by the model.

Build: `python -m assistant.retrieve --catalog catalog.jsonl --index catalog-index`
Try it: `python -m assistant.retrieve --index catalog-index --query "waterproof hiking boots"`
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import tantivy

from assistant.catalog import CatalogError, Product, iter_catalog

# Bump when the schema or analyzer changes: an index built by another version must be rebuilt, not misread.
INDEX_FORMAT = 1
MANIFEST_NAME = "assistant-index.json"
MAX_TOP_K = 100
# Long queries add cost but not relevance; the planner's search queries are far shorter.
MAX_QUERY_TERMS = 32
_ANALYZER_NAME = "product_en"
_TEXT_FIELDS = {"title": 3.0, "brand": 2.0, "category": 2.0, "description": 1.0}
_STORED_FIELD = "product"


class CatalogIndexError(RuntimeError):
    """The product index is missing, corrupt or cannot be built; the message names the path."""


@dataclass(frozen=True)
class BuildStats:
    products: int
    seconds: float
    size_bytes: int
    index_dir: Path


def _analyzer() -> tantivy.TextAnalyzer:
    # The same analyzer tokenizes documents at build time and queries at search time, so that query
    # terms can be built programmatically (no query parser, hence no query-syntax injection).
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    for name in _TEXT_FIELDS:
        # Term frequencies are enough for BM25; positions would only serve phrase queries we never issue.
        builder.add_text_field(name, stored=False, tokenizer_name=_ANALYZER_NAME, index_option="freq")
    builder.add_float_field("price", stored=False, indexed=True, fast=True)
    # The whole product as JSON in one stored field: one read per hit rebuilds the Product.
    builder.add_bytes_field(_STORED_FIELD, stored=True, indexed=False, fast=False)
    return builder.build()


def _directory_size(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file())


def _check_replaceable(index_dir: Path) -> None:
    if not index_dir.exists():
        return
    if not index_dir.is_dir():
        raise CatalogIndexError(f"{index_dir}: exists and is not a folder; refusing to replace it")
    if any(index_dir.iterdir()) and not (index_dir / MANIFEST_NAME).is_file():
        raise CatalogIndexError(
            f"{index_dir}: folder is not empty and holds no product index; refusing to overwrite it"
        )


def _write_documents(staging: Path, catalog_path: Path, writer_heap_bytes: int) -> int:
    index = tantivy.Index(_schema(), path=str(staging))
    index.register_tokenizer(_ANALYZER_NAME, _analyzer())
    writer = index.writer(writer_heap_bytes)
    count = 0
    try:
        for product in iter_catalog(catalog_path):
            writer.add_document(
                tantivy.Document(
                    title=product.title,
                    brand=product.brand,
                    category=product.category,
                    description=product.description,
                    price=float(product.price),
                    product=product.model_dump_json(exclude_none=True).encode(),
                )
            )
            count += 1
        writer.commit()
    except BaseException:
        # Stop the writer's threads before the caller deletes the staging folder, or they would go on
        # writing segment files into it after the delete.
        writer.rollback()
        raise
    finally:
        writer.wait_merging_threads()
    return count


def build_index(
    catalog_path: str | Path, index_dir: str | Path, *, writer_heap_bytes: int = 256_000_000
) -> BuildStats:
    """Indexes every product of a JSON Lines catalog into index_dir, replacing an index already there.

    The index is built in a sibling folder and moved into place at the end, so a failed build (bad catalog
    line, full disk) leaves any previous index untouched.
    """
    catalog_path, index_dir = Path(catalog_path), Path(index_dir)
    _check_replaceable(index_dir)
    started = time.perf_counter()
    staging = index_dir.with_name(f"{index_dir.name}.building-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        count = _write_documents(staging, catalog_path, writer_heap_bytes)
        manifest = {"format": INDEX_FORMAT, "products": count, "catalog": catalog_path.name}
        (staging / MANIFEST_NAME).write_text(json.dumps(manifest) + "\n", encoding="utf-8")
        size = _directory_size(staging)
        if index_dir.exists():
            retired = index_dir.with_name(f"{index_dir.name}.old-{os.getpid()}")
            index_dir.rename(retired)
            staging.rename(index_dir)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            staging.rename(index_dir)
    except CatalogError:
        raise
    except (OSError, ValueError) as exc:
        raise CatalogIndexError(f"{index_dir}: building the index failed ({exc})") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    elapsed = time.perf_counter() - started
    return BuildStats(products=count, seconds=elapsed, size_bytes=size, index_dir=index_dir)


def _read_manifest(index_dir: Path) -> dict[str, object]:
    rebuild = f"build it with: python -m assistant.retrieve --catalog CATALOG.jsonl --index {index_dir}"
    if not index_dir.is_dir():
        raise CatalogIndexError(f"{index_dir}: no product index here (folder does not exist); {rebuild}")
    manifest_path = index_dir / MANIFEST_NAME
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogIndexError(
            f"{index_dir}: no product index here (no {MANIFEST_NAME}); {rebuild}"
        ) from None
    except (OSError, ValueError) as exc:
        raise CatalogIndexError(f"{manifest_path}: unreadable index manifest ({exc}); {rebuild}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != INDEX_FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise CatalogIndexError(
            f"{index_dir}: index format {found!r} is not the supported format {INDEX_FORMAT}; {rebuild}"
        )
    return manifest


class ProductIndex:
    """A read-only product index. One instance serves any number of threads: tantivy searchers are
    immutable snapshots, and nothing here mutates after open()."""

    def __init__(self, index_dir: Path, index: tantivy.Index, searcher: tantivy.Searcher, products: int):
        self.path = index_dir
        self.product_count = products
        self._index = index
        self._schema = index.schema
        self._searcher = searcher
        self._analyzer = _analyzer()

    @classmethod
    def open(cls, index_dir: str | Path) -> ProductIndex:
        """Opens an index built by build_index; CatalogIndexError if it is missing, corrupt or outdated."""
        index_dir = Path(index_dir)
        manifest = _read_manifest(index_dir)
        try:
            index = tantivy.Index.open(str(index_dir))
            index.register_tokenizer(_ANALYZER_NAME, _analyzer())
            searcher = index.searcher()
            documents = searcher.num_docs
            # Read one stored document now, so a damaged store fails model load rather than a request.
            hits = searcher.search(tantivy.Query.all_query(), limit=1, count=False).hits
            for _score, address in hits:
                Product.model_validate_json(searcher.doc(address).get_first(_STORED_FIELD))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # tantivy raises ValueError/OSError, or a pyo3 PanicException (a
            # BaseException) on damaged files: all of them mean the index cannot be served.
            raise CatalogIndexError(f"{index_dir}: index files are corrupt or incomplete ({exc})") from None
        if documents != manifest.get("products"):
            raise CatalogIndexError(
                f"{index_dir}: index holds {documents} products but its manifest says "
                f"{manifest.get('products')}; the build did not finish, rebuild it"
            )
        return cls(index_dir, index, searcher, documents)

    def query_terms(self, text: str) -> list[str]:
        """The analyzed, de-duplicated terms a search for `text` looks up (stopwords removed, stemmed)."""
        terms = list(dict.fromkeys(self._analyzer.analyze(text)))
        return terms[:MAX_QUERY_TERMS]

    def search(self, query: str, top_k: int = 5, *, max_price: float | None = None) -> list[Product]:
        """Best-matching products for free text, best first. Any text is safe: it is tokenized here and
        never parsed as query syntax. No terms (empty or stopwords only) or top_k <= 0 returns []."""
        limit = min(top_k, MAX_TOP_K)
        if limit <= 0:
            return []
        terms = self.query_terms(query)
        if not terms:
            return []
        should = [
            (
                tantivy.Occur.Should,
                tantivy.Query.boost_query(tantivy.Query.term_query(self._schema, field, term), boost),
            )
            for term in terms
            for field, boost in _TEXT_FIELDS.items()
        ]
        text_query = tantivy.Query.boolean_query(should)
        if max_price is not None:
            price_filter = tantivy.Query.range_query(
                self._schema, "price", tantivy.FieldType.Float, 0.0, float(max_price)
            )
            text_query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, text_query), (tantivy.Occur.Must, price_filter)]
            )
        hits = self._searcher.search(text_query, limit=limit, count=False).hits
        return [
            Product.model_validate_json(self._searcher.doc(address).get_first(_STORED_FIELD))
            for _score, address in hits
        ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m assistant.retrieve", description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, help="JSON Lines catalog to index (omit to only query)")
    parser.add_argument("--index", type=Path, required=True, help="index folder to build or open")
    parser.add_argument("--query", help="search the index and print the top products")
    parser.add_argument("--top-k", type=int, default=5, help="products to print for --query")
    args = parser.parse_args(argv)
    if args.catalog is None and args.query is None:
        parser.error("give --catalog to build an index, --query to search one, or both")
    try:
        if args.catalog is not None:
            stats = build_index(args.catalog, args.index)
            print(
                f"indexed {stats.products} products into {stats.index_dir} in {stats.seconds:.1f} s "
                f"({stats.size_bytes / 1e6:.1f} MB)"
            )
        if args.query is not None:
            index = ProductIndex.open(args.index)
            for rank, product in enumerate(index.search(args.query, args.top_k), start=1):
                print(f"{rank}. {product.title}  ${product.price:.2f}  {product.url}")
    except (CatalogError, CatalogIndexError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
