"""Performance profiles: how fast one engine replica of an instance type prefills and decodes.

A profile is a small YAML file (README, "Capacity planner"); the kit ships estimates with their source in
planner/data/profiles/, and `make bench-serving` writes one from a real run that `--profile` takes instead."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.simulate import Engine
from settings.instances import INSTANCES
from settings.loader import ConfigError, load_model

SHIPPED = Path(__file__).parent / "data" / "profiles"


class Profile(BaseModel):
    # Not strict: a measured profile may come from a tool that writes batch sizes as strings.
    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: str
    source: Annotated[str, Field(min_length=1)]
    tensor_parallel: Annotated[int, Field(gt=0)]
    max_num_seqs: Annotated[int, Field(gt=0)]
    prefill_tokens_per_second: Annotated[float, Field(gt=0)]
    decode_step_ms: Annotated[
        dict[Annotated[int, Field(gt=0)], Annotated[float, Field(gt=0)]], Field(min_length=1)
    ]

    @field_validator("instance_type")
    @classmethod
    def _known_instance(cls, value: str) -> str:
        if value not in INSTANCES:
            raise ValueError(f"unknown instance type {value!r}; known: {', '.join(INSTANCES)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        cores = INSTANCES[self.instance_type].neuron_cores
        if cores % self.tensor_parallel:
            raise ValueError(
                f"tensor_parallel {self.tensor_parallel} does not divide the {cores} NeuronCores"
            )
        steps = [self.decode_step_ms[batch] for batch in sorted(self.decode_step_ms)]
        if any(later < earlier for earlier, later in itertools.pairwise(steps)):
            raise ValueError("decode_step_ms must not fall as the batch grows")
        return self

    @property
    def engine_replicas(self) -> int:
        return INSTANCES[self.instance_type].neuron_cores // self.tensor_parallel

    def step_ms(self, batch: int) -> float:
        """Linear between measured batch sizes; beyond the last one, the last segment's slope continues."""
        points = sorted(self.decode_step_ms.items())
        if len(points) == 1 or batch <= points[0][0]:
            return points[0][1]
        for (b0, s0), (b1, s1) in itertools.pairwise(points):
            if batch <= b1:
                return s0 + (s1 - s0) * (batch - b0) / (b1 - b0)
        (b0, s0), (b1, s1) = points[-2], points[-1]
        return s1 + (s1 - s0) * (batch - b1) / (b1 - b0)

    def engine(self, max_num_seqs: int) -> Engine:
        """The replica as the simulation sees it, at the batch limit the deployed engine runs with."""
        steps = tuple(self.step_ms(batch) / 1000 for batch in range(1, max_num_seqs + 1))
        return Engine(self.prefill_tokens_per_second, (0.0, *steps))


ProfileKey = tuple[str, int]  # (instance type, tensor parallel degree)


def load_profiles(extra: Iterable[str | Path] = (), directory: Path = SHIPPED) -> dict[ProfileKey, Profile]:
    """The shipped profiles, each replaced by a given file for the same instance type and TP degree."""
    profiles: dict[ProfileKey, Profile] = {}
    for path in [*sorted(directory.glob("*.yaml")), *map(Path, extra)]:
        profile, _ = load_model(path, Profile)
        profiles[(profile.instance_type, profile.tensor_parallel)] = profile
    if not profiles:
        raise ConfigError(f"{directory}: no performance profiles")
    return profiles
