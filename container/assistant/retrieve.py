"""The embedded product index: built once from a catalog file, opened read-only by the model.

Build: `make index CATALOG=products.jsonl` (or .csv), i.e.
`python -m assistant.retrieve --catalog products.jsonl --index catalog-index [--upload s3://bucket/prefix]`
Try it: `python -m assistant.retrieve --index catalog-index --query "waterproof hiking boots"`
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import tantivy

from assistant.catalog import CatalogError, LinesRead, Product, RowError, iter_catalog_rows

# Bump when the schema or analyzer changes: an index built by another version must be rebuilt, not misread.
INDEX_FORMAT = 2
MANIFEST_NAME = "assistant-index.json"
# Bad rows are skipped and counted; past this share of the rows (or this many) the build stops, because a
# catalog that bad is the wrong file or a broken export rather than a few bad products.
DEFAULT_MAX_BAD_FRACTION = 0.01
DEFAULT_MAX_BAD_ROWS = 10_000
# How a user raises the limits: the make variables and the command's flags (named in the error).
_RAISE_BAD_ROWS = "make index MAX_BAD_ROWS=N (--max-bad-rows)"
_RAISE_BAD_FRACTION = "make index MAX_BAD_FRACTION=F, a share from 0 to 1 (--max-bad-fraction)"
SHOWN_ROW_ERRORS = 10
# Fields whose words make the shop's vocabulary: the planner asks the index whether a word is one of them.
VOCABULARY_FIELDS = ("title", "brand", "category")
# "cheapest": rank this many of the most relevant products by price.
PRICE_SORT_POOL = 50
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
    skipped: int = 0
    row_errors: list[str] = field(default_factory=list)
    manifest: dict[str, object] = field(default_factory=dict)


Progress = Callable[[int, int], None]  # (rows read, rows expected)


def scan_catalog(path: Path) -> tuple[str, int]:
    """(sha256, line count) of the catalog file, in one pass of 1 MiB reads; a last line without a newline
    counts."""
    digest = hashlib.sha256()
    lines = 0
    last = b"\n"
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError as exc:
        raise CatalogError(f"{path}: cannot open catalog ({exc.strerror or exc})") from exc
    return digest.hexdigest(), lines + (last != b"\n")


def file_digests(folder: Path) -> dict[str, dict[str, object]]:
    """Size and sha256 of every file in the index folder (the manifest excluded), for the host's check."""
    files = {}
    for path in sorted(folder.rglob("*")):
        # Lock files are tantivy's run-time state, not index content.
        if path.is_file() and path.name != MANIFEST_NAME and not path.name.endswith(".lock"):
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
            files[path.relative_to(folder).as_posix()] = {
                "bytes": path.stat().st_size,
                "sha256": digest.hexdigest(),
            }
    return files


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


@dataclass
class _Tally:
    products: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    lines: LinesRead = field(default_factory=LinesRead)


def _write_documents(
    staging: Path,
    catalog_path: Path,
    writer_heap_bytes: int,
    tally: _Tally,
    *,
    max_bad_rows: int,
    expected_rows: int,
    progress: Progress | None,
) -> None:
    index = tantivy.Index(_schema(), path=str(staging))
    index.register_tokenizer(_ANALYZER_NAME, _analyzer())
    writer = index.writer(writer_heap_bytes)
    Document = tantivy.Document
    try:
        for row in iter_catalog_rows(catalog_path, lines=tally.lines):
            if isinstance(row, RowError):
                tally.skipped += 1
                if len(tally.errors) < SHOWN_ROW_ERRORS:
                    tally.errors.append(row.message)
                if tally.skipped > max_bad_rows:
                    raise CatalogError(
                        f"{catalog_path}: more than {max_bad_rows} bad rows; stopped (raise the limit with "
                        f"{_RAISE_BAD_ROWS}). First errors:\n  " + "\n  ".join(tally.errors)
                    )
                continue
            document = Document(
                title=row.title,
                brand=row.brand,
                category=row.category,
                description=row.description,
                product=row.model_dump_json(exclude_none=True).encode(),
            )
            if row.price is not None:
                document.add_float("price", float(row.price))
            writer.add_document(document)
            tally.products += 1
            if progress is not None and tally.products % 20_000 == 0:
                progress(tally.products + tally.skipped, expected_rows)
        writer.commit()
    except BaseException:
        # Stop the writer's threads before the caller deletes the staging folder, or they would go on
        # writing segment files into it after the delete.
        writer.rollback()
        raise
    finally:
        writer.wait_merging_threads()


