"""The instance catalog: one source of device and core facts for config, stacks and planner."""

import pytest

from settings.instances import INSTANCES, NeuronFamily


@pytest.mark.parametrize(
    ("name", "devices", "cores"),
    [
        ("inf2.8xlarge", 1, 2),
        ("inf2.24xlarge", 6, 12),
        ("inf2.48xlarge", 12, 24),
        ("trn1.2xlarge", 1, 2),
        ("trn1.32xlarge", 16, 32),
        ("trn2.48xlarge", 16, 64),
    ],
)
def test_catalog_matches_documented_devices_and_cores(name: str, devices: int, cores: int) -> None:
    facts = INSTANCES[name]
    assert (facts.neuron_devices, facts.neuron_cores) == (devices, cores)
    assert facts.device_paths == tuple(f"/dev/neuron{i}" for i in range(devices))
    assert facts.family == NeuronFamily(name.split(".")[0])


def test_tensor_parallel_degrees_are_the_divisors_of_the_cores() -> None:
    assert INSTANCES["inf2.48xlarge"].tensor_parallel_degrees() == (1, 2, 3, 4, 6, 8, 12, 24)
    assert INSTANCES["trn1.32xlarge"].tensor_parallel_degrees() == (1, 2, 4, 8, 16, 32)


def test_only_trainium_has_instance_store() -> None:
    assert {name for name, facts in INSTANCES.items() if facts.has_instance_store} == {
        "trn1.2xlarge",
        "trn1.32xlarge",
        "trn2.48xlarge",
    }
