"""Every scheduler- and graph-changing input reaches the compiled-artifact key as `make compile` and the hosts
compute it: the shipped model.json, the environment the task definition sets (stacks/props.py and the fleet's
task definition) with one input changed the way an operator would change it, and the kit's toolchain pin.
An input that did not change the key would let a host load graphs compiled for another configuration.

A guard beside it: every engine setting the shipped model.json holds, and every key of its Neuron override
config, either changes the key or is named below as not shaping the graphs, so a setting added to
model.json must be classified before it ships."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ops.compile import MODEL_JSON, task_environment
from settings import load_settings

REPO = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO / "container"))

from entrypoint.artifact_key import TOOLCHAIN_PIN, artifact_key, compile_inputs  # noqa: E402
from serving.engine_settings import engine_settings  # noqa: E402

SETTINGS = load_settings(REPO / "config" / "prime-day.yaml")
REGION = "us-east-1"
FLEET = SETTINGS.regions[REGION].fleets[0]
ENVIRON = task_environment(SETTINGS, REGION, FLEET)
PIN = tuple(sorted(TOOLCHAIN_PIN))
NEURON = json.loads(MODEL_JSON.read_text())["additional_config"]["override_neuron_config"]


def neuron_config(**changes) -> str:
    return json.dumps({"override_neuron_config": {**NEURON, **changes}})


QUANTIZED = {"ENGINE_ADDITIONAL_CONFIG": neuron_config(quantized=True), "QUANTIZED_CHECKPOINT_REVISION": "q1"}


def speculative(tokens: int) -> str:
    return json.dumps({"method": "eagle", "model": "/opt/models/draft", "num_speculative_tokens": tokens})


SPECULATIVE = {"ENGINE_SPECULATIVE_CONFIG": speculative(4), "DRAFT_MODEL_REVISION": "d1"}

# (what changes, the environment it starts from, the change): each as the task definition would carry it.
CHANGES = {
    "model id": ({}, {"MODEL_ID": "meta-llama/Llama-3.1-70B-Instruct"}),
    "model revision": ({}, {"MODEL_REVISION": "0e9e39f"}),
    "hardware target": ({}, {"INSTANCE_TYPE": "trn1.32xlarge"}),
    "tensor-parallel degree": ({}, {"ENGINE_TENSOR_PARALLEL_SIZE": "16"}),
    "batch (max_num_seqs)": ({}, {"ENGINE_MAX_NUM_SEQS": "16"}),
    "sequence length (max_model_len)": ({}, {"ENGINE_MAX_MODEL_LEN": "4096"}),
    "scheduler token budget (max_num_batched_tokens)": ({}, {"ENGINE_MAX_NUM_BATCHED_TOKENS": "4096"}),
    "dtype": ({}, {"ENGINE_DTYPE": "float16"}),
    "KV block size": ({}, {"ENGINE_BLOCK_SIZE": "16"}),
    "prefix caching": ({}, {"ENGINE_ENABLE_PREFIX_CACHING": "true"}),
    "context-encoding buckets": (
        {},
        {"ENGINE_ADDITIONAL_CONFIG": neuron_config(context_encoding_buckets=[1024, 8192])},
    ),
    "token-generation buckets": (
        {},
        {"ENGINE_ADDITIONAL_CONFIG": neuron_config(token_generation_buckets=[2048, 8192])},
    ),
    "bucketing on/off": ({}, {"ENGINE_ADDITIONAL_CONFIG": neuron_config(enable_bucketing=False)}),
    "quantisation on": ({}, QUANTIZED),
    "quantisation dtype": (
        QUANTIZED,
        {"ENGINE_ADDITIONAL_CONFIG": neuron_config(quantized=True, quantization_dtype="f8e4m3")},
    ),
    "quantised checkpoint revision": (QUANTIZED, {"QUANTIZED_CHECKPOINT_REVISION": "q2"}),
    "on-device sampling config": (
        {},
        {"ENGINE_ADDITIONAL_CONFIG": neuron_config(on_device_sampling_config={"global_topk": 64})},
    ),
    "on-device sampling disabled": ({}, {"NEURON_ON_DEVICE_SAMPLING_DISABLED": "1"}),
    "speculative decoding on": ({}, SPECULATIVE),
    "speculative token count": (
        SPECULATIVE,
        {"ENGINE_SPECULATIVE_CONFIG": speculative(5)},
    ),
    "draft model revision": (SPECULATIVE, {"DRAFT_MODEL_REVISION": "d2"}),
    "compiler flags": ({}, {"NEURON_CC_FLAGS": "-O2"}),
    "Neuron custom scheduler off": ({}, {"DISABLE_NEURON_CUSTOM_SCHEDULER": "1"}),
    "logical NeuronCore config": ({}, {"NEURON_LOGICAL_NC_CONFIG": "2"}),
}
# The toolchain: the pin the image is checked against (artifact_key.pinned_toolchain).
TOOLCHAIN_CHANGES = {
    "Neuron SDK version": ("neuron-sdk", "2.29.0"),
    "compiler (neuronx-cc) version": ("neuronx-cc", "2.24.0.0"),
}

# model.json settings that do not shape the compiled graphs, and why.
NOT_GRAPH_SETTINGS = {
    "_notes": "documentation, never reaches the engine",
    "model": "the weights' local path, the same on every host (the weights are keyed by MODEL_ID/revision)",
    "tokenizer": "the tokenizer's local path (tokenization is on the CPU)",
    "disable_log_stats": "logging only",
}


def key_of(environ: dict[str, str], toolchain=PIN) -> str:
    return artifact_key(compile_inputs(engine_settings(MODEL_JSON, environ), environ, toolchain))


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_each_scheduler_and_graph_input_changes_the_key(change):
    base, changed = CHANGES[change]
    before = {**ENVIRON, **base}
    assert key_of(before) != key_of({**before, **changed}), change


@pytest.mark.parametrize("change", sorted(TOOLCHAIN_CHANGES))
def test_the_toolchain_changes_the_key(change):
    package, version = TOOLCHAIN_CHANGES[change]
    assert key_of(ENVIRON) != key_of(ENVIRON, tuple(sorted({**dict(PIN), package: version}.items())))


def _altered(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value // 2  # smaller: a larger length would outgrow the buckets
    if isinstance(value, list):
        return [*value, 16384]
    if value is None:
        return {"method": "eagle", "model": "/opt/models/draft", "num_speculative_tokens": 2}
    return f"{value}-other"


def test_every_engine_setting_of_the_shipped_model_json_is_keyed_or_named_as_not_shaping_graphs():
    shipped = json.loads(MODEL_JSON.read_text())
    environ = {**ENVIRON, "DRAFT_MODEL_REVISION": "d1"}
    effective = engine_settings(MODEL_JSON, environ)  # model.json with the task definition's ENGINE_*
    unkeyed = []
    for name in shipped:
        if name in NOT_GRAPH_SETTINGS or name == "additional_config":
            continue
        value = effective[name]
        variable = f"ENGINE_{name.upper()}"
        changed = json.dumps(_altered(value)) if not isinstance(value, str) else _altered(value)
        if key_of(environ) == key_of({**environ, variable: changed}):
            unkeyed.append(name)
    for name, value in NEURON.items():
        changed = neuron_config(**{name: _altered(value)})
        base = {**environ, "QUANTIZED_CHECKPOINT_REVISION": "q1"}
        if key_of(base) == key_of({**base, "ENGINE_ADDITIONAL_CONFIG": changed}):
            unkeyed.append(f"override_neuron_config.{name}")
    assert unkeyed == []


def test_a_config_level_change_reaches_every_fleets_key(tmp_path):
    """The config's model section reaches the key through the stacks' environment, for every fleet."""
    from ops.compile import fleet_artifacts

    before = {(a.region, a.instance_type): a.key for a in fleet_artifacts(SETTINGS)}
    for change in ("revision: 0e9e39f", "max_model_len: 4096", "max_num_seqs: 16"):
        path = tmp_path / "changed.yaml"
        path.write_text(f"base: {REPO / 'config' / 'prime-day.yaml'}\nmodel: {{{change}}}\n")
        after = {(a.region, a.instance_type): a.key for a in fleet_artifacts(load_settings(path))}
        assert set(after) == set(before)
        assert all(after[fleet] != before[fleet] for fleet in before), change
