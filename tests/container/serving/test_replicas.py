"""Which replica a model instance is, its cores, and the config rewrite that makes the instances."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving.replicas import REPLICAS_ENV, ReplicaError, placement, with_instance_count


@pytest.mark.parametrize(
    ("instance", "replicas", "tensor_parallel", "cores"),
    [
        ("assistant_0_0", 3, 8, "0-7"),
        ("assistant_0_1", 3, 8, "8-15"),
        ("assistant_0_2", 3, 8, "16-23"),
        ("assistant_0_3", 4, 8, "24-31"),
        ("passthrough_0_1", 2, 1, "1"),
    ],
)
def test_each_replica_gets_its_own_core_range(
    instance: str, replicas: int, tensor_parallel: int, cores: str
) -> None:
    assert placement(instance, tensor_parallel, {REPLICAS_ENV: str(replicas)}).visible_cores == cores


@given(replicas=st.integers(1, 8), tensor_parallel=st.integers(1, 32))
def test_replicas_never_share_a_core(replicas: int, tensor_parallel: int) -> None:
    environ = {REPLICAS_ENV: str(replicas)}
    ranges = []
    for index in range(replicas):
        replica = placement(f"m_0_{index}", tensor_parallel, environ)
        ranges.append(set(range(replica.first_core, replica.first_core + tensor_parallel)))
    assert sum(len(cores) for cores in ranges) == len(set().union(*ranges)) == replicas * tensor_parallel


@pytest.mark.parametrize(
    ("instance", "environ", "message"),
    [
        ("m_0_2", {REPLICAS_ENV: "2"}, "instance_group count and the variable must agree"),
        ("m_0_0", {REPLICAS_ENV: "two"}, "must be a whole number"),
        ("m_0_0", {REPLICAS_ENV: "0"}, "must be a whole number of at least 1"),
    ],
)
def test_a_replica_setting_that_cannot_work_is_named(instance: str, environ: dict, message: str) -> None:
    with pytest.raises(ReplicaError, match=message):
        placement(instance, 8, environ)


def test_the_instance_count_is_written_into_the_config() -> None:
    config = 'name: "a"\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n'
    assert with_instance_count(config, 4) == 'name: "a"\ninstance_group [ { count: 4 kind: KIND_CPU } ]\n'
    with pytest.raises(ReplicaError, match="instance_group"):
        with_instance_count('name: "a"\n', 2)
