"""Facts about the Neuron instance types the kit can run on: the one catalog that config validation,
stacks and the capacity planner all read."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class NeuronFamily(StrEnum):
    INF2 = "inf2"
    TRN1 = "trn1"
    TRN2 = "trn2"


@dataclass(frozen=True)
class InstanceFacts:
    name: str
    family: NeuronFamily
    vcpus: int
    memory_gib: int
    neuron_devices: int
    neuron_cores: int
    instance_store_gib: int  # 0: EBS only, weights and compiled artifacts go on a data volume instead
    regions: frozenset[str] = frozenset()  # where EC2 offers the type (the *_REGIONS sets below)
    # EC2 Capacity Blocks for ML can hold this type (EC2 user guide, Capacity Blocks prerequisites).
    capacity_block: bool = False

    def offered_in(self, region: str) -> bool:
        return region in self.regions

    @property
    def device_paths(self) -> tuple[str, ...]:
        """ECS on EC2 cannot allocate Neuron devices, so a task lists every one it needs."""
        return tuple(f"/dev/neuron{index}" for index in range(self.neuron_devices))

    @property
    def on_demand_vcpu_quota(self) -> str:
        """The Service Quotas code of the account's On-Demand vCPU limit that counts this type's hosts."""
        return ON_DEMAND_VCPU_QUOTAS[self.family]

    @property
    def has_instance_store(self) -> bool:
        return self.instance_store_gib > 0

    def tensor_parallel_degrees(self) -> tuple[int, ...]:
        """Degrees that use the host's NeuronCores in whole model replicas."""
        return tuple(d for d in range(1, self.neuron_cores + 1) if self.neuron_cores % d == 0)


# Service Quotas codes (service ec2): "Running On-Demand Inf instances" and "Running On-Demand Trn instances",
# both counted in vCPUs; trn1 and trn2 share one.
ON_DEMAND_VCPU_QUOTAS = {
    NeuronFamily.INF2: "L-1945791B",
    NeuronFamily.TRN1: "L-2C3B7624",
    NeuronFamily.TRN2: "L-2C3B7624",
}
QUOTA_NAMES = {"L-1945791B": "On-Demand Inf vCPUs", "L-2C3B7624": "On-Demand Trn vCPUs"}

# Regions where EC2 offers each type, from the AWS price list as bundled with cfn-lint 1.58 (its
# instance-type data); tests/settings/test_instances.py fails when a cfn-lint upgrade disagrees.
# AWS adds regions over time: a fleet outside this list is a warning, an error only for `make deploy`.
_INF2_REGIONS = frozenset(
    {
        "us-east-1",
        "us-east-2",
        "us-west-2",
        "sa-east-1",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "eu-central-1",
        "eu-north-1",
        "ap-south-1",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-northeast-1",
    }
)
_TRN1_REGIONS = frozenset({"us-east-1", "us-east-2", "us-west-2"})
_TRN2_REGIONS = frozenset({"us-east-2", "ap-south-2"})

# vCPU, memory, devices and instance store from the EC2 instance type pages; NeuronCores are 2 per
# device on inf2/trn1 and 4 logical per device on trn2 with the default logical NeuronCore config (LNC=2).
INSTANCES: dict[str, InstanceFacts] = {
    facts.name: facts
    for facts in (
        InstanceFacts("inf2.8xlarge", NeuronFamily.INF2, 32, 128, 1, 2, 0, _INF2_REGIONS),
        InstanceFacts("inf2.24xlarge", NeuronFamily.INF2, 96, 384, 6, 12, 0, _INF2_REGIONS),
        InstanceFacts("inf2.48xlarge", NeuronFamily.INF2, 192, 768, 12, 24, 0, _INF2_REGIONS),
        InstanceFacts("trn1.2xlarge", NeuronFamily.TRN1, 8, 32, 1, 2, 474, _TRN1_REGIONS),
        InstanceFacts("trn1.32xlarge", NeuronFamily.TRN1, 128, 512, 16, 32, 7600, _TRN1_REGIONS, True),
        InstanceFacts("trn2.48xlarge", NeuronFamily.TRN2, 192, 2048, 16, 64, 7600, _TRN2_REGIONS, True),
    )
}


def capacity_block_types() -> tuple[str, ...]:
    """The catalog's types a Capacity Block can hold (inf2 cannot)."""
    return tuple(name for name, facts in INSTANCES.items() if facts.capacity_block)
