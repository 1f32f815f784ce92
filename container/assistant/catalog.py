"""The product catalog: the Product record, a JSON Lines reader with clear errors, and a synthetic generator.

Run `python -m assistant.catalog --count 2000 --seed 7 --out catalog.jsonl` to write a demo catalog.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assistant.validation import first_error

_URL_PATTERN = r"^https?://\S+$"


class CatalogError(ValueError):
    """A catalog file that cannot be read; the message names the file and line."""


class Product(BaseModel):
    """One catalog entry; only id and title are required. Unknown keys in a catalog row are ignored so
    richer feeds load unchanged."""

    model_config = ConfigDict(frozen=True, extra="ignore", str_strip_whitespace=True)

    id: str = Field(min_length=1, max_length=128)
    title: str = Field(min_length=1, max_length=500)
    brand: str = Field(default="", max_length=200)
    category: str = Field(default="", max_length=200)
    price: float | None = Field(default=None, ge=0, le=100_000_000, allow_inf_nan=False)
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    rating: float | None = Field(default=None, ge=0, le=5, allow_inf_nan=False)
    review_count: int | None = Field(default=None, ge=0)
    description: str = Field(default="", max_length=20_000)
    url: str | None = Field(default=None, pattern=_URL_PATTERN, max_length=2_000)
    image_url: str | None = Field(default=None, pattern=_URL_PATTERN, max_length=2_000)

    def card(self) -> dict[str, object]:
        """What a front end needs to render the product beside the answer."""
        return {
            "id": self.id,
            "title": self.title,
            "price": self.price,
            "currency": self.currency,
            "rating": self.rating,
            "review_count": self.review_count,
            "url": self.url,
            "image_url": self.image_url,
        }


@dataclass(frozen=True)
class RowError:
    """A catalog row that cannot be used; the index build skips and counts it."""

    line: int
    message: str


# CSV headers are matched loosely: "Review Count", "review-count" and "review_count" name the same field.
_HEADER_CLEAN = re.compile(r"[^a-z0-9]+")
FIELDS = tuple(Product.model_fields)
REQUIRED_FIELDS = ("id", "title")


def _field_name(header: str) -> str:
    return _HEADER_CLEAN.sub("_", header.strip().lower()).strip("_")


def catalog_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in {".jsonl", ".ndjson", ".json"}:
        return "jsonl"
    raise CatalogError(f"{path}: unknown catalog format {suffix or '(no suffix)'!r}; use .jsonl or .csv")


def _validated(path: Path, line_number: int, parse) -> Product | RowError:
    try:
        return parse()
    except ValidationError as exc:
        field, message = first_error(exc)
        where = f"{field}: " if field else ""
        return RowError(line_number, f"{path} line {line_number}: {where}{message}")


@dataclass
class LinesRead:
    """How many lines of the file a reader consumed: the index build checks it against its own count of
    the file's lines, so no reader can lose rows without the build failing."""

    count: int = 0


