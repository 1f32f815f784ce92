"""The compiled-artifact key: equal for equal configurations, different when anything that matters changes."""

from __future__ import annotations

import dataclasses
import json

import pytest

from entrypoint.artifact_key import (
    ArtifactKeyError,
    CompileInputs,
    artifact_key,
    check_manifest,
    compile_inputs,
    completion_manifest,
)

BASE = CompileInputs(
    neuron_sdk="2.28.0",
    compiler_version="2.23.6484.0",
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
    "neuron_sdk": "2.27.1",
    "compiler_version": "2.23.6485.0",
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
    "draft_revision": "abc1234",
    "quantized_checkpoint_revision": "q-2026-11",
}


def test_key_is_stable_and_readable() -> None:
    key = artifact_key(BASE)
    assert key == artifact_key(dataclasses.replace(BASE))
    assert key.startswith("llama-3-1-8b-instruct-sdk2.28.0-tp24-len4096-seqs32-")
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
ENVIRON = {"NEURON_SDK_VERSION": "2.28.0", "NEURON_CC_VERSION": "2.23.6484.0", "MODEL_ID": "org/model"}


def test_inputs_come_from_engine_settings_and_toolchain_variables() -> None:
    inputs = compile_inputs(SETTINGS, {**ENVIRON, "NEURON_CC_FLAGS": "-O1  --auto-cast=none"})
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
    assert compile_inputs(quantized, environ).quantization == "per_channel_symmetric:int8"


def test_speculative_decoding_is_part_of_the_key_whatever_its_key_order() -> None:
    eagle = {"method": "eagle", "model": "/opt/models/weights/draft", "num_speculative_tokens": 4}
    reordered = dict(reversed(list(eagle.items())))
    environ = {**ENVIRON, "DRAFT_MODEL_REVISION": "d1"}
    plain = compile_inputs({**SETTINGS, "speculative_config": None}, environ)
    with_eagle = compile_inputs({**SETTINGS, "speculative_config": eagle}, environ)
    as_string = compile_inputs({**SETTINGS, "speculative_config": json.dumps(reordered)}, environ)
    assert plain.speculation == ""
    assert with_eagle.speculation == as_string.speculation != ""
    assert artifact_key(with_eagle) != artifact_key(plain)


@pytest.mark.parametrize(
    ("settings", "environ", "message"),
    [
        (SETTINGS, {**ENVIRON, "MODEL_ID": ""}, "MODEL_ID must be set"),
        (SETTINGS, {"MODEL_ID": "m"}, "NEURON_SDK_VERSION, NEURON_CC_VERSION must be set"),
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
        compile_inputs(settings, environ)


def test_any_neuron_override_changes_the_key() -> None:
    neuron = SETTINGS["additional_config"]["override_neuron_config"]
    other = {
        **SETTINGS,
        "additional_config": {"override_neuron_config": {**neuron, "sequence_parallel_enabled": True}},
    }
    assert artifact_key(compile_inputs(other, ENVIRON)) != artifact_key(compile_inputs(SETTINGS, ENVIRON))


def test_a_quantized_model_needs_its_checkpoint_revision() -> None:
    neuron = SETTINGS["additional_config"]["override_neuron_config"]
    quantized = {**SETTINGS, "additional_config": {"override_neuron_config": {**neuron, "quantized": True}}}
    with pytest.raises(ArtifactKeyError, match="QUANTIZED_CHECKPOINT_REVISION"):
        compile_inputs(quantized, ENVIRON)
    first = compile_inputs(quantized, {**ENVIRON, "QUANTIZED_CHECKPOINT_REVISION": "q1"})
    second = compile_inputs(quantized, {**ENVIRON, "QUANTIZED_CHECKPOINT_REVISION": "q2"})
    assert artifact_key(first) != artifact_key(second)


def test_a_draft_model_needs_its_revision() -> None:
    eagle = {**SETTINGS, "speculative_config": {"method": "eagle", "model": "/opt/models/weights/draft"}}
    with pytest.raises(ArtifactKeyError, match="DRAFT_MODEL_REVISION"):
        compile_inputs(eagle, ENVIRON)


def test_a_manifest_is_accepted_only_for_its_own_inputs() -> None:
    manifest = json.loads(json.dumps(completion_manifest(BASE)))
    check_manifest(manifest, BASE)
    with pytest.raises(ArtifactKeyError, match="this host needs"):
        check_manifest(manifest, dataclasses.replace(BASE, tensor_parallel=32))
    with pytest.raises(ArtifactKeyError, match="other compile inputs"):
        check_manifest({**manifest, "inputs": {**manifest["inputs"], "dtype": "float16"}}, BASE)
