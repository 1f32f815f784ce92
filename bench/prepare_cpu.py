"""CPU time of one request's preparation (plan -> retrieve -> prompt), step by step, on the demo catalog.

What the prepare worker runs for each request (container/serving/models.py, AssistantModel.prepare), alone
on one thread: no engine, no server. Prints the median and p99 CPU time of the whole preparation and of its
steps over the serving benchmark's questions; --profile adds cProfile's most expensive functions. Quote
medians: the machine is shared.

    .venv-serve/bin/python bench/prepare_cpu.py [--rounds 200] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "container"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving_ttft import QUESTIONS

from assistant import prompt as prompt_module
from assistant.chat import ChatFormat
from assistant.plan import plan_query
from assistant.prepare import prepare_request
from assistant.prompt import build_prompt
from assistant.retrieve import ProductIndex
from local.demo_assets import ensure_demo_assets


def cpu_ms(action) -> tuple[object, float]:
    started = time.thread_time()
    result = action()
    return result, (time.thread_time() - started) * 1000.0


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="passes over the questions")
    parser.add_argument("--profile", action="store_true", help="also print cProfile's top functions")
    args = parser.parse_args(argv)

    assets = ensure_demo_assets()
    index = ProductIndex.open(assets.index_dir)
    chat = ChatFormat.load(str(assets.model_dir))
    for question in QUESTIONS:  # warm: first calls fill caches (vocabulary, cleaned texts, templates)
        prepare_request(question, index, chat)

    def forget_lines() -> None:
        # (getattr: the same script also times a checkout from before these caches, side by side)
        for cache in (getattr(prompt_module, "_cleaned_line", None), getattr(chat, "count_line", None)):
            if cache is not None:
                cache.cache_clear()

    names = ("whole", "whole, lines not cached", "plan", "retrieve", "prompt")
    steps: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(args.rounds):
        for question in QUESTIONS:
            # Products seen for the first time at their rank: their lines built and counted anew.
            forget_lines()
            _, cold = cpu_ms(lambda q=question: prepare_request(q, index, chat))
            steps["whole, lines not cached"].append(cold)
            _, whole = cpu_ms(lambda q=question: prepare_request(q, index, chat))
            steps["whole"].append(whole)
            text = chat.clean(question)
            plan, plan_ms = cpu_ms(lambda t=text: plan_query(t, index.in_catalog))
            products, retrieve_ms = cpu_ms(
                lambda p=plan: (
                    index.search(
                        p.search_query, p.top_k, max_price=p.max_price, sort_by_price=p.sort_by_price
                    )
                    if p.retrieve
                    else []
                )
            )
            _, prompt_ms = cpu_ms(lambda t=text, p=plan, found=products: build_prompt(t, p, found, chat))
            steps["plan"].append(plan_ms)
            steps["retrieve"].append(retrieve_ms)
            steps["prompt"].append(prompt_ms)

    count = len(steps["whole"])
    print(f"{count} preparations, {index.product_count:,} products, CPU time per request:")
    for name, values in steps.items():
        print(f"  {name:<24} p50 {statistics.median(values):6.3f} ms   p99 {p99(values):6.3f} ms")
    if args.profile:
        profiler = cProfile.Profile()
        for _ in range(max(1, args.rounds // 4)):
            for question in QUESTIONS:
                forget_lines()  # where the CPU goes for lines not seen before
                profiler.enable()
                prepare_request(question, index, chat)
                profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
