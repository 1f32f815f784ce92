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


def test_regions_agree_with_the_aws_price_list_bundled_in_cfn_lint() -> None:
    """The catalog's regions are a snapshot: a cfn-lint upgrade with newer AWS data fails here first."""
    import json
    from pathlib import Path

    from cfnlint.data.schemas.extensions import aws_ec2_instance

    from settings.regions import KNOWN_REGIONS

    enum_file = Path(aws_ec2_instance.__file__).with_name("instancetype_enum.json")
    by_region = json.loads(enum_file.read_text())
    for name, facts in INSTANCES.items():
        price_list = {
            region for region, types in by_region.items() if region in KNOWN_REGIONS and name in types["enum"]
        }
        assert facts.regions == price_list, name


def test_offered_in_tells_where_hosts_can_launch() -> None:
    assert INSTANCES["trn1.32xlarge"].offered_in("us-west-2")
    assert not INSTANCES["trn1.32xlarge"].offered_in("eu-west-1")
    assert INSTANCES["inf2.48xlarge"].offered_in("eu-west-1")
