"""What the edge (container/edge: the request body cap in front of Triton) costs a stream: TTFT and tokens/s
through the edge against Triton's own gRPC port, on one server, rounds interleaved.

    .venv-serve/bin/python bench/edge_overhead.py [--requests 48] [--max-tokens 32]

Quote medians and ratios: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "container"))

from local.client import StreamingClient
from local.demo_assets import ensure_demo_assets
from local.triton_server import TritonServer

QUESTIONS = ["waterproof hiking boots", "a good camping stove", "warm jacket for winter camping"]
CONCURRENCY = (1, 16)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=48, help="requests per path and concurrency")
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args(argv)
    assets = ensure_demo_assets()
    sampling = {"max_tokens": args.max_tokens, "min_tokens": args.max_tokens}
    ttft: dict[tuple[str, int], list[float]] = {}
    rate: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as work_dir:
        server = TritonServer(
            model_dir=assets.model_dir,
            index_dir=assets.index_dir,
            work_dir=Path(work_dir),
            pick_ports=True,
            models=("passthrough",),
            edge=True,
        )
        print("starting Triton behind the edge ...", flush=True)
        with server, ThreadPoolExecutor(max_workers=max(CONCURRENCY)) as pool:
            urls = {"edge": server.grpc_url, "triton": f"127.0.0.1:{server.triton_ports.grpc}"}
            clients = {
                path: [StreamingClient(url) for _ in range(max(CONCURRENCY))] for path, url in urls.items()
            }
            for path in urls:  # warm-up
                clients[path][0].ask(QUESTIONS[0], model="passthrough", sampling=sampling)
            for concurrency in CONCURRENCY:
                for round_number in range(max(1, args.requests // concurrency)):
                    for path in urls:  # interleaved, so noise hits both alike
                        futures = [
                            pool.submit(
                                client.ask,
                                QUESTIONS[(round_number + i) % len(QUESTIONS)],
                                model="passthrough",
                                sampling=sampling,
                            )
                            for i, client in enumerate(clients[path][:concurrency])
                        ]
                        for result in (future.result() for future in futures):
                            if result.error is not None:
                                raise RuntimeError(f"{path}: {result.error}")
                            ttft.setdefault((path, concurrency), []).append((result.ttft_s or 0.0) * 1000)
                            rate.setdefault((path, concurrency), []).append(result.tokens_per_s)
                        time.sleep(0.2)
            for path_clients in clients.values():
                for client in path_clients:
                    client.close()
    print(f"\n{args.requests} requests per cell, {args.max_tokens} tokens each, gRPC streams (passthrough)\n")
    print(f"{'streams':>7}  {'path':<7} {'TTFT p50':>9} {'tok/s/stream p50':>17}")
    for concurrency in CONCURRENCY:
        for path in ("triton", "edge"):
            key = (path, concurrency)
            print(
                f"{concurrency:>7}  {path:<7} {statistics.median(ttft[key]):>7.1f}ms "
                f"{statistics.median(rate[key]):>17.1f}"
            )
        edge, triton = ("edge", concurrency), ("triton", concurrency)
        added_ms = statistics.median(ttft[edge]) - statistics.median(ttft[triton])
        share = statistics.median(rate[edge]) / statistics.median(rate[triton])
        print(f"{'':>7}  edge - triton: TTFT p50 {added_ms:+.1f} ms, tokens/s {share:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
