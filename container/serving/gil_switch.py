"""The stub's GIL switch interval: how long a thread that wants the GIL waits before the holder must drop it.

The model's stub process runs the engine's event loop (every stream's tokens), the outbox thread (their
sends) and the prepare worker (a request's plan, retrieval and prompt) on one GIL. CPython lets a thread
that waits for the GIL wait one switch interval, then sets a drop request that the holder honours at its
next bytecode boundary (Python/ceval_gil.c, "Notes about the implementation"; sys.setswitchinterval in the
sys module's docs: "the ideal duration of the 'timeslices' allocated to concurrently running Python
threads"). At the default 5 ms, a preparation that needs 1-2 ms of CPU waited up to 5 ms for each slice the
engine loop held, and the loop up to 5 ms for the preparation: the preparation's wall time was several
times its CPU time (docs/benchmarks.md). A shorter interval hands the GIL over sooner both ways; a thread
that blocks (on a socket, a queue) still gives it up at once, whatever the interval.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from assistant.environ_number import number_from_environ

SWITCH_INTERVAL_ENV = "GIL_SWITCH_INTERVAL_MS"
# Measured with `make bench-serving` (docs/benchmarks.md, serving rounds three and six: 5 ms, 1 ms, 0.5 ms).
DEFAULT_SWITCH_INTERVAL_MS = 1.0
# Below this, forced switches cost more than the slices they share (each is a mutex and condition-variable
# hand-off); above CPython's default there is nothing to gain for a stub with several busy threads.
MIN_SWITCH_INTERVAL_MS = 0.1
MAX_SWITCH_INTERVAL_MS = 5.0


def switch_interval_ms(environ: Mapping[str, str]) -> float:
    """The interval to use, in milliseconds; ValueError naming the variable for a bad value."""
    value, raw = number_from_environ(environ, SWITCH_INTERVAL_ENV, DEFAULT_SWITCH_INTERVAL_MS, "milliseconds")
    if not MIN_SWITCH_INTERVAL_MS <= value <= MAX_SWITCH_INTERVAL_MS:
        raise ValueError(
            f"{SWITCH_INTERVAL_ENV}: must be from {MIN_SWITCH_INTERVAL_MS} to {MAX_SWITCH_INTERVAL_MS} ms, "
            f"got {raw!r}"
        )
    return value


def apply_switch_interval(environ: Mapping[str, str]) -> float:
    """Set this process's switch interval from the environment; returns it in milliseconds."""
    interval_ms = switch_interval_ms(environ)
    sys.setswitchinterval(interval_ms / 1000.0)
    return interval_ms