def build_index(
    catalog_path: str | Path,
    index_dir: str | Path,
    *,
    writer_heap_bytes: int = 256_000_000,
    max_bad_fraction: float = DEFAULT_MAX_BAD_FRACTION,
    max_bad_rows: int = DEFAULT_MAX_BAD_ROWS,
    progress: Progress | None = None,
) -> BuildStats:
    """Indexes every usable product of a JSON Lines or CSV catalog into index_dir, replacing an index there.

    Bad rows are skipped and counted (the first few messages are kept); more than max_bad_rows, or a share
    above max_bad_fraction, stops the build with CatalogError. The index is built in a sibling folder and
    moved into place at the end, so a failed build leaves any previous index untouched. The manifest, written
    last, records the row counts, the catalog's checksum, the build time, the format and every file's digest.
    """
    catalog_path, index_dir = Path(catalog_path), Path(index_dir)
    _check_replaceable(index_dir)
    started = time.perf_counter()
    checksum, expected_rows = scan_catalog(catalog_path)
    staging = index_dir.with_name(f"{index_dir.name}.building-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    tally = _Tally()
    try:
        _write_documents(
            staging,
            catalog_path,
            writer_heap_bytes,
            tally,
            max_bad_rows=max_bad_rows,
            expected_rows=expected_rows,
            progress=progress,
        )
        if tally.lines.count != expected_rows:
            # The reader consumed fewer (or more) lines than the file has: rows went missing unseen.
            raise CatalogError(
                f"{catalog_path}: read {tally.lines.count} of the file's {expected_rows} lines; "
                "refusing an index that may lack products"
            )
        rows = tally.products + tally.skipped
        if tally.products == 0:
            detail = ("; first errors:\n  " + "\n  ".join(tally.errors)) if tally.errors else ""
            raise CatalogError(f"{catalog_path}: no usable products ({rows} rows){detail}")
        if tally.skipped > max_bad_fraction * rows:
            raise CatalogError(
                f"{catalog_path}: {tally.skipped} of {rows} rows are bad, "
                f"above the {max_bad_fraction:.1%} allowed (raise it with {_RAISE_BAD_FRACTION}); "
                "first errors:\n  " + "\n  ".join(tally.errors)
            )
        manifest = {
            "format": INDEX_FORMAT,
            "products": tally.products,
            "skipped_rows": tally.skipped,
            "catalog": catalog_path.name,
            "catalog_sha256": checksum,
            "built_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "build_seconds": round(time.perf_counter() - started, 2),
            "files": file_digests(staging),
        }
        (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
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
    if progress is not None:
        progress(tally.products + tally.skipped, tally.products + tally.skipped)
    elapsed = time.perf_counter() - started
    return BuildStats(
        products=tally.products,
        seconds=elapsed,
        size_bytes=size,
        index_dir=index_dir,
        skipped=tally.skipped,
        row_errors=tally.errors,
        manifest=manifest,
    )


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
        product_index = cls(index_dir, index, searcher, documents)
        product_index.manifest = manifest
        return product_index

    def describe(self) -> str:
        manifest = getattr(self, "manifest", {})
        return (
            f"catalog index {self.path.name}: {self.product_count:,} products from "
            f"{manifest.get('catalog', '?')} (sha256 {str(manifest.get('catalog_sha256', '?'))[:12]}, "
            f"built {manifest.get('built_at', '?')})"
        )

    @functools.lru_cache(maxsize=65_536)  # noqa: B019 - one index per process, kept for its lifetime
    def in_catalog(self, word: str) -> bool:
        """Whether a word (as the analyzer reads it) is in any title, brand or category of the catalog."""
        terms = self._analyzer.analyze(word)
        return any(
            self._searcher.doc_freq(field_name, term) > 0
            for term in terms
            for field_name in VOCABULARY_FIELDS
        )

    def query_terms(self, text: str) -> list[str]:
        """The analyzed, de-duplicated terms a search for `text` looks up (stopwords removed, stemmed)."""
        terms = list(dict.fromkeys(self._analyzer.analyze(text)))
        return terms[:MAX_QUERY_TERMS]

    def search(
        self, query: str, top_k: int = 5, *, max_price: float | None = None, sort_by_price: bool = False
    ) -> list[Product]:
        """Best-matching products for free text, best first (or, with sort_by_price, the cheapest of the
        most relevant). Any text is safe: it is tokenized here and never parsed as query syntax. No terms
        (empty or stopwords only) or top_k <= 0 returns []."""
        limit = min(top_k, MAX_TOP_K)
        if sort_by_price and limit > 0:
            pool = self.search(query, max(PRICE_SORT_POOL, limit), max_price=max_price)
            priced = sorted((p for p in pool if p.price is not None), key=lambda product: product.price)
            return (priced + [p for p in pool if p.price is None])[:limit]
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


def verify_files(index_dir: Path) -> dict[str, object]:
    """Check every file the manifest lists, by size and sha256 (a host does this after downloading an index);
    CatalogIndexError naming the first file that is missing or differs."""
    manifest = _read_manifest(index_dir)
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise CatalogIndexError(f"{index_dir}: the manifest lists no files; rebuild the index")
    actual = file_digests(index_dir)
    for name, expected in files.items():
        if name not in actual:
            raise CatalogIndexError(f"{index_dir}: {name} is missing (the download is incomplete)")
        if actual[name] != expected:
            raise CatalogIndexError(
                f"{index_dir}: {name} does not match the manifest (size or sha256 differs)"
            )
    return manifest


def _progress_bar():
    """A rich progress bar over catalog rows, and the callback that moves it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn("indexing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True
    )
    task = bar.add_task("rows", total=None)
    return bar, lambda done, total: bar.update(task, completed=done, total=max(total, done))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m assistant.retrieve", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--catalog", type=Path, help="JSON Lines or CSV catalog to index (omit to only query)"
    )
    parser.add_argument("--index", type=Path, required=True, help="index folder to build or open")
    parser.add_argument(
        "--upload",
        help="s3://bucket/prefix to upload the built index to: a new builds/<id>/ prefix, then the pointer",
    )
    parser.add_argument(
        "--max-bad-fraction",
        type=float,
        default=DEFAULT_MAX_BAD_FRACTION,
        help=f"share of bad rows that stops the build (default {DEFAULT_MAX_BAD_FRACTION}; "
        "make index MAX_BAD_FRACTION=)",
    )
    parser.add_argument(
        "--max-bad-rows",
        type=int,
        default=DEFAULT_MAX_BAD_ROWS,
        help=f"bad rows that stop the build (default {DEFAULT_MAX_BAD_ROWS}; make index MAX_BAD_ROWS=)",
    )
    parser.add_argument("--query", help="search the index and print the top products")
    parser.add_argument("--top-k", type=int, default=5, help="products to print for --query")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")
    args = parser.parse_args(argv)
    if args.catalog is None and args.query is None:
        parser.error("give --catalog to build an index, --query to search one, or both")
    if args.upload is not None and args.catalog is None:
        parser.error("--upload needs --catalog (it uploads the index it builds)")
    if not 0 <= args.max_bad_fraction <= 1 or args.max_bad_rows < 0:
        parser.error(
            "--max-bad-fraction (make index MAX_BAD_FRACTION=) must be between 0 and 1 and "
            "--max-bad-rows (MAX_BAD_ROWS=) 0 or more"
        )
    try:
        if args.catalog is not None:
            if not args.catalog.is_file():
                raise CatalogError(f"{args.catalog}: catalog file not found")
            bar, progress = (None, None) if args.no_progress or not sys.stderr.isatty() else _progress_bar()
            if bar is not None:
                bar.start()
            try:
                stats = build_index(
                    args.catalog,
                    args.index,
                    max_bad_fraction=args.max_bad_fraction,
                    max_bad_rows=args.max_bad_rows,
                    progress=progress,
                )
            finally:
                if bar is not None:
                    bar.stop()
            print(
                f"indexed {stats.products:,} products into {stats.index_dir} in {stats.seconds:.1f} s "
                f"({stats.size_bytes / 1e6:.1f} MB); skipped {stats.skipped:,} bad rows"
            )
            for message in stats.row_errors:
                print(f"  skipped: {message}")
            if args.upload is not None:
                import boto3

                from entrypoint.s3_fetch import POINTER_NAME, S3Location, upload_build

                location = S3Location.parse(args.upload, variable="--upload")
                build = upload_build(boto3.client("s3"), stats.index_dir, location, manifest=MANIFEST_NAME)
                print(
                    f"uploaded the index to {build}, then pointed {location}/{POINTER_NAME} at it; "
                    f"set model.catalog_index_s3_uri to {location}"
                )
        if args.query is not None:
            index = ProductIndex.open(args.index)
            for rank, product in enumerate(index.search(args.query, args.top_k), start=1):
                price = "" if product.price is None else f"  {product.price:.2f} {product.currency}"
                print(f"{rank}. {product.title}{price}  {product.url or ''}")
    except (CatalogError, CatalogIndexError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # S3 refused the upload: say so in one line
        if type(exc).__module__.startswith(("botocore", "boto3", "entrypoint")):
            print(f"error: upload failed: {exc}", file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
