"""TTFT and tokens/s: the assistant (plan + retrieve + prompt) against a pass-through model, side by side.

One real Triton server with both models on the same tiny model and vLLM-CPU engine settings; 1, 8 and 16
concurrent gRPC streams. Two pass-through columns: the bare question (what Triton's stock vLLM backend
would get from a client) and the assistant's full prompt (same prefill work, so the difference is our
planning, retrieval and prompt building alone). Quote medians and ratios: the machine is shared and noisy.

With --profile-out, it also measures the engine itself through the pass-through (prefill tokens/s from the
time to first token of short and long prompts; decode step time per batch size from streams running
together) and writes a performance profile for the capacity planner.

    .venv-serve/bin/python bench/serving_ttft.py [--requests 48] [--max-tokens 64] [--profile-out PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "container"))

from assistant.chat import ChatFormat
from assistant.prepare import prepare_request
from assistant.retrieve import ProductIndex
from assistant.sampling_defaults import from_generation_config, read_generation_config
from local.client import StreamingClient, StreamResult
from local.demo_assets import ensure_demo_assets
from local.triton_server import CPU_ENGINE_PROFILE, TritonServer

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


def percentile(values, q: float):
    """The value at fraction q of the sorted values (index int(q * n), the last one at most), as every
    figure of the model's metric lines is quoted here."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_round(
    clients: list[StreamingClient],
    pool,
    model: str,
    prompts: list[str],
    max_tokens: int,
    model_defaults: dict[str, object] | None = None,
):
    # min_tokens = max_tokens: fixed-length answers on both models (the assistant refuses ignore_eos).
    # Every key the assistant would take from the model's generation_config.json is sent: the pass-through,
    # like Triton's stock backend, applies none, and top_p < 1 costs the sampler a sort of the vocabulary
    # per token, so without them the two would not run the same sampling.
    sampling = {
        **(model_defaults or {}),
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,
        "temperature": 0.8,
    }
    started = time.perf_counter()
    futures = [
        pool.submit(client.ask, prompt, model=model, sampling=sampling)
        for client, prompt in zip(clients, prompts, strict=True)
    ]
    results = [future.result() for future in futures]
    return results, time.perf_counter() - started


PROFILE_BATCHES = (1, 4, 8, 16)
PROFILE_SHORT_WORDS, PROFILE_LONG_WORDS = 16, 600


