"""What a region's traffic looks like to the simulation: token counts per request and the engine's limits.

Its own module because the inputs (which build it from a forecast and the config) and the sizing (which
simulates it) both need it, and the sizing reads the inputs: forecast -> inputs -> simulate -> plan."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from planner.simulate import Engine, LogNormal


@dataclass(frozen=True)
class Demand:
    """One region's traffic as the simulation draws it."""

    prompt: LogNormal
    output: LogNormal
    prompt_mean: float
    output_mean: float
    max_prompt: int  # the engine's context limit
    max_output: int

    @property
    def tokens_per_request(self) -> float:
        return self.prompt_mean + self.output_mean

    def prefill_mean(self, engine: Engine) -> float:
        """Prompt tokens an engine prefills per request on average: padded to its buckets, if any."""
        if not engine.prefill_buckets:
            return self.prompt_mean
        return self.prompt.padded_mean(engine.prefill_buckets, self.max_prompt)

    def full_batch_step(self, engine: Engine) -> float | None:
        """Mean decode step of a full batch on an engine with decode buckets (None without them): the
        step of the bucket its longest sequence reaches, over batches of in-flight sequences."""
        if not engine.decode_buckets:
            return None
        return _full_batch_step(self.prompt, self.output, self.max_prompt, self.max_output, engine)

    def full_batch_buckets(self, engine: Engine) -> dict[int, float]:
        """Share of full batches decoding at each decode bucket ({} without buckets)."""
        if not engine.decode_buckets:
            return {}
        index = _full_batch_bucket_index(self.prompt, self.output, self.max_prompt, self.max_output, engine)
        shares = np.bincount(index, minlength=len(engine.decode_buckets)) / len(index)
        return {bucket: float(share) for bucket, share in zip(engine.decode_buckets, shares, strict=True)}


_BATCHES = 4000  # sampled full batches: the mean step to well under 1%


@lru_cache(maxsize=256)
def _full_batch_bucket_index(
    prompt: LogNormal, output: LogNormal, max_prompt: int, max_output: int, engine: Engine
) -> np.ndarray:
    """Decode-bucket index of sampled full batches. A running batch holds a sequence for as many steps as
    it generates tokens, so its members are drawn in proportion to their output, each at a uniform point
    of its generation; fixed seed, so the same inputs give the same figure."""
    rng = np.random.default_rng(0)
    size = engine.max_num_seqs
    pool = 16 * _BATCHES
    prompts = prompt.draw(rng, pool, max_prompt)
    outputs = output.draw(rng, pool, max_output)
    members = rng.choice(pool, size=(_BATCHES, size), p=outputs / outputs.sum())
    generated = np.floor(rng.random((_BATCHES, size)) * outputs[members]).astype(np.int64) + 1
    longest = (prompts[members] + generated).max(axis=1)
    buckets = np.asarray(engine.decode_buckets)
    return np.minimum(np.searchsorted(buckets, longest, side="left"), len(buckets) - 1)


@lru_cache(maxsize=256)
def _full_batch_step(
    prompt: LogNormal, output: LogNormal, max_prompt: int, max_output: int, engine: Engine
) -> float:
    index = _full_batch_bucket_index(prompt, output, max_prompt, max_output, engine)
    steps = np.array([table[engine.max_num_seqs] for table in engine.decode_step_by_bucket])
    return float(steps[index].mean())
