"""The stub's start-up heap, frozen for the garbage collector once the model has loaded.

A model process holds vLLM, torch, transformers and the tokenizer: about 600,000 objects the cyclic garbage
collector tracks, none of which ever becomes garbage. CPython's oldest-generation collection walks all of
them, holding the GIL throughout, and the engine loop (every stream's tokens), the outbox (their sends) and
the prepare worker all wait: measured in a process with the stub's imports and the demo catalog and
tokenizer loaded, one full collection took 2.6-2.8 s on the shared 2-core machine (load average 21-23),
and 0.0 ms once the heap was frozen (docs/benchmarks.md). One such collection while streams run is a p99
first token and a dip in tokens/s.

`gc.freeze()` moves every tracked object to a permanent generation that collections skip ("useful ... to
avoid the overhead of collecting objects created at start-up"; the gc module's docs). vLLM freezes its own
API server's and engine core's start-up heaps for the same reason (vllm/utils/gc_utils.py,
`freeze_gc_heap`, called after start-up in vllm/v1/engine/core.py and in the OpenAI server:
vllm/entrypoints/openai/api_server.py in 0.13, vllm/entrypoints/launchers/utils/server_utils.py in 0.32:
"Reduces pause times of oldest generation collections"); the Triton stub hosts AsyncLLM in place of that
API server, so vLLM's call never reaches it. Frozen objects are still freed by reference counting (a
swapped-out catalog index goes when its last reference does); only cycles among them would stay, and
start-up objects are kept for the process's life anyway.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Freeze every object the collector tracks now; returns how many are frozen.

    No collection first (vLLM's freeze_gc_heap collects every generation before it freezes): with one inside
    the model's initialize(), Triton 2.51 never saw the load finish. Both stubs printed the freeze, sat idle
    in their command loop, and Triton waited in its stub launcher for 15 minutes (bench-serving; gdb on both
    processes). Why was not found in the time there was; a collection runs the finalizers of whatever start-up
    left in cycles, inside the stub's initialize. Freezing without collecting keeps that garbage (start-up's,
    once) and runs no finalizer. Even so, frozen at the end of initialize() a server of two models (the
    assistant and the pass-through) never saw the second's load finish, in every such server of a CI run and
    again here; the same server loads at once without the freeze. So the model freezes at its first request
    (StreamingModel.execute), with the load long finished."""
    gc.freeze()
    return gc.get_freeze_count()
