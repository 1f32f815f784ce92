"""Which pre-compiled Neuron artifacts fit this host: a key over everything that invalidates them.

Neuron compiles a model for fixed shapes on a fixed toolchain for one chip. A change to any of these makes old
artifacts unusable (or, worse, silently slow): the hardware target (neuronx-cc's --target: inf2 and trn1 have
different chips, so the same tensor-parallel degree on each needs its own graphs), the toolchain (the versions
of the compiler and the Neuron packages, read from the image that runs, not from variables someone must keep
in step with it), the model (name and revision),
the tensor-parallel degree, max_model_len, max_num_seqs, max_num_batched_tokens, the whole Neuron override
config (buckets, bucketing, quantization, on-device sampling and every other graph option), whether sampling
runs on the device at all, prefix caching and the KV block layout, the dtype,
speculative decoding (the draft model and its revision are compiled with the target), the quantized
checkpoint's revision and the compiler flags. The key is a readable prefix plus a digest of all of them in
canonical form. A compile job writes the completion manifest (`MANIFEST_NAME`) last; a host accepts an
artifact prefix only with a manifest whose key and inputs match its own.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

# The Python packages of the Neuron SDK that shape compiled graphs, as the SDK 2.28 vLLM image installs them;
# those found are part of the key. The compiler must be there: a key without it identifies nothing.
TOOLCHAIN_PACKAGES = (
    "neuronx-cc",
    "neuronx-distributed",
    "neuronx-distributed-inference",
    "torch-neuronx",
    "libneuronxla",
    "vllm-neuron",
    "vllm",
)
COMPILER_PACKAGE = "neuronx-cc"
INSTANCE_TYPE_ENV = "INSTANCE_TYPE"
# neuronx-cc's --target per instance family: the chip the graphs are compiled for (trn1n has trn1's chip).
HARDWARE_TARGETS = {"inf2": "inf2", "trn1": "trn1", "trn1n": "trn1", "trn2": "trn2", "trn2u": "trn2"}


# Variables of the container's environment that change the compiled graphs or the scheduling they are
# compiled for, beyond the engine settings (model.json and ENGINE_*): each is part of the key, so the task
# definition and the compile task must agree on all of them. DISABLE_NEURON_CUSTOM_SCHEDULER switches the
# Neuron plugin's scheduler (its batching shapes); NEURON_LOGICAL_NC_CONFIG sets how many physical cores make
# one logical NeuronCore on Trn2, which changes the graphs' sharding. NEURON_ON_DEVICE_SAMPLING_DISABLED
# drops the on-device sampling config from the model's Neuron config (vLLM's neuronx_distributed model loader
# and vllm-neuron's model runner read it), so the sampling step is or is not compiled into the graphs.
# The revisions name what was compiled.
GRAPH_VARIABLES = (
    "MODEL_ID",
    "MODEL_REVISION",
    "INSTANCE_TYPE",
    "NEURON_CC_FLAGS",
    "DISABLE_NEURON_CUSTOM_SCHEDULER",
    "NEURON_LOGICAL_NC_CONFIG",
    "QUANTIZED_CHECKPOINT_REVISION",
    "DRAFT_MODEL_REVISION",
    "NEURON_ON_DEVICE_SAMPLING_DISABLED",
)
# Keyed by their value as set (an unset variable is left out).
SCHEDULER_VARIABLES = (
    "DISABLE_NEURON_CUSTOM_SCHEDULER",
    "NEURON_LOGICAL_NC_CONFIG",
    "NEURON_ON_DEVICE_SAMPLING_DISABLED",
)
# The toolchain the kit's serving image is built on (container/Dockerfile: the base image's Neuron SDK and
# its compiler, neuronx-cc, as the SDK 2.28 release content lists it). Keys are computed with this pin, so
# `make compile` and the preflight know every fleet's key without the image; a container whose installed
# compiler or SDK differs from the pin refuses to start (pinned_toolchain), so a pin left behind an image
# update is a clear stop, not artifacts compiled for another toolchain.
SDK_VARIABLE = "NEURON_SDK_VERSION"
TOOLCHAIN_PIN = (("neuron-sdk", "2.28.0"), ("neuronx-cc", "2.23.6484.0"))


class ArtifactKeyError(ValueError):
    """An input the key needs is missing or malformed; the message names the setting."""


def pinned_toolchain(
    installed: tuple[tuple[str, str], ...],
    environ: Mapping[str, str],
    pin: tuple[tuple[str, str], ...] = TOOLCHAIN_PIN,
) -> tuple[tuple[str, str], ...]:
    """The pin, once the image is shown to carry it: its compiler installed at the pinned version and its
    Neuron SDK (the image's NEURON_SDK_VERSION) the pinned release."""
    wanted = dict(pin)
    found = dict(installed)
    problems = []
    if found.get(COMPILER_PACKAGE) != wanted[COMPILER_PACKAGE]:
        problems.append(
            f"{COMPILER_PACKAGE} {found.get(COMPILER_PACKAGE)} installed, {wanted[COMPILER_PACKAGE]} pinned"
        )
    if environ.get(SDK_VARIABLE) != wanted["neuron-sdk"]:
        problems.append(
            f"{SDK_VARIABLE}={environ.get(SDK_VARIABLE)!r}, Neuron SDK {wanted['neuron-sdk']} pinned"
        )
    if problems:
        raise ArtifactKeyError(
            "image: not the toolchain the kit keys compiled artifacts by ("
            + "; ".join(problems)
            + "); update "
            "TOOLCHAIN_PIN in entrypoint/artifact_key.py with the image, then `make compile`"
        )
    return tuple(sorted(pin))


@dataclass(frozen=True)
class CompileInputs:
    hardware_target: str
    # (package, version) pairs, sorted by package; always holds the compiler.
    toolchain: tuple[tuple[str, str], ...]
    model: str
    model_revision: str
    tensor_parallel: int
    max_model_len: int
    max_num_seqs: int
    context_buckets: tuple[int, ...]
    token_buckets: tuple[int, ...]
    dtype: str
    compiler_flags: tuple[str, ...]
    quantization: str
    speculation: str
    neuron_config: str = ""
    prefix_caching: bool = False
    block_size: int = 0
    # The scheduler's token budget per step: with chunked prefill NxD Inference compiles its prefill graphs
    # for this many tokens.
    max_num_batched_tokens: int = 0
    draft_revision: str = ""
    quantized_checkpoint_revision: str = ""
    # The SCHEDULER_VARIABLES set in the environment, as (name, value) pairs.
    scheduler: tuple[tuple[str, str], ...] = ()

    def canonical(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))