def _jsonl_rows(path: Path, handle, lines: LinesRead) -> Iterator[tuple[int, Product | RowError]]:
    # Binary lines, decoded one by one: a text-mode reader decodes ahead in chunks and would blame the
    # wrong line for a bad byte.
    for line_number, raw_line in enumerate(handle, start=1):
        lines.count = line_number
        try:
            # A byte-order mark (as Windows tools write) would make the first row invalid JSON.
            line = raw_line.decode("utf-8-sig" if line_number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            yield (
                line_number,
                RowError(line_number, f"{path} line {line_number}: not valid UTF-8 at byte {exc.start}"),
            )
            continue
        if line.strip():
            yield (
                line_number,
                _validated(path, line_number, lambda line=line: Product.model_validate_json(line)),
            )


# Undecodable bytes survive line decoding as lone surrogates (surrogateescape), so a bad byte marks its own
# row only; U+DC80..U+DCFF never come out of valid UTF-8.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def _decoded_lines(handle, lines: LinesRead) -> Iterator[tuple[int, str]]:
    """The file's lines as text, each decoded on its own, with their line numbers. A text-mode reader decodes
    8 KB chunks: one bad byte there fails the whole chunk, and with it every row the chunk holds."""
    for line_number, raw_line in enumerate(handle, start=1):
        lines.count = line_number
        yield (
            line_number,
            raw_line.decode("utf-8-sig" if line_number == 1 else "utf-8", errors="surrogateescape"),
        )


def _bad_byte(cells: list[str], names: list[str]) -> str | None:
    for position, cell in enumerate(cells):
        escaped = _ESCAPED_BYTE.search(cell)
        if escaped is not None:
            column = names[position] if position < len(names) else f"cell {position + 1}"
            byte = ord(escaped.group()) - 0xDC00
            return f"not valid UTF-8 (byte 0x{byte:02X} in column {column!r})"
    return None


# A quoted cell may hold line breaks (a description over several lines), so a record may span lines; one
# that is still open after this many is a stray quote, not a description.
MAX_LINES_PER_RECORD = 100


def _parse_record(text: str) -> list[str]:
    """The cells of one CSV record; csv.Error unless the text is exactly one well-formed record."""
    import csv

    # Split at line feeds only, as the file was read: csv would end a record at any other break too.
    records = list(csv.reader(re.split("(?<=\n)(?=.)", text, flags=re.S), strict=True))
    if len(records) != 1:
        raise csv.Error(f"{len(records)} records where one was expected")
    return records[0]


def _csv_records(
    numbered_lines: Iterator[tuple[int, str]], width: int
) -> Iterator[tuple[int, list[str] | str]]:
    """(line number, cells) per record, or (line number, why it is unreadable).

    RFC 4180 doubles a quote inside a quoted cell, so a record holds an even number of quotes: a line that
    does not parse alone and has an odd count opens a cell that continues on the next lines. A stray quote
    would make such a cell swallow every row up to the next quote (a csv.reader lost 40% of a catalog to
    three): here a record that does not close within MAX_LINES_PER_RECORD lines, does not parse strictly or
    has the wrong number of cells is one bad row at its first line, and reading resumes on the line after it,
    so a stray quote costs its own row only.
    """
    import csv
    from collections import deque

    pending: deque[tuple[int, str]] = deque()
    source = iter(numbered_lines)

    def fill(count: int) -> bool:
        """At least count lines pending, if the file has them."""
        while len(pending) < count:
            line = next(source, None)
            if line is None:
                return False
            pending.append(line)
        return True

    while fill(1):
        first_number, first_line = pending[0]
        try:
            cells = _parse_record(first_line)
            error = None
        except csv.Error as exc:
            cells, error = [], f"unreadable row ({exc})"
        if (error is None and len(cells) == width) or first_line.count('"') % 2 == 0:
            pending.popleft()
            yield first_number, cells if error is None else error
            continue
        quotes, used = first_line.count('"'), 1
        while quotes % 2 and used < MAX_LINES_PER_RECORD and fill(used + 1):
            quotes += pending[used][1].count('"')
            used += 1
        if quotes % 2:
            pending.popleft()
            yield first_number, "a quoted cell is not closed (a stray quote?)"
            continue
        try:
            cells = _parse_record("".join(line for _, line in list(pending)[:used]))
        except csv.Error as exc:
            pending.popleft()
            yield first_number, f"unreadable row ({exc})"
            continue
        if len(cells) != width:
            # Lines joined by a quote that was not meant to open a cell: only the first line is bad.
            pending.popleft()
            yield first_number, f"a quote joins {used} lines into {len(cells)} cells, the header has {width}"
            continue
        for _ in range(used):
            pending.popleft()
        yield first_number, cells


def _csv_rows(path: Path, handle, lines: LinesRead) -> Iterator[tuple[int, Product | RowError]]:
    import csv

    numbered = _decoded_lines(handle, lines)
    header_line = next(numbered, None)
    if header_line is None:
        return
    try:
        header = _parse_record(header_line[1])
    except csv.Error as exc:
        raise CatalogError(f"{path} line 1: unreadable header ({exc})") from None
    names = [_field_name(column) for column in header]
    if _bad_byte(header, names) is not None:
        raise CatalogError(f"{path} line 1: header is not valid UTF-8")
    missing = [name for name in REQUIRED_FIELDS if name not in names]
    if missing:
        raise CatalogError(
            f"{path} line 1: header has no {' or '.join(missing)} column; columns are {', '.join(header)}"
        )
    wanted = [(position, name) for position, name in enumerate(names) if name in FIELDS]
    for line_number, cells in _csv_records(numbered, len(names)):
        if isinstance(cells, str):
            yield line_number, RowError(line_number, f"{path} line {line_number}: {cells}")
            continue
        if not any(cell.strip() for cell in cells):
            continue
        bad_byte = _bad_byte(cells, names)
        if bad_byte is not None:
            yield line_number, RowError(line_number, f"{path} line {line_number}: {bad_byte}")
            continue
        if len(cells) != len(names):
            message = f"{path} line {line_number}: {len(cells)} cells, the header has {len(names)}"
            yield line_number, RowError(line_number, message)
            continue
        # An empty cell is an absent value, so optional fields may be left blank.
        record = {name: cells[position] for position, name in wanted if cells[position].strip()}
        yield line_number, _validated(path, line_number, lambda record=record: Product.model_validate(record))


def iter_catalog_rows(path: str | Path, *, lines: LinesRead | None = None) -> Iterator[Product | RowError]:
    """Every row of a JSON Lines or CSV catalog as a Product, or a RowError naming the file and line
    (bad JSON or CSV, bad UTF-8, a bad field, an id seen before). An unreadable file raises CatalogError.
    `lines`, if given, counts the file's lines consumed so far."""
    path = Path(path)
    kind = catalog_format(path)
    lines = lines if lines is not None else LinesRead()
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise CatalogError(f"{path}: cannot open catalog ({exc.strerror or exc})") from exc
    first_line_of_id: dict[str, int] = {}
    with handle:
        rows = _csv_rows(path, handle, lines) if kind == "csv" else _jsonl_rows(path, handle, lines)
        for line_number, row in rows:
            if isinstance(row, Product):
                seen_on = first_line_of_id.setdefault(row.id, line_number)
                if seen_on != line_number:
                    message = f"{path} line {line_number}: id: {row.id!r} repeats the id on line {seen_on}"
                    yield RowError(line_number, message)
                    continue
            yield row


def iter_catalog(path: str | Path) -> Iterator[Product]:
    """Products of a catalog file, read lazily so a million rows fit in memory; CatalogError at the first
    bad row (the index build skips and counts bad rows instead)."""
    for row in iter_catalog_rows(path):
        if isinstance(row, RowError):
            raise CatalogError(row.message)
        yield row


def read_catalog(path: str | Path) -> list[Product]:
    """All products of a JSON Lines catalog file (see iter_catalog for the errors)."""
    return list(iter_catalog(path))


def write_catalog(products: Iterable[Product], path: str | Path) -> int:
    """Writes products as JSON Lines and returns how many were written."""
    count = 0
    with Path(path).open("w", encoding="utf-8") as handle:
        for product in products:
            handle.write(product.model_dump_json(exclude_none=True))
            handle.write("\n")
            count += 1
    return count


# ---- synthetic catalog ------------------------------------------------------------------------------
# Brands are invented so demo output never looks like an endorsement of a real company.


@dataclass(frozen=True)
class _Category:
    name: str
    nouns: tuple[str, ...]
    price_range: tuple[int, int]
    adjectives: tuple[str, ...]
    materials: tuple[str, ...]
    features: tuple[str, ...]
    uses: tuple[str, ...]
    brands: tuple[str, ...]


_OUTDOOR = ("Northpeak", "Trailcraft", "Alder Ridge", "Granite Fox", "Summit & Pine", "Bluewater")
_ELECTRONICS = ("Voltana", "Lumora", "Sonique", "Corebyte", "Auralis", "Pixelon")
_HOME = ("Hearthwell", "Brewline", "Kitchara", "Oakhaven", "Nordlys")
_SPORT = ("Stridex", "Pacefield", "Flexa", "Kinetik", "Tempo Lab")

_CATEGORIES: tuple[_Category, ...] = (
    _Category(
        "Hiking Boots",
        ("hiking boots", "trail boots", "backpacking boots"),
        (60, 320),
        ("waterproof", "lightweight", "insulated", "breathable", "rugged"),
        ("full-grain leather", "suede", "nylon mesh", "Gore-Tex lining"),
        ("a Vibram outsole", "a cushioned midsole", "ankle support", "a rock plate", "speed lacing"),
        ("day hikes", "multi-day treks", "muddy trails", "winter hiking"),
        _OUTDOOR,
    ),
    _Category(
        "Tents",
        ("tent", "backpacking tent", "camping tent", "dome tent"),
        (80, 650),
        ("2-person", "4-person", "ultralight", "freestanding", "four-season"),
        ("ripstop nylon", "polyester", "silnylon", "aluminum poles"),
        ("a full rainfly", "two vestibules", "a bathtub floor", "mesh ventilation", "color-coded clips"),
        ("backpacking", "family camping", "festivals", "alpine camps"),
        _OUTDOOR,
    ),
    _Category(
        "Sleeping Bags",
        ("sleeping bag", "mummy bag", "quilt"),
        (50, 480),
        ("down", "synthetic", "compressible", "three-season", "zero-degree"),
        ("800-fill down", "recycled polyester", "ripstop shell"),
        ("a draft collar", "a hood cinch", "a two-way zipper", "a stuff sack"),
        ("cold nights", "thru-hikes", "car camping"),
        _OUTDOOR,
    ),
    _Category(
        "Backpacks",
        ("backpack", "daypack", "hiking pack", "travel pack"),
        (35, 350),
        ("30-liter", "45-liter", "65-liter", "lightweight", "water-resistant"),
        ("ripstop nylon", "Cordura", "recycled polyester"),
        ("a hip belt", "a hydration sleeve", "a ventilated back panel", "a laptop sleeve", "a rain cover"),
        ("day hikes", "commuting", "travel", "overnight trips"),
        _OUTDOOR,
    ),
    _Category(
        "Rain Jackets",
        ("rain jacket", "shell jacket", "waterproof jacket"),
        (60, 420),
        ("packable", "breathable", "waterproof", "hooded", "lightweight"),
        ("3-layer Gore-Tex", "2.5-layer nylon", "recycled polyester"),
        ("pit zips", "an adjustable hood", "sealed seams", "a chest pocket"),
        ("rainy commutes", "hiking", "travel"),
        _OUTDOOR,
    ),
    _Category(
        "Headphones",
        ("headphones", "wireless earbuds", "over-ear headphones", "noise cancelling headphones"),
        (25, 450),
        ("wireless", "noise-cancelling", "bluetooth", "foldable", "studio"),
        ("memory foam", "aluminum", "protein leather"),
        (
            "40-hour battery life",
            "active noise cancellation",
            "a transparency mode",
            "multipoint pairing",
            "USB-C fast charging",
        ),
        ("commuting", "flights", "workouts", "studio mixing"),
        _ELECTRONICS,
    ),
    _Category(
        "Laptops",
        ("laptop", "ultrabook", "gaming laptop", "notebook"),
        (350, 2800),
        ("14-inch", "16-inch", "thin", "lightweight", "high-performance"),
        ("an aluminum chassis", "a magnesium alloy body", "a carbon fiber lid"),
        (
            "16GB RAM",
            "a 1TB SSD",
            "an OLED display",
            "a backlit keyboard",
            "all-day battery life",
            "a 120Hz screen",
        ),
        ("students", "programming", "gaming", "video editing", "business travel"),
        _ELECTRONICS,
    ),
    _Category(
        "Smartwatches",
        ("smartwatch", "fitness tracker", "GPS watch"),
        (40, 700),
        ("waterproof", "GPS", "solar", "slim", "rugged"),
        ("titanium", "stainless steel", "silicone strap"),
        ("heart-rate tracking", "sleep tracking", "offline maps", "a 10-day battery", "contactless payments"),
        ("running", "swimming", "everyday wear", "trail running"),
        _ELECTRONICS,
    ),
    _Category(
        "Bluetooth Speakers",
        ("bluetooth speaker", "portable speaker", "smart speaker"),
        (25, 400),
        ("portable", "waterproof", "rugged", "compact"),
        ("fabric mesh", "rubberized housing", "aluminum grille"),
        ("360-degree sound", "20-hour battery life", "stereo pairing", "a built-in microphone"),
        ("beach days", "parties", "the shower", "camping"),
        _ELECTRONICS,
    ),
    _Category(
        "Cameras",
        ("mirrorless camera", "action camera", "compact camera"),
        (150, 2500),
        ("4K", "full-frame", "weather-sealed", "compact"),
        ("magnesium alloy", "polycarbonate"),
        ("image stabilization", "fast autofocus", "a flip screen", "dual card slots"),
        ("vlogging", "travel photography", "wildlife", "action sports"),
        _ELECTRONICS,
    ),
    _Category(
        "Monitors",
        ("monitor", "gaming monitor", "ultrawide monitor"),
        (120, 1400),
        ("27-inch", "34-inch", "4K", "curved", "144Hz"),
        ("a matte panel", "an aluminum stand"),
        ("HDR support", "USB-C power delivery", "a height-adjustable stand", "low blue light"),
        ("home offices", "gaming", "photo editing"),
        _ELECTRONICS,
    ),
    _Category(
        "Keyboards",
        ("mechanical keyboard", "wireless keyboard", "ergonomic keyboard"),
        (30, 260),
        ("mechanical", "low-profile", "wireless", "split", "compact"),
        ("PBT keycaps", "an aluminum frame", "hot-swappable switches"),
        ("RGB backlighting", "tactile switches", "a detachable cable", "three-device bluetooth"),
        ("typing", "programming", "gaming"),
        _ELECTRONICS,
    ),
    _Category(
        "Coffee Makers",
        ("coffee maker", "espresso machine", "pour-over kettle", "cold brew maker"),
        (30, 900),
        ("programmable", "compact", "stainless", "single-serve", "thermal"),
        ("stainless steel", "borosilicate glass", "BPA-free plastic"),
        ("a built-in grinder", "a milk frother", "a thermal carafe", "temperature control"),
        ("busy mornings", "small kitchens", "offices"),
        _HOME,
    ),
    _Category(
        "Blenders",
        ("blender", "personal blender", "immersion blender"),
        (25, 550),
        ("high-speed", "quiet", "cordless", "compact"),
        ("a glass jar", "Tritan plastic", "stainless steel blades"),
        ("variable speed", "a pulse mode", "self-cleaning", "a tamper"),
        ("smoothies", "soups", "nut butters"),
        _HOME,
    ),
    _Category(
        "Kitchen Knives",
        ("chef knife", "knife set", "santoku knife"),
        (20, 400),
        ("Japanese", "German", "forged", "razor-sharp"),
        ("high-carbon steel", "Damascus steel", "ceramic"),
        ("a full tang", "an ergonomic handle", "a magnetic block", "a blade guard"),
        ("home cooks", "meal prep", "professional kitchens"),
        _HOME,
    ),
    _Category(
        "Office Chairs",
        ("office chair", "ergonomic chair", "gaming chair"),
        (90, 1300),
        ("ergonomic", "adjustable", "breathable", "reclining"),
        ("mesh", "vegan leather", "aluminum base"),
        ("lumbar support", "4D armrests", "a headrest", "a tilt lock"),
        ("long workdays", "home offices", "gaming"),
        _HOME,
    ),
    _Category(
        "Running Shoes",
        ("running shoes", "trail running shoes", "racing flats"),
        (50, 260),
        ("cushioned", "lightweight", "stable", "responsive", "wide-fit"),
        ("engineered mesh", "knit upper", "recycled materials"),
        ("a carbon plate", "a rocker sole", "a grippy outsole", "a heel counter"),
        ("marathon training", "daily runs", "trail races", "the gym"),
        _SPORT,
    ),
    _Category(
        "Yoga Mats",
        ("yoga mat", "travel yoga mat", "exercise mat"),
        (15, 150),
        ("non-slip", "extra-thick", "eco-friendly", "foldable"),
        ("natural rubber", "TPE", "cork"),
        ("alignment lines", "a carrying strap", "a moisture-resistant surface"),
        ("hot yoga", "pilates", "home workouts"),
        _SPORT,
    ),
    _Category(
        "Bicycles",
        ("road bike", "mountain bike", "e-bike", "gravel bike"),
        (300, 5000),
        ("lightweight", "full-suspension", "electric", "carbon"),
        ("a carbon frame", "an aluminum frame", "a steel frame"),
        ("hydraulic disc brakes", "a 12-speed drivetrain", "tubeless tires", "a dropper post"),
        ("commuting", "trail riding", "gravel races", "long rides"),
        _SPORT,
    ),
    _Category(
        "Water Bottles",
        ("water bottle", "insulated bottle", "filter bottle"),
        (10, 60),
        ("insulated", "leakproof", "collapsible", "BPA-free"),
        ("stainless steel", "Tritan plastic", "silicone"),
        ("a straw lid", "24-hour cold retention", "a built-in filter", "a carry loop"),
        ("the gym", "hiking", "the office"),
        _SPORT,
    ),
)

_MODEL_NAMES = (
    "Ridgeline",
    "Apex",
    "Horizon",
    "Nomad",
    "Vista",
    "Pulse",
    "Echo",
    "Atlas",
    "Summit",
    "Drift",
    "Orbit",
    "Cascade",
    "Terra",
    "Nova",
    "Zenith",
    "Aero",
    "Vector",
    "Halo",
    "Canyon",
    "Pioneer",
)
_SLUG_STRIP = re.compile(r"[^a-z0-9]+")


def _slug(text: str) -> str:
    return _SLUG_STRIP.sub("-", text.lower()).strip("-")


def _product(rng: random.Random, index: int) -> Product:
    category = rng.choice(_CATEGORIES)
    brand = rng.choice(category.brands)
    noun = rng.choice(category.nouns)
    adjective = rng.choice(category.adjectives)
    material = rng.choice(category.materials)
    model = f"{rng.choice(_MODEL_NAMES)} {rng.randint(1, 9)}"
    first, second = rng.sample(category.features, 2)
    use = rng.choice(category.uses)
    low, high = category.price_range
    price = round(int(rng.uniform(low, high)) + 0.99, 2)
    # "Waterproof Waterproof Jacket" reads as a bug; skip the adjective when the noun already says it.
    repeats_noun = any(word in noun.lower() for word in adjective.lower().split("-"))
    shown_adjective = "" if repeats_noun else f"{adjective.capitalize()} "
    title = f"{brand} {model} {shown_adjective}{noun.title()}"
    description = (
        f"{adjective.capitalize()} {noun} made with {material}, with {first} and {second}. Built for {use}."
    )
    rating = rng.randint(35, 50) / 10
    review_count = rng.randint(3, 4000)
    product_id = f"SKU-{index:08d}"
    # model_construct skips validation: the generator's own vocabulary is known to be valid, and the
    # benchmark generates a million products.
    return Product.model_construct(
        id=product_id,
        title=title,
        description=description,
        category=category.name,
        brand=brand,
        price=price,
        currency="USD",
        rating=rating,
        review_count=review_count,
        url=f"https://shop.example.com/p/{product_id}/{_slug(title)}",
        image_url=f"https://images.shop.example.com/{product_id}.jpg",
    )


def generate_catalog(count: int, seed: int = 0) -> Iterator[Product]:
    """`count` synthetic products; the same (count, seed) always yields the same products."""
    if count < 0:
        raise ValueError(f"count: must be 0 or more, got {count}")
    rng = random.Random(seed)
    for index in range(count):
        yield _product(rng, index)


_QUERY_TEMPLATES = (
    "{adjective} {noun}",
    "{noun}",
    "{brand} {noun}",
    "best {noun} for {use}",
    "can you recommend a {adjective} {noun} with {feature}",
    "{adjective} {noun} under ${price}",
    "{noun} made of {material}",
    "{brand} vs {other_brand} {noun}",
    "how do I choose a {noun} for {use}",
    "I need {noun} for {use} with {feature}",
)


def generate_queries(count: int, seed: int = 0) -> list[str]:
    """Shopper questions in the generator's vocabulary, for benchmarks and demos (deterministic per seed)."""
    rng = random.Random(seed)
    queries = []
    for _ in range(count):
        category = rng.choice(_CATEGORIES)
        brand, other_brand = rng.sample(category.brands, 2)
        low, high = category.price_range
        queries.append(
            rng.choice(_QUERY_TEMPLATES).format(
                adjective=rng.choice(category.adjectives),
                noun=rng.choice(category.nouns),
                brand=brand,
                other_brand=other_brand,
                use=rng.choice(category.uses),
                feature=rng.choice(category.features),
                material=rng.choice(category.materials),
                price=rng.randrange(low, high + 1, 10) if high - low > 10 else high,
            )
        )
    return queries


def category_names() -> tuple[str, ...]:
    """The categories the generator draws from (for tests and benchmarks that need realistic queries)."""
    return tuple(category.name for category in _CATEGORIES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m assistant.catalog", description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, required=True, help="number of products to generate")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same catalog)")
    parser.add_argument("--out", type=Path, required=True, help="JSON Lines file to write")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error(f"--count: must be at least 1, got {args.count}")
    if not args.out.parent.is_dir():
        parser.error(f"--out: folder {args.out.parent} does not exist")
    written = write_catalog(generate_catalog(args.count, args.seed), args.out)
    print(f"wrote {written} products to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
