"""What a region's traffic looks like to the simulation: token counts per request and the engine's limits.

Its own module because the inputs (which build it from a forecast and the config) and the sizing (which
simulates it) both need it, and the sizing reads the inputs: forecast -> inputs -> simulate -> plan."""

from __future__ import annotations

from dataclasses import dataclass

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
