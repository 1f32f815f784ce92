"""The compiled-artifact key: equal for equal configurations, different when anything that matters changes."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
from pathlib import Path

import pytest

from entrypoint.artifact_key import (
    GRAPH_VARIABLES,
    SCHEDULER_VARIABLES,
    TOOLCHAIN_PIN,
    ArtifactKeyError,
    CompileInputs,
    artifact_key,
    check_manifest,
    compile_inputs,
    completion_manifest,
    installed_toolchain,
    pinned_toolchain,
)

TOOLCHAIN = (
    ("neuronx-cc", "2.23.6484.0"),
    ("neuronx-distributed-inference", "0.7.15063"),
    ("torch-neuronx", "2.9.0.2.12.22436"),
    ("vllm", "0.13.0"),
    ("vllm-neuron", "0.3.0"),
)
BASE = CompileInputs(
    hardware_target="inf2",
    toolchain=TOOLCHAIN,
    model="meta-llama/Llama-3.1-8B-Instruct",
    model_revision="0e9e39f",
    tensor_parallel=24,
    max_model_len=4096,
    max_num_seqs=32,
    context_buckets=(512, 1024, 2048, 4096),
    token_buckets=(1024, 2048, 4096),
    dtype="bfloat16",
    compiler_flags=("--model-type=transformer", "-O1"),
    quantization="",
    speculation="",
)
CHANGES = {
    "hardware_target": "trn1",
    "toolchain": (("neuronx-cc", "2.23.6484.0"), ("neuronx-distributed-inference", "0.7.15064")),
    "model": "meta-llama/Llama-3.1-70B-Instruct",
    "model_revision": "deadbee",
    "tensor_parallel": 32,
    "max_model_len": 8192,
    "max_num_seqs": 16,
    "context_buckets": (512, 4096),
    "token_buckets": (4096,),
    "dtype": "float16",
    "compiler_flags": ("--model-type=transformer", "-O2"),
    "quantization": "per_channel_symmetric:int8",
    "speculation": '{"method":"eagle","model":"/opt/models/weights/draft","num_speculative_tokens":4}',
    "neuron_config": '{"enable_bucketing":false}',
    "prefix_caching": True,
    "block_size": 16,
    "max_num_batched_tokens": 4096,
    "draft_revision": "abc1234",
    "quantized_checkpoint_revision": "q-2026-11",
    "scheduler": (("DISABLE_NEURON_CUSTOM_SCHEDULER", "1"),),
}


def test_key_is_stable_and_readable() -> None:
    key = artifact_key(BASE)
    assert key == artifact_key(dataclasses.replace(BASE))
    assert key.startswith("llama-3-1-8b-instruct-inf2-cc2.23.6484.0-tp24-len4096-seqs32-")
    assert len(key.rsplit("-", 1)[1]) == 16


def test_every_field_is_covered_by_a_change() -> None:
    assert set(CHANGES) == {field.name for field in dataclasses.fields(CompileInputs)}


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_changing_anything_that_invalidates_artifacts_changes_the_key(field: str) -> None:
    assert artifact_key(dataclasses.replace(BASE, **{field: CHANGES[field]})) != artifact_key(BASE)


SETTINGS = {
    "model": "/opt/models/weights",
    "tensor_parallel_size": 24,
    "max_model_len": 4096,
    "max_num_seqs": 32,
    "dtype": "bfloat16",
    "additional_config": {
        "override_neuron_config": {
            "context_encoding_buckets": [4096, 512],
            "token_generation_buckets": [4096],
        }
    },
}
ENVIRON = {"INSTANCE_TYPE": "inf2.48xlarge", "MODEL_ID": "org/model"}


def inputs_of(settings: dict, environ: dict) -> CompileInputs:
    return compile_inputs(settings, environ, TOOLCHAIN)


def test_inputs_come_from_engine_settings_and_toolchain_variables() -> None:
    inputs = inputs_of(SETTINGS, {**ENVIRON, "NEURON_CC_FLAGS": "-O1  --auto-cast=none"})
    assert inputs.tensor_parallel == 24
    assert inputs.context_buckets == (512, 4096)  # order-insensitive: the compiler sorts them too
    assert inputs.compiler_flags == ("-O1", "--auto-cast=none")
    assert inputs.quantization == ""


def test_int8_weight_only_quantization_is_part_of_the_key() -> None:
    quantized = {
        **SETTINGS,
        "additional_config": {
            "override_neuron_config": {
                "quantized": True,
                "quantization_type": "per_channel_symmetric",
                "quantization_dtype": "int8",
            }
        },
    }
    environ = {**ENVIRON, "QUANTIZED_CHECKPOINT_REVISION": "q1"}
    assert inputs_of(quantized, environ).quantization == "per_channel_symmetric:int8"


def test_speculative_decoding_is_part_of_the_key_whatever_its_key_order() -> None:
    eagle = {"method": "eagle", "model": "/opt/models/weights/draft", "num_speculative_tokens": 4}
    reordered = dict(reversed(list(eagle.items())))
    environ = {**ENVIRON, "DRAFT_MODEL_REVISION": "d1"}
    plain = inputs_of({**SETTINGS, "speculative_config": None}, environ)
    with_eagle = inputs_of({**SETTINGS, "speculative_config": eagle}, environ)
    as_string = inputs_of({**SETTINGS, "speculative_config": json.dumps(reordered)}, environ)
    assert plain.speculation == ""
    assert with_eagle.speculation == as_string.speculation != ""
    assert artifact_key(with_eagle) != artifact_key(plain)


@pytest.mark.parametrize(
    ("settings", "environ", "message"),
    [
        (SETTINGS, {**ENVIRON, "MODEL_ID": ""}, "MODEL_ID must be set"),
        (SETTINGS, {"MODEL_ID": "m"}, "INSTANCE_TYPE must be set"),
        (
            SETTINGS,
            {**ENVIRON, "INSTANCE_TYPE": "m7i.4xlarge"},
            "'m7i.4xlarge' is not a Neuron instance type",
        ),
        ({**SETTINGS, "tensor_parallel_size": 0}, ENVIRON, "tensor_parallel_size: must be a whole number"),
        ({**SETTINGS, "max_num_seqs": "32"}, ENVIRON, "max_num_seqs: must be a whole number"),
        (
            {
                **SETTINGS,
                "additional_config": {"override_neuron_config": {"context_encoding_buckets": "512"}},
            },
            ENVIRON,
            "context_encoding_buckets: must be a list",
        ),
        (
            {**SETTINGS, "max_model_len": 8192},
            ENVIRON,
            r"context_encoding_buckets: the largest bucket \(4096\) is below max_model_len \(8192\)",
        ),
        ({**SETTINGS, "speculative_config": "{eagle"}, ENVIRON, "speculative_config: not valid JSON"),
        ({**SETTINGS, "speculative_config": [4]}, ENVIRON, "speculative_config: must be a JSON object"),
    ],
)
def test_bad_inputs_name_the_setting(settings, environ, message) -> None:
    with pytest.raises(ArtifactKeyError, match=message):
        inputs_of(settings, environ)


def test_any_neuron_override_changes_the_key() -> None:
    neuron = SETTINGS["additional_config"]["override_neuron_config"]
    other = {
        **SETTINGS,
        "additional_config": {"override_neuron_config": {**neuron, "sequence_parallel_enabled": True}},
    }
    assert artifact_key(inputs_of(other, ENVIRON)) != artifact_key(inputs_of(SETTINGS, ENVIRON))


def test_a_quantized_model_needs_its_checkpoint_revision() -> None:
    neuron = SETTINGS["additional_config"]["override_neuron_config"]
    quantized = {**SETTINGS, "additional_config": {"override_neuron_config": {**neuron, "quantized": True}}}
    with pytest.raises(ArtifactKeyError, match="QUANTIZED_CHECKPOINT_REVISION"):
        inputs_of(quantized, ENVIRON)
    first = inputs_of(quantized, {**ENVIRON, "QUANTIZED_CHECKPOINT_REVISION": "q1"})
    second = inputs_of(quantized, {**ENVIRON, "QUANTIZED_CHECKPOINT_REVISION": "q2"})
    assert artifact_key(first) != artifact_key(second)


def test_a_draft_model_needs_its_revision() -> None:
    eagle = {**SETTINGS, "speculative_config": {"method": "eagle", "model": "/opt/models/weights/draft"}}
    with pytest.raises(ArtifactKeyError, match="DRAFT_MODEL_REVISION"):
        inputs_of(eagle, ENVIRON)


def test_a_manifest_is_accepted_only_for_its_own_inputs() -> None:
    manifest = json.loads(json.dumps(completion_manifest(BASE)))
    check_manifest(manifest, BASE)
    with pytest.raises(ArtifactKeyError, match="this host needs"):
        check_manifest(manifest, dataclasses.replace(BASE, tensor_parallel=32))
    with pytest.raises(ArtifactKeyError, match="other compile inputs"):
        check_manifest({**manifest, "inputs": {**manifest["inputs"], "dtype": "float16"}}, BASE)


def test_inf2_and_trn1_at_the_same_tensor_parallel_degree_have_their_own_keys() -> None:
    inf2 = inputs_of(SETTINGS, {**ENVIRON, "INSTANCE_TYPE": "inf2.48xlarge"})
    trn1 = inputs_of(SETTINGS, {**ENVIRON, "INSTANCE_TYPE": "trn1.32xlarge"})
    assert inf2.tensor_parallel == trn1.tensor_parallel
    assert "-inf2-" in artifact_key(inf2) and "-trn1-" in artifact_key(trn1)
    assert artifact_key(inf2) != artifact_key(trn1)
    # One chip, one key: trn1n hosts share trn1's graphs, every inf2 size shares inf2's.
    assert inputs_of(SETTINGS, {**ENVIRON, "INSTANCE_TYPE": "trn1n.32xlarge"}) == trn1
    assert inputs_of(SETTINGS, {**ENVIRON, "INSTANCE_TYPE": "inf2.8xlarge"}) == inf2


def test_the_toolchain_is_read_from_the_installed_packages() -> None:
    installed = {"neuronx-cc": "2.23.6484.0", "torch-neuronx": "2.9.0.2.12.22436", "vllm": "0.13.0"}

    def version_of(package: str) -> str:
        if package not in installed:
            raise importlib.metadata.PackageNotFoundError(package)
        return installed[package]

    assert installed_toolchain(version_of) == tuple(sorted(installed.items()))


def test_an_image_without_the_compiler_cannot_key_artifacts() -> None:
    def nothing_installed(package: str) -> str:
        raise importlib.metadata.PackageNotFoundError(package)

    with pytest.raises(ArtifactKeyError, match="image: neuronx-cc is not installed"):
        installed_toolchain(nothing_installed)


def test_this_machine_has_no_neuron_compiler() -> None:
    """The real package lookup: without neuronx-cc here, the start refuses rather than inventing a key."""
    with pytest.raises(ArtifactKeyError, match="neuronx-cc is not installed"):
        installed_toolchain()


# A value for each graph-changing variable, and what the key's inputs need beside it to take it in.
GRAPH_VALUES = {
    "MODEL_ID": ("org/other-model", {}),
    "MODEL_REVISION": ("0e9e39f", {}),
    "INSTANCE_TYPE": ("trn1.32xlarge", {}),
    "NEURON_CC_FLAGS": ("-O2", {}),
    "DISABLE_NEURON_CUSTOM_SCHEDULER": ("1", {}),
    "NEURON_LOGICAL_NC_CONFIG": ("1", {}),
    "QUANTIZED_CHECKPOINT_REVISION": (
        "q2",
        {"additional_config": {"override_neuron_config": {"quantized": True, "quantization_type": "t"}}},
    ),
    "DRAFT_MODEL_REVISION": ("d2", {"speculative_config": {"method": "eagle"}}),
    "NEURON_ON_DEVICE_SAMPLING_DISABLED": ("1", {}),
}


def test_the_graph_variables_are_the_ones_enumerated_here():
    assert set(GRAPH_VARIABLES) == set(GRAPH_VALUES)
    assert set(SCHEDULER_VARIABLES) <= set(GRAPH_VARIABLES)


@pytest.mark.parametrize("variable", sorted(GRAPH_VALUES))
def test_every_graph_changing_variable_changes_the_key(variable):
    """MODEL_REVISION was never set by the stacks and DISABLE_NEURON_CUSTOM_SCHEDULER was not in the key:
    artifacts of another revision or scheduler were taken as this host's."""
    value, needs = GRAPH_VALUES[variable]
    settings = {**SETTINGS, **needs}
    environ = {**ENVIRON, "QUANTIZED_CHECKPOINT_REVISION": "q1", "DRAFT_MODEL_REVISION": "d1"}
    before = artifact_key(inputs_of(settings, environ))
    after = artifact_key(inputs_of(settings, {**environ, variable: value}))
    assert before != after, variable


