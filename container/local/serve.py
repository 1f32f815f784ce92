"""`make serve [CATALOG=file]`: the assistant on a real Triton server at the loopback ports, until Ctrl-C.

With CATALOG, the shop's own catalog (JSON Lines or CSV) is indexed first (as `make index` does) and served.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from local.demo_assets import DEFAULT_BUILD_DIR, ensure_demo_assets
from local.triton_server import DEFAULT_PORTS, Ports, ServerError, TritonServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make serve", description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["assistant", "passthrough"], help="models to load")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the server")
    parser.add_argument(
        "--ports",
        type=int,
        nargs=3,
        metavar=("HTTP", "GRPC", "METRICS"),
        default=list(DEFAULT_PORTS),
        help="loopback ports (default: Triton's own, 8000 8001 8002)",
    )
    parser.add_argument(
        "--catalog", type=Path, help="serve this catalog (JSON Lines or CSV) instead of the demo"
    )
    args = parser.parse_args(argv)

    print("preparing the demo catalog, its index and the tiny model (first run only) ...", flush=True)
    assets = ensure_demo_assets()
    index_dir = assets.index_dir
    if args.catalog is not None:
        from assistant.catalog import CatalogError
        from assistant.retrieve import CatalogIndexError, build_index

        index_dir = DEFAULT_BUILD_DIR / "shop-index"
        try:
            stats = build_index(args.catalog, index_dir)
        except (CatalogError, CatalogIndexError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"indexed {stats.products:,} products from {args.catalog} ({stats.skipped:,} bad rows skipped)")
        for message in stats.row_errors:
            print(f"  skipped: {message}")
    server = TritonServer(
        model_dir=assets.model_dir,
        index_dir=index_dir,
        work_dir=DEFAULT_BUILD_DIR / "triton",
        ports=Ports(*args.ports),
        models=args.models,
        log_to_console=True,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(
        f"starting Triton (models: {', '.join(args.models)}); the engine takes a minute to load ...",
        flush=True,
    )
    try:
        server.start(timeout_s=args.timeout)
        print(
            f"\nready: HTTP {server.http_url}, gRPC {server.grpc_url}, metrics {server.metrics_url}\n"
            'ask from another shell: make ask Q="waterproof hiking boots"   (Ctrl-C here stops the server)',
            flush=True,
        )
        while server.process is not None and server.process.poll() is None:
            time.sleep(1.0)
        print(f"tritonserver exited with code {server.process.returncode}", file=sys.stderr)
        return 1
    except ServerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        # A second Ctrl-C or SIGTERM (a supervisor's stop, an impatient user) must not cut the stop short:
        # it would skip the kill of what is left in the server's group. The guard in each model process
        # also ends a model process that outlives Triton (serving/orphan_guard.py).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
