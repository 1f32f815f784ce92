"""The vLLM engine's own statistics, as its scheduler reports them after each step.

vLLM calls the stat loggers of an AsyncLLM on the engine's event loop with the scheduler's view (running and
waiting sequences, KV cache use) and each step's token counts. EngineStats keeps the latest view and running
totals; the Triton metrics and the periodic host gauge read them from there. Plain attribute writes and reads
under the GIL: one writer (the engine loop), readers that only need a recent value.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineSnapshot:
    running: int = 0
    waiting: int = 0
    kv_cache_usage: float = 0.0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0


class EngineStats:
    """Latest scheduler view and token totals of one engine; `factory` is what AsyncLLM takes."""

    def __init__(self) -> None:
        self.snapshot = EngineSnapshot()
        # When the engine last reported a step (time.monotonic()): the engine watch's sign of life.
        self.last_step = time.monotonic()

    def factory(self, vllm_config, engine_index: int = 0):
        from vllm.v1.metrics.loggers import StatLoggerBase

        stats = self

        class _Recorder(StatLoggerBase):
            def __init__(self, vllm_config, engine_index: int = 0) -> None:
                pass

            def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx: int = 0):
                stats.record(scheduler_stats, iteration_stats)

            def log_engine_initialized(self) -> None:
                pass

        return _Recorder(vllm_config, engine_index)

    def record(self, scheduler_stats, iteration_stats) -> None:
        self.last_step = time.monotonic()
        last = self.snapshot
        running, waiting, usage = last.running, last.waiting, last.kv_cache_usage
        if scheduler_stats is not None:
            running = scheduler_stats.num_running_reqs
            waiting = scheduler_stats.num_waiting_reqs
            usage = float(scheduler_stats.kv_cache_usage)
        prompt, generated = last.prompt_tokens_total, last.generation_tokens_total
        if iteration_stats is not None:
            prompt += iteration_stats.num_prompt_tokens
            generated += iteration_stats.num_generation_tokens
        self.snapshot = EngineSnapshot(running, waiting, usage, prompt, generated)

    def idle(self) -> None:
        """The engine holds no request: its last view (taken mid-batch) no longer describes it."""
        last = self.snapshot
        self.snapshot = EngineSnapshot(0, 0, 0.0, last.prompt_tokens_total, last.generation_tokens_total)
