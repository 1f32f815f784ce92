"""Retrieval benchmark: build time, index size, peak memory and query latency of the embedded product index.

    python bench/retrieval_index.py                    # 100k and 1M products, 3 runs each, medians
    python bench/retrieval_index.py --sizes 20000 --runs 1

Each build and each query run happens in a fresh child process, so peak RSS (getrusage ru_maxrss) belongs
to that step alone. Queries are realistic shopper questions sent through the planner first, as the model
does, and only the index search is timed. The machine is shared: read medians and the ratio row.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "container"))

from assistant.catalog import generate_catalog, generate_queries, write_catalog  # noqa: E402
from assistant.plan import plan_query  # noqa: E402
from assistant.retrieve import ProductIndex, build_index  # noqa: E402


def _peak_rss_mb() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child_build(catalog: Path, index_dir: Path) -> dict[str, float]:
    stats = build_index(catalog, index_dir)
    return {"build_s": stats.seconds, "size_mb": stats.size_bytes / 1e6, "build_rss_mb": _peak_rss_mb()}


def _percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, round(fraction * (len(sorted_values) - 1)))]


def _child_query(index_dir: Path, queries: int, seed: int) -> dict[str, float]:
    plans = [plan_query(text) for text in generate_queries(queries, seed)]
    started = time.perf_counter()
    index = ProductIndex.open(index_dir)
    open_ms = (time.perf_counter() - started) * 1000
    for plan in plans[:50]:  # warm the OS page cache and the analyzer, as a serving host would be
        index.search(plan.search_query, plan.top_k, max_price=plan.max_price)
    latencies = []
    returned = 0
    for plan in plans:
        if not plan.retrieve:
            continue
        began = time.perf_counter()
        results = index.search(plan.search_query, plan.top_k, max_price=plan.max_price)
        latencies.append((time.perf_counter() - began) * 1000)
        returned += len(results)
    latencies.sort()
    return {
        "open_ms": open_ms,
        "p50_ms": _percentile(latencies, 0.50),
        "p99_ms": _percentile(latencies, 0.99),
        "query_rss_mb": _peak_rss_mb(),
        "hit_rate": returned / sum(plan.top_k for plan in plans if plan.retrieve),
    }


def _run_child(*arguments: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", *arguments], check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _measure(size: int, runs: int, queries: int, workdir: Path) -> dict[str, float]:
    catalog = workdir / f"catalog-{size}.jsonl"
    started = time.perf_counter()
    write_catalog(generate_catalog(size, seed=size), catalog)
    print(f"  {size:,} products: catalog generated in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    samples: list[dict[str, float]] = []
    for run in range(runs):
        index_dir = workdir / f"index-{size}"
        sample = _run_child("build", str(catalog), str(index_dir))
        sample |= _run_child("query", str(index_dir), str(queries), str(run))
        samples.append(sample)
        print(f"  {size:,} products: run {run + 1}/{runs} {json.dumps(sample)}", file=sys.stderr)
    return {key: statistics.median(sample[key] for sample in samples) for key in samples[0]}


COLUMNS = (
    ("products", "{:>10,}"),
    ("build_s", "{:>8.1f}"),
    ("size_mb", "{:>9.1f}"),
    ("build_rss_mb", "{:>13.0f}"),
    ("open_ms", "{:>8.1f}"),
    ("query_rss_mb", "{:>13.0f}"),
    ("p50_ms", "{:>7.2f}"),
    ("p99_ms", "{:>7.2f}"),
    ("hit_rate", "{:>9.2f}"),
)


def _table(rows: list[dict[str, float]]) -> str:
    header = "  ".join(f"{name:>{len(fmt.format(0))}}" for name, fmt in COLUMNS)
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append("  ".join(fmt.format(row[name]) for name, fmt in COLUMNS))
    if len(rows) > 1:
        base, last = rows[0], rows[-1]
        ratios = []
        for name, fmt in COLUMNS:
            width = len(fmt.format(0))
            ratio = last[name] / base[name] if base[name] else float("nan")
            ratios.append(f"{'x' + format(ratio, '.1f'):>{width}}")
        lines.append("  ".join(ratios) + f"   (ratio {last['products']:,.0f} / {base['products']:,.0f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated catalog sizes")
    parser.add_argument("--runs", type=int, default=3, help="builds and query runs per size (median shown)")
    parser.add_argument("--queries", type=int, default=3000, help="queries per run")
    parser.add_argument("--workdir", type=Path, help="folder for catalogs and indexes (default: a temp dir)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        step, *rest = args.child
        if step == "build":
            result = _child_build(Path(rest[0]), Path(rest[1]))
        else:
            result = _child_query(Path(rest[0]), int(rest[1]), int(rest[2]))
        print(json.dumps(result))
        return 0

    try:
        sizes = [int(size.replace("_", "")) for size in args.sizes.split(",") if size.strip()]
    except ValueError:
        parser.error(f"--sizes: must be comma-separated whole numbers, got {args.sizes!r}")
    if not sizes or min(sizes) < 100:
        parser.error(f"--sizes: each size must be at least 100, got {args.sizes!r}")
    if args.runs < 1 or args.queries < 100:
        parser.error("--runs must be at least 1 and --queries at least 100")

    with tempfile.TemporaryDirectory(prefix="retrieval-bench-") as scratch:
        workdir = args.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        rows = [{"products": size, **_measure(size, args.runs, args.queries, workdir)} for size in sizes]
    print(f"retrieval index: medians of {args.runs} run(s), {args.queries} planned queries per run")
    print(_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