MANIFEST_NAME = "artifact-manifest.json"


def completion_manifest(inputs: CompileInputs) -> dict[str, Any]:
    """What a compile job writes last under <prefix>/<key>/: the artifacts are complete, and whose."""
    return {"key": artifact_key(inputs), "inputs": asdict(inputs)}


def check_manifest(manifest: Any, inputs: CompileInputs) -> None:
    """ArtifactKeyError unless the manifest is the completion manifest of exactly these inputs."""
    expected = completion_manifest(inputs)
    if not isinstance(manifest, dict) or manifest.get("key") != expected["key"]:
        found = manifest.get("key") if isinstance(manifest, dict) else None
        raise ArtifactKeyError(f"artifact manifest is for key {found!r}, this host needs {expected['key']}")
    if manifest.get("inputs") != json.loads(json.dumps(expected["inputs"])):
        raise ArtifactKeyError(f"artifact manifest for {expected['key']} lists other compile inputs")


def artifact_key(inputs: CompileInputs) -> str:
    """e.g. 'llama-3-8b-inf2-cc2.23.6484.0-tp24-len4096-seqs32-3f1c9a0b2d4e6f70'."""
    digest = hashlib.sha256(inputs.canonical().encode()).hexdigest()[:16]
    model_slug = re.sub(r"[^a-z0-9]+", "-", inputs.model.rsplit("/", 1)[-1].lower()).strip("-") or "model"
    compiler = dict(inputs.toolchain).get(COMPILER_PACKAGE, "")
    return (
        f"{model_slug}-{inputs.hardware_target}-cc{compiler}-tp{inputs.tensor_parallel}"
        f"-len{inputs.max_model_len}-seqs{inputs.max_num_seqs}-{digest}"
    )


def installed_toolchain(
    version_of: Callable[[str], str] = importlib.metadata.version,
) -> tuple[tuple[str, str], ...]:
    """The versions of the Neuron toolchain installed in this image, read from the packages themselves."""
    found = []
    for package in TOOLCHAIN_PACKAGES:
        try:
            found.append((package, version_of(package)))
        except importlib.metadata.PackageNotFoundError:
            continue
    if COMPILER_PACKAGE not in dict(found):
        raise ArtifactKeyError(
            f"image: {COMPILER_PACKAGE} is not installed, so the compiled artifacts cannot be keyed "
            "(run this in the serving image, whose Neuron SDK compiles and loads them)"
        )
    return tuple(sorted(found))


def hardware_target(environ: Mapping[str, str]) -> str:
    """neuronx-cc's target chip for this host, from INSTANCE_TYPE (the task definition sets it)."""
    instance_type = environ.get(INSTANCE_TYPE_ENV, "").strip()
    if not instance_type:
        raise ArtifactKeyError(
            f"environment: {INSTANCE_TYPE_ENV} must be set (the task definition sets it): compiled graphs "
            "are for one chip"
        )
    family = instance_type.split(".", 1)[0].lower()
    if family not in HARDWARE_TARGETS:
        raise ArtifactKeyError(
            f"environment: {INSTANCE_TYPE_ENV}={instance_type!r} is not a Neuron instance type "
            f"(families: {', '.join(sorted(HARDWARE_TARGETS))})"
        )
    return HARDWARE_TARGETS[family]