def measure_profile(clients: list[StreamingClient], pool, rounds: int = 5) -> dict[str, object]:
    """Prefill tokens/s and decode step time per batch size, measured on the pass-through's engine."""
    words = ["waterproof", "hiking", "boots", "with", "ankle", "support", "for", "muddy", "trails"]

    def prompt(count: int, salt: int) -> str:
        # A different first word each time: nothing to reuse from an earlier prompt.
        return " ".join([f"q{salt}"] + [words[i % len(words)] for i in range(count)])

    ttfts: dict[int, list[float]] = {PROFILE_SHORT_WORDS: [], PROFILE_LONG_WORDS: []}
    tokens: dict[int, int] = {}
    for number in range(rounds):
        for length in ttfts:
            time.sleep(ENGINE_IDLE_S)
            result = clients[0].ask(
                prompt(length, number), model="passthrough", sampling={"max_tokens": 1, "ignore_eos": True}
            )
            ttfts[length].append(result.ttft_s or 0.0)
    tokenizer = ChatFormat.load(str(ensure_demo_assets().model_dir))
    for length in ttfts:
        tokens[length] = tokenizer.count_tokens(prompt(length, 0))
    seconds = statistics.median(ttfts[PROFILE_LONG_WORDS]) - statistics.median(ttfts[PROFILE_SHORT_WORDS])
    prefill = (tokens[PROFILE_LONG_WORDS] - tokens[PROFILE_SHORT_WORDS]) / seconds if seconds > 0 else 0.0
    steps: dict[int, float] = {}
    for batch in PROFILE_BATCHES:
        samples = []
        for _ in range(max(1, rounds // 2)):
            time.sleep(ENGINE_IDLE_S)
            results, _ = run_round(
                clients[:batch], pool, "passthrough", [prompt(8, 1000 + i) for i in range(batch)], 64
            )
            for result in results:
                generating = result.total_s - (result.ttft_s or 0.0)
                if len(result.chunks) > 1:
                    samples.append(generating / (len(result.chunks) - 1) * 1000.0)
        steps[batch] = round(statistics.median(samples), 2)
    return {"prefill_tokens_per_second": round(prefill, 1), "decode_step_ms": steps}


def write_profile(path: Path, measured: dict[str, object], instance_type: str) -> None:
    import yaml

    engine = json.loads(CPU_ENGINE_PROFILE.read_text())
    profile = {
        "instance_type": instance_type,
        "source": f"make bench-serving {datetime.date.today().isoformat()} {socket.gethostname()} "
        "(tiny Llama on vLLM-CPU through Triton; measured, not a Neuron figure)",
        "tensor_parallel": engine["tensor_parallel_size"],
        "max_num_seqs": engine["max_num_seqs"],
        **measured,
    }
    path.write_text(yaml.safe_dump(profile, sort_keys=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=48, help="requests per model and concurrency")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--profile-out", type=Path, help="also measure the engine and write a planner profile"
    )
    parser.add_argument("--instance-type", default="local-cpu", help="the profile's instance_type")
    parser.add_argument(
        "--client-nice",
        type=int,
        default=10,
        help="nice value the clients run at once the server is up (default 10; 0 to compete with it)",
    )
    parser.add_argument(
        "--streams",
        type=int,
        nargs="+",
        default=list(CONCURRENCY),
        help="concurrent streams per cell (default 1 8 16); e.g. --streams 16 --requests 96 for one cell",
    )
    args = parser.parse_args(argv)
    concurrencies = tuple(args.streams)
    if args.profile_out is not None:
        args.profile_out.parent.mkdir(parents=True, exist_ok=True)

    assets = ensure_demo_assets()
    index = ProductIndex.open(assets.index_dir)
    chat = ChatFormat.load(str(assets.model_dir))
    model_defaults = from_generation_config(read_generation_config(assets.model_dir))
    print(f"sampling on every model: the model's generation config {model_defaults}, temperature 0.8")

    def full_prompt(question: str) -> str:
        return prepare_request(question, index, chat).prompt

    variants = {
        "assistant": ("assistant", lambda q: q),
        "pass-through (question)": ("passthrough", lambda q: q),
        "pass-through (same prompt)": ("passthrough", full_prompt),
    }
    cells = {(name, c): Cell() for name in variants for c in concurrencies}
    with tempfile.TemporaryDirectory() as work_dir:
        server = TritonServer(
            model_dir=assets.model_dir,
            index_dir=assets.index_dir,
            work_dir=Path(work_dir),
            pick_ports=True,
            models=("assistant", "passthrough"),
            edge=True,  # as in production: the streams go through the body cap (container/edge)
            # Two engines starting on a shared 2-core machine (load average 10-14) took over 10 minutes.
            start_timeout_s=1800.0,
        )
        print("starting Triton with both models ...", flush=True)
        with contextlib.ExitStack() as running:
            running.enter_context(server)
            # The load generator yields the cores to the server it measures (in production the clients are
            # elsewhere): its 16 streams' Python threads otherwise took the cores from the prepare worker
            # (docs/benchmarks.md, round five). Linux threads take the nice value of the thread that creates
            # them, and the clients' threads are all created from here on; the server started before.
            os.nice(args.client_nice)
            pool = running.enter_context(ThreadPoolExecutor(max_workers=max(CONCURRENCY + concurrencies)))
            clients = [StreamingClient(server.grpc_url) for _ in range(max(CONCURRENCY + concurrencies))]
            # Warm-up: first requests pay one-off costs (allocator, caches) in both models.
            for model, _ in variants.values():
                run_round(clients[:4], pool, model, QUESTIONS[:4], 8)
            # The model's figures (preparation time) over the measured requests only, as the TTFT cells:
            # the first preparations build product lines and fill caches, and of ~100 requests the p99 is
            # the slowest one. The warm-up's metric lines are written by now (the next round waits first).
            time.sleep(ENGINE_IDLE_S)
            measured_from = len(server.log_path.read_text(errors="replace"))
            for concurrency in concurrencies:
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
                            clients[:concurrency], pool, model, prompts, args.max_tokens, model_defaults
                        )
                        cells[(name, concurrency)].add_round(results, wall)
            profile = measure_profile(clients, pool) if args.profile_out is not None else None
            for client in clients:
                client.close()
            records = [
                json.loads(line)
                for line in server.log_path.read_text(errors="replace")[measured_from:].splitlines()
                if line.startswith("{") and '"Outcome"' in line
            ]
            prepare_ms = sorted(
                record["PrepareMs"]
                for record in records
                if record.get("Model") == "assistant" and record.get("PrepareMs") is not None
            )
            prepare_cpu_ms = sorted(
                record["PrepareCpuMs"]
                for record in records
                if record.get("Model") == "assistant" and record.get("PrepareCpuMs") is not None
            )
            # Each preparation's wall time split: CPU, waiting for a core (the kernel's count), the rest.
            prepare_splits = sorted(
                (record["PrepareMs"], record["PrepareCpuMs"], record["PrepareRunQueueMs"])
                for record in records
                if record.get("Model") == "assistant" and record.get("PrepareRunQueueMs") is not None
            )
            assistant_tokens = statistics.median(
                r["InputTokens"] for r in records if r.get("Model") == "assistant" and "InputTokens" in r
            )
            question_tokens = statistics.median(chat.count_tokens(q) for q in QUESTIONS)

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
    for concurrency in concurrencies:
        for name in variants:
            cell = cells[(name, concurrency)]
            print(
                f"{concurrency:>7}  {name:<27} {cell.p(0.5):>7.1f}ms {cell.p(0.99):>7.1f}ms "
                f"{statistics.median(cell.stream_tokens_per_s):>12.1f} {cell.throughput:>11.1f}"
            )
    if prepare_ms:
        p50, p99 = percentile(prepare_ms, 0.5), percentile(prepare_ms, 0.99)
        print(
            f"\nassistant plan + retrieve + prompt, timed inside the model: "
            f"p50 {p50:.2f} ms, p99 {p99:.2f} ms ({len(prepare_ms)} requests, {index.product_count} products)"
        )
    if prepare_cpu_ms:
        p50, p99 = percentile(prepare_cpu_ms, 0.5), percentile(prepare_cpu_ms, 0.99)
        print(
            f"  the worker's CPU time for it: p50 {p50:.2f} ms, p99 {p99:.2f} ms "
            "(the wall time above also holds waits for a core or the GIL)"
        )
    if prepare_splits:
        run_queue = [queued for _, _, queued in prepare_splits]
        other = [max(0.0, wall - cpu - queued) for wall, cpu, queued in prepare_splits]
        print(
            f"  waiting for a core: p50 {percentile(run_queue, 0.5):.2f} ms, "
            f"p99 {percentile(run_queue, 0.99):.2f} ms; other waits (mostly the GIL): "
            f"p50 {percentile(other, 0.5):.2f} ms, p99 {percentile(other, 0.99):.2f} ms"
        )
        wall, cpu, queued = percentile(prepare_splits, 0.99)
        print(
            f"  the p99 preparation: {wall:.2f} ms wall = {cpu:.2f} CPU + {queued:.2f} waiting for a core "
            f"+ {max(0.0, wall - cpu - queued):.2f} other"
        )
    print(
        f"\nprompt tokens per request (median): assistant {assistant_tokens:.0f} (its InputTokens metric), "
        f"bare question {question_tokens:.0f}"
    )
    print("\nassistant vs pass-through: TTFT difference (ms) and throughput ratio")
    for baseline in ("pass-through (question)", "pass-through (same prompt)"):
        for concurrency in concurrencies:
            ours, theirs = cells[("assistant", concurrency)], cells[(baseline, concurrency)]
            print(
                f"  vs {baseline:<27} {concurrency:>2} streams: "
                f"p50 {ours.p(0.5) - theirs.p(0.5):+7.1f} ms, p99 {ours.p(0.99) - theirs.p(0.99):+7.1f} ms, "
                f"tokens/s {ours.throughput / theirs.throughput:6.1%}"
            )
    if profile is not None:
        write_profile(args.profile_out, profile, args.instance_type)
        print(f"\nperformance profile written to {args.profile_out}:\n{args.profile_out.read_text()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
