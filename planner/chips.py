"""Neuron chips as the planner scales profiles by them: NeuronCores, memory, compute and memory bandwidth.

Inferentia2 and Trainium1 are built on the same NeuronCore-v2: two cores, 32 GiB of HBM at 820 GB/s and
190 TFLOPS of BF16 per chip (AWS product pages for Inf2 and Trn1; Neuron documentation, "Inferentia2
Architecture" and "Trainium Architecture"). A replica on four chips of either runs at the same speed; the
"inf2 is 20% slower" often quoted compared an engine on 12 inf2 chips (TP 24) with one on 16 trn1 chips
(TP 32). Trainium2 is a newer chip: 8 NeuronCore-v3 shown as 4 logical cores (LNC=2), 96 GiB of HBM at
2.9 TB/s and 667 TFLOPS of dense BF16 (AWS Trainium product page)."""

from __future__ import annotations

from dataclasses import dataclass

from settings.instances import INSTANCES, NeuronFamily


@dataclass(frozen=True)
class Chip:
    name: str
    generation: str  # chips of one generation run a replica at one speed per chip
    cores: int  # NeuronCores per chip as the catalog counts them (tensor_parallel counts these)
    hbm_gib: float
    hbm_tb_per_second: float
    bf16_tflops: float


NEURONCORE_V2 = "NeuronCore-v2"
CHIPS = {
    NeuronFamily.INF2: Chip("Inferentia2", NEURONCORE_V2, 2, 32, 0.82, 190),
    NeuronFamily.TRN1: Chip("Trainium", NEURONCORE_V2, 2, 32, 0.82, 190),
    NeuronFamily.TRN2: Chip("Trainium2", "NeuronCore-v3", 4, 96, 2.9, 667),
}


def chip_of(instance_type: str) -> Chip:
    return CHIPS[INSTANCES[instance_type].family]


def chips_per_replica(instance_type: str, tensor_parallel: int) -> float:
    """Chips one engine replica spans (a fraction when it uses one core of a two-core chip)."""
    return tensor_parallel / chip_of(instance_type).cores