def _positive_int(settings: Mapping[str, Any], key: str) -> int:
    value = settings.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArtifactKeyError(f"engine setting {key}: must be a whole number of at least 1, got {value!r}")
    return value


def _buckets(neuron: Mapping[str, Any], key: str) -> tuple[int, ...]:
    value = neuron.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ArtifactKeyError(
            f"engine setting override_neuron_config.{key}: must be a list of whole numbers"
        )
    return tuple(sorted(value))


def compile_inputs(
    settings: Mapping[str, Any], environ: Mapping[str, str], toolchain: tuple[tuple[str, str], ...]
) -> CompileInputs:
    """The key inputs from the resolved engine settings, the host's environment and the image's toolchain
    (installed_toolchain())."""
    if not environ.get("MODEL_ID"):
        raise ArtifactKeyError("environment: MODEL_ID must be set")
    if COMPILER_PACKAGE not in dict(toolchain):
        raise ArtifactKeyError(f"toolchain: no {COMPILER_PACKAGE} version")
    target = hardware_target(environ)
    additional = settings.get("additional_config") or {}
    neuron = additional.get("override_neuron_config") or {}
    quantization = str(settings.get("quantization") or "")
    if neuron.get("quantized"):
        quantization = f"{neuron.get('quantization_type', '')}:{neuron.get('quantization_dtype', '')}"
    max_model_len = _positive_int(settings, "max_model_len")
    context_buckets = _buckets(neuron, "context_encoding_buckets")
    token_buckets = _buckets(neuron, "token_generation_buckets")
    for name, buckets in (
        ("context_encoding_buckets", context_buckets),
        ("token_generation_buckets", token_buckets),
    ):
        # A sequence past the largest bucket has no compiled graph: say so before an hour of compiling.
        if buckets and buckets[-1] < max_model_len:
            raise ArtifactKeyError(
                f"engine setting override_neuron_config.{name}: the largest bucket ({buckets[-1]}) is below "
                f"max_model_len ({max_model_len}); add a bucket of at least {max_model_len}"
            )
    quantized = bool(neuron.get("quantized"))
    checkpoint_revision = environ.get("QUANTIZED_CHECKPOINT_REVISION", "")
    if quantized and not checkpoint_revision:
        raise ArtifactKeyError(
            "environment: QUANTIZED_CHECKPOINT_REVISION must be set when override_neuron_config.quantized is "
            "true (the quantized checkpoint is compiled into the artifacts)"
        )
    speculation = _speculation(settings.get("speculative_config"))
    draft_revision = environ.get("DRAFT_MODEL_REVISION", "")
    if speculation and not draft_revision:
        raise ArtifactKeyError("environment: DRAFT_MODEL_REVISION must be set when speculative_config is on")
    return CompileInputs(
        hardware_target=target,
        toolchain=tuple(sorted(toolchain)),
        model=environ["MODEL_ID"],
        model_revision=environ.get("MODEL_REVISION", ""),
        tensor_parallel=_positive_int(settings, "tensor_parallel_size"),
        max_model_len=max_model_len,
        max_num_seqs=_positive_int(settings, "max_num_seqs"),
        context_buckets=context_buckets,
        token_buckets=token_buckets,
        dtype=str(settings.get("dtype", "")),
        # Flag order matters to neuronx-cc only for repeated flags; keep it as given.
        compiler_flags=tuple(environ.get("NEURON_CC_FLAGS", "").split()),
        quantization=quantization,
        speculation=speculation,
        neuron_config=json.dumps(neuron, sort_keys=True, separators=(",", ":")),
        prefix_caching=bool(settings.get("enable_prefix_caching")),
        block_size=int(settings.get("block_size") or 0),
        max_num_batched_tokens=int(settings.get("max_num_batched_tokens") or 0),
        draft_revision=draft_revision if speculation else "",
        quantized_checkpoint_revision=checkpoint_revision if quantized else "",
        scheduler=tuple((name, environ[name]) for name in SCHEDULER_VARIABLES if environ.get(name)),
    )


def _speculation(config: Any) -> str:
    """Canonical JSON of speculative_config ('' when off), so key order in the setting does not matter."""
    if config in (None, {}, ""):
        return ""
    if isinstance(config, str):  # vLLM also accepts the JSON as a string
        try:
            config = json.loads(config)
        except json.JSONDecodeError:
            raise ArtifactKeyError("engine setting speculative_config: not valid JSON") from None
    if not isinstance(config, dict):
        raise ArtifactKeyError("engine setting speculative_config: must be a JSON object")
    return json.dumps(config, sort_keys=True, separators=(",", ":"))
