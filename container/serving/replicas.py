"""Engine replicas per host: which replica a model instance is, and which NeuronCores it may use.

A tensor-parallel degree below the host's NeuronCore count leaves cores idle unless the host runs several
engines. Each replica is one Triton model instance (its own stub process, hence its own engine), pinned to
its own core range with NEURON_RT_VISIBLE_CORES; the one Triton endpoint spreads requests over them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

REPLICAS_ENV = "REPLICAS_PER_HOST"
_INSTANCE_INDEX = re.compile(r"_(\d+)$")


class ReplicaError(ValueError):
    """A replica setting that cannot work; the message names the variable or value."""


@dataclass(frozen=True)
class ReplicaPlacement:
    index: int
    count: int
    tensor_parallel: int

    @property
    def first_core(self) -> int:
        return self.index * self.tensor_parallel

    @property
    def visible_cores(self) -> str:
        """NEURON_RT_VISIBLE_CORES for this replica: its own contiguous range."""
        last = self.first_core + self.tensor_parallel - 1
        return str(self.first_core) if last == self.first_core else f"{self.first_core}-{last}"

    def describe(self, model_name: str) -> str:
        return (
            f"{model_name}: engine replica {self.index + 1} of {self.count} "
            f"on NeuronCores {self.visible_cores} "
            f"(tensor parallel {self.tensor_parallel})"
        )


def replicas_per_host(environ: Mapping[str, str]) -> int:
    raw = environ.get(REPLICAS_ENV, "").strip() or "1"
    if not raw.isdigit() or int(raw) < 1:
        raise ReplicaError(f"{REPLICAS_ENV}: must be a whole number of at least 1, got {raw!r}")
    return int(raw)


def placement(instance_name: str, tensor_parallel: int, environ: Mapping[str, str]) -> ReplicaPlacement:
    """The replica a Triton model instance is, from its name (Triton numbers instances `<model>_<n>`)."""
    count = replicas_per_host(environ)
    match = _INSTANCE_INDEX.search(instance_name)
    index = int(match.group(1)) if match else 0
    if index >= count:
        raise ReplicaError(
            f"model instance {instance_name!r} is replica {index + 1}, but {REPLICAS_ENV} is {count}; "
            "the model's instance_group count and the variable must agree"
        )
    if tensor_parallel < 1:
        raise ReplicaError(f"tensor_parallel_size: must be at least 1, got {tensor_parallel}")
    return ReplicaPlacement(index=index, count=count, tensor_parallel=tensor_parallel)


def with_instance_count(config_text: str, count: int) -> str:
    """config.pbtxt with its instance_group count set to `count` (one instance per engine replica)."""
    pattern = re.compile(r"(instance_group\s*\[\s*\{\s*count:\s*)\d+")
    if not pattern.search(config_text):
        raise ReplicaError("config.pbtxt: no `instance_group [ { count: N ... } ]` to set the replicas in")
    return pattern.sub(lambda match: f"{match.group(1)}{count}", config_text, count=1)
