"""`make serve`: the assistant on a real Triton server at the default loopback ports, until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from local.demo_assets import DEFAULT_BUILD_DIR, ensure_demo_assets
from local.triton_server import DEFAULT_PORTS, Ports, ServerError, TritonServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make serve", description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["assistant", "passthrough"], help="models to load")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the server")
    args = parser.parse_args(argv)

    print("preparing the demo catalog, its index and the tiny model (first run only) ...", flush=True)
    assets = ensure_demo_assets()
    server = TritonServer(
        model_dir=assets.model_dir,
        index_dir=assets.index_dir,
        work_dir=DEFAULT_BUILD_DIR / "triton",
        ports=Ports(*DEFAULT_PORTS),
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
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