def test_the_pin_is_used_only_when_the_image_carries_it():
    installed = (("neuronx-cc", "2.23.6484.0"), ("torch-neuronx", "2.9.0"))
    assert pinned_toolchain(installed, {"NEURON_SDK_VERSION": "2.28.0"}) == tuple(sorted(TOOLCHAIN_PIN))
    with pytest.raises(ArtifactKeyError, match=r"neuronx-cc 2\.24\.0\.0 installed, 2\.23\.6484\.0 pinned"):
        pinned_toolchain((("neuronx-cc", "2.24.0.0"),), {"NEURON_SDK_VERSION": "2.28.0"})
    with pytest.raises(ArtifactKeyError, match=r"Neuron SDK 2\.28\.0 pinned"):
        pinned_toolchain(installed, {"NEURON_SDK_VERSION": "2.29.0"})


def test_the_pin_matches_the_dockerfile():
    dockerfile = (Path(__file__).resolve().parents[3] / "container" / "Dockerfile").read_text()
    pin = dict(TOOLCHAIN_PIN)
    assert f"NEURON_SDK_VERSION={pin['neuron-sdk']}" in dockerfile
    assert f"NEURON_CC_VERSION={pin['neuronx-cc']}" in dockerfile
    assert f"sdk{pin['neuron-sdk']}" in dockerfile  # the base image's tag
