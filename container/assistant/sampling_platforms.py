"""Which sampling keys each engine platform honours: a key the platform would silently ignore is refused.

vllm-neuron samples on the device by default (its model loader builds `OnDeviceSamplingConfig(dynamic=True,
deterministic=False)`), and the on-device sampler receives only temperature, top_p and top_k per request,
with top_k capped at 256 (vllm-project/vllm-neuron, vllm_neuron/worker/neuronx_distributed_model_runner.py,
`get_nxd_sampling_params` and `_MAX_NEURON_SAMPLING_TOP_K`). vLLM's own sampler, where min_p, the penalties,
the seed and min_tokens live (min_tokens is a logits processor: vllm/v1/sample/logits_processor/builtin.py),
never runs there. What works outside the sampler works on both: max_tokens, stop strings and stop tokens
(the scheduler and detokenizer), n. With NEURON_ON_DEVICE_SAMPLING_DISABLED=1 vllm-neuron samples on the
CPU with vLLM's sampler, and every key works again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PLATFORM_ENV = "SAMPLING_PLATFORM"
NEURON_CPU_SAMPLING_ENV = "NEURON_ON_DEVICE_SAMPLING_DISABLED"
# Values that leave a key's effect off: a client may send them on any platform.
_NEUTRAL_VALUES: dict[str, tuple[Any, ...]] = {
    "min_p": (0, 0.0),
    "presence_penalty": (0, 0.0),
    "frequency_penalty": (0, 0.0),
    "repetition_penalty": (1, 1.0),
    "min_tokens": (0,),
    "top_k": (0, -1),
}


@dataclass(frozen=True)
class SamplingPlatform:
    name: str
    # Keys the platform honours; None: every key vLLM has.
    honoured: frozenset[str] | None = None
    max_top_k: int | None = None
    why: str = ""

    def refusal(self, sampling: Mapping[str, Any]) -> tuple[str, str] | None:
        """(key, reason) for the first key this platform would ignore or clamp, None if all are honoured."""
        for key, value in sampling.items():
            if value is None or value in _NEUTRAL_VALUES.get(key, ()):
                continue
            if self.honoured is not None and key not in self.honoured:
                return key, f"not supported on {self.name} ({self.why}); leave it out"
            if key == "top_k" and self.max_top_k is not None and value > self.max_top_k:
                return key, f"must be at most {self.max_top_k} on {self.name} ({self.why}), got {value}"
        return None


CPU = SamplingPlatform("cpu")
NEURON = SamplingPlatform(
    "neuron",
    honoured=frozenset(
        {
            "max_tokens",
            "temperature",
            "top_p",
            "top_k",
            "stop",
            "stop_token_ids",
            "ignore_eos",
            "n",
            "detokenize",
            "skip_special_tokens",
            "spaces_between_special_tokens",
            "include_stop_str_in_output",
        }
    ),
    max_top_k=256,
    why="vllm-neuron's on-device sampling uses only temperature, top_p and top_k up to 256",
)
PLATFORMS = {platform.name: platform for platform in (CPU, NEURON)}


def resolve_platform(environ: Mapping[str, str], engine_platform: str) -> SamplingPlatform:
    """The platform from SAMPLING_PLATFORM, else from the engine: `engine_platform` is the module of vLLM's
    active platform class (vllm-neuron's reports device_type "cpu": the module tells them apart)."""
    chosen = environ.get(PLATFORM_ENV, "").strip().lower()
    if chosen:
        if chosen not in PLATFORMS:
            raise ValueError(f"{PLATFORM_ENV}: must be one of {', '.join(PLATFORMS)}, got {chosen!r}")
        return PLATFORMS[chosen]
    cpu_sampling = neuron_cpu_sampling(environ)
    on_neuron = engine_platform.startswith("vllm_neuron")
    return NEURON if on_neuron and not cpu_sampling else CPU


def neuron_cpu_sampling(environ: Mapping[str, str]) -> bool:
    """NEURON_ON_DEVICE_SAMPLING_DISABLED as vllm-neuron reads it: `bool(int(value))` (vllm_neuron/worker/
    neuronx_distributed_model_runner.py), so any whole number other than 0 means CPU sampling and anything
    else ("true") crashes vllm-neuron while it loads the model, minutes into a start: refused here first."""
    raw = environ.get(NEURON_CPU_SAMPLING_ENV, "").strip()
    if not raw:
        return False
    try:
        return int(raw) != 0
    except ValueError:
        raise ValueError(
            f"{NEURON_CPU_SAMPLING_ENV}: must be 1 (sample on the CPU) or 0 (on the device): vllm-neuron "
            f"reads it as a number, got {raw!r}"
        ) from None


def active_engine_platform() -> str:
    """The module of vLLM's current platform class (imports vLLM)."""
    from vllm.platforms import current_platform

    return type(current_platform).__module__
