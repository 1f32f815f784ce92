"""Performance profiles: how fast one engine replica of an instance type prefills and decodes.

A profile is a small YAML file (docs/planner.md); the kit ships one per instance type it plans, in
planner/data/profiles/, each citing where its speed comes from (`citation`: a published benchmark, its
figures and the fit from them, or an estimate and why). `make bench-serving PROFILE_OUT=file` writes
one from a real run that `make plan PROFILE=file` (`--profile`) takes instead. A type or TP degree with
no file gets a profile derived per chip from a shipped one (planner/chips.py), marked as derived and
given a wider range.

Beyond the measured speeds a profile carries: a low/high range of its throughput (estimates are not
points), optional speculative decoding (draft acceptance -> decode speed-up) and the memory facts that
cap the sequences a replica can hold in its KV cache."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.chips import chip_of, chips_per_replica
from planner.simulate import Engine
from settings.instances import INSTANCES
from settings.loader import ConfigError, load_model

SHIPPED = Path(__file__).parent / "data" / "profiles"


class ThroughputRange(BaseModel):
    """How far the true throughput may lie from the profile's figures: prefill tokens/s are multiplied and
    decode step times divided by `low` for the pessimistic plan and by `high` for the optimistic one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    low: Annotated[float, Field(gt=0, le=1)] = 1.0
    high: Annotated[float, Field(ge=1)] = 1.0


class Speculative(BaseModel):
    """Speculative decoding (a draft model or heads propose tokens the model verifies in one step).

    With `draft_tokens` k proposed per step and each accepted with probability `acceptance` a, a step
    yields (1 - a^(k+1)) / (1 - a) tokens on average (Leviathan et al. 2023, "Fast Inference from
    Transformers via Speculative Decoding", eq. 1); drafting costs k x `draft_cost` of a target step
    (their cost coefficient c, Theorem 3.8: speed-up = tokens per step / (1 + k c)).

    That speed-up assumes the target verifies k + 1 tokens per sequence in the time of one decode step,
    which holds while the step is memory-bound (it streams the weights and the KV cache once, however
    many tokens it scores). A batch of b sequences verifies b (k + 1) tokens; once their compute outlasts
    the memory-bound step, the verification costs their compute instead (the roofline). The profile's
    prefill rate is the replica's measured compute per token, so a verification step takes
    max(step(b), b (k + 1) / prefill rate): at batch 1 the ratio above, at batch 32 much less
    (`speedup`; the batch-dependence of speculation is measured in Su et al. 2023, "The Synergy of
    Speculative Decoding and Batching in Serving Large Language Models", arXiv 2310.18813)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    draft_tokens: Annotated[int, Field(ge=1, le=16)]
    acceptance: Annotated[float, Field(ge=0, lt=1)]
    draft_cost: Annotated[float, Field(ge=0, le=1)] = 0.05

    @property
    def tokens_per_step(self) -> float:
        a, k = self.acceptance, self.draft_tokens
        return (1 - a ** (k + 1)) / (1 - a)

    def token_ms(self, step_ms: float, batch: int, prefill_tokens_per_second: float) -> float:
        """Milliseconds per generated token of each sequence in a batch whose plain decode step takes
        `step_ms`: drafting plus the verification step, over the tokens a step yields."""
        verify = max(step_ms, batch * (self.draft_tokens + 1) / prefill_tokens_per_second * 1000)
        return (verify + self.draft_tokens * self.draft_cost * step_ms) / self.tokens_per_step

    def speedup(self, step_ms: float, batch: int, prefill_tokens_per_second: float) -> float:
        return step_ms / self.token_ms(step_ms, batch, prefill_tokens_per_second)


PositiveInt = Annotated[int, Field(gt=0)]
PositiveFloat = Annotated[float, Field(gt=0)]


class PublishedFigures(BaseModel):
    """The figures taken from a published benchmark, per batch size, as printed there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time_to_first_token_s: Annotated[dict[PositiveInt, PositiveFloat], Field(min_length=1)]
    inter_token_latency_ms: Annotated[dict[PositiveInt, PositiveFloat], Field(min_length=1)]
    # Optional, a check on the two above rather than an input of the fit: output tokens per second of the
    # whole batch, end to end (batch x output tokens over TTFT + output tokens x inter-token latency).
    generated_tokens_per_second: dict[PositiveInt, PositiveFloat] | None = None


class Citation(BaseModel):
    """Where a profile's speed comes from.

    published: a public benchmark of this instance type at this TP degree. Its document, URL, software and
    SDK version, the run's shape (batch sizes, compiled sequence length, input and output tokens, the
    context bucket the prompts were padded to) and the figures taken from it; `fit_published` turns
    them into the profile's engine figures, and a test fails if the profile drifts from that fit.
    estimate: no public figure exists for this type and TP degree; `why` says so and `derivation` how the
    figures were obtained (e.g. per chip from a published profile), with the URLs it rests on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["published", "estimate"]
    title: Annotated[str, Field(min_length=1)]
    url: Annotated[str, Field(pattern=r"^https://")]
    derivation: Annotated[str, Field(min_length=1)]
    # published
    publisher: str | None = None
    date: str | None = None  # when the figures were published (the page or its data's commit)
    software: str | None = None
    sdk_version: str | None = None  # the Neuron SDK release the figures were measured on
    instance_type: str | None = None
    tensor_parallel: PositiveInt | None = None
    batch_sizes: tuple[PositiveInt, ...] = ()
    sequence_length: PositiveInt | None = None  # compiled maximum (prompt + output)
    input_tokens: PositiveInt | None = None  # the prompt length whose figures are taken
    output_tokens: PositiveInt | None = None
    prefill_padded_tokens: PositiveInt | None = None  # the context bucket each prompt was padded to
    figures: PublishedFigures | None = None
    # estimate
    why: str | None = None
    based_on: str | None = None  # the shipped profile file an estimate takes its figures from

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.kind == "estimate":
            if not self.why:
                raise ValueError("an estimate says why no published figure is used (why)")
            return self
        required = (
            "publisher",
            "date",
            "software",
            "sdk_version",
            "instance_type",
            "tensor_parallel",
            "batch_sizes",
            "sequence_length",
            "input_tokens",
            "output_tokens",
            "prefill_padded_tokens",
            "figures",
        )
        missing = [name for name in required if not getattr(self, name)]
        if missing:
            raise ValueError(f"a published citation needs {', '.join(missing)}")
        assert self.figures is not None
        batches = set(self.batch_sizes)
        for name in ("time_to_first_token_s", "inter_token_latency_ms"):
            if set(getattr(self.figures, name)) != batches:
                raise ValueError(f"figures.{name} must give each of batch_sizes {sorted(batches)}")
        return self


def fit_published(citation: Citation) -> tuple[float, dict[int, float]]:
    """The engine figures a published benchmark gives: (prefill tokens/s, decode step ms per batch size).

    Prefill: the benchmark's engine encodes a batch's prompts one after another, each padded to the
    context bucket, so its time to first token grows in proportion to the batch; the least-squares slope
    of TTFT over batch size (through the origin) is the time of one padded prompt, and the bucket's
    tokens over it the prefill rate in padded tokens, as the planner counts them.
    Decode: the inter-token latency at each batch size is the decode step of a batch that size."""
    if citation.kind != "published" or citation.figures is None or citation.prefill_padded_tokens is None:
        raise ValueError("only a published citation has figures to fit")
    ttft = citation.figures.time_to_first_token_s
    seconds_per_prompt = sum(b * t for b, t in ttft.items()) / sum(b * b for b in ttft)
    decode = {batch: float(ms) for batch, ms in sorted(citation.figures.inter_token_latency_ms.items())}
    return citation.prefill_padded_tokens / seconds_per_prompt, decode


class Profile(BaseModel):
    # Not strict: a measured profile may come from a tool that writes batch sizes as strings.
    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: str
    source: Annotated[str, Field(min_length=1)]
    # Where the speed comes from, in fields (shipped profiles carry one; a measured one may not).
    citation: Citation | None = None
    tensor_parallel: Annotated[int, Field(gt=0)]
    max_num_seqs: Annotated[int, Field(gt=0)]
    prefill_tokens_per_second: Annotated[float, Field(gt=0)]  # padded (bucket) tokens on Neuron
    decode_step_ms: Annotated[
        dict[Annotated[int, Field(gt=0)], Annotated[float, Field(gt=0)]], Field(min_length=1)
    ]
    throughput_range: ThroughputRange = ThroughputRange()
    speculative: Speculative | None = None
    # The model's memory, for the KV-cache limit (defaults: Llama 3.1 8B in bf16, 8.03 B parameters;
    # 32 layers x 8 KV heads x 128 dims x K and V x 2 bytes = 128 KiB per token).
    weights_gib: Annotated[float, Field(gt=0)] = 15.0
    kv_bytes_per_token: Annotated[int, Field(gt=0)] = 131072
    # Share of HBM left for weights and KV cache (activations, graphs and buffers take the rest).
    usable_hbm_share: Annotated[float, Field(gt=0, le=1)] = 0.9
    derived: bool = False  # true: scaled per chip from another profile, not measured on this type
    # The context (tokens per sequence its attention reads) at which decode_step_ms holds; decode buckets
    # move the step from there (`step_ms_at`). Default: the shipped estimates' basis, sequences of ~1,150
    # tokens (the example forecast's 900 prompt + 250 output tokens). A measured profile sets its own.
    decode_context_tokens: Annotated[int, Field(gt=0)] = 1150

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
        cited = self.citation
        own = (self.instance_type, self.tensor_parallel)
        if cited and cited.kind == "published" and (cited.instance_type, cited.tensor_parallel) != own:
            raise ValueError(
                f"the citation's figures are for {cited.instance_type} at TP {cited.tensor_parallel}, "
                f"not this profile's {self.instance_type} at TP {self.tensor_parallel}: cite it as "
                "an estimate (kind: estimate) and say how it was carried over"
            )
        steps = [self.decode_step_ms[batch] for batch in sorted(self.decode_step_ms)]
        if any(later < earlier for earlier, later in itertools.pairwise(steps)):
            raise ValueError("decode_step_ms must not fall as the batch grows")
        return self

    @property
    def speed_source(self) -> str:
        """One line: where the speed comes from (published, estimate, derived or measured)."""
        cited = self.citation
        if self.derived:
            return "derived per chip (estimate)"
        if cited is None:
            return f"measured: {self.source}"
        if cited.kind == "published":
            return f"published: {cited.title}, Neuron SDK {cited.sdk_version}, {cited.url}"
        return f"estimate: {(cited.why or '').rstrip('.')}"

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

    def kv_ms_per_token(self) -> float:
        """Milliseconds a decode step spends per sequence per token of context: reading its KV cache.

        A decode step at batch 1 is memory-bound, streaming the weights once; reading KV cache goes at the
        same bandwidth, so a token's KV bytes cost step_ms(1) x kv_bytes_per_token / weight bytes."""
        return self.step_ms(1) * self.kv_bytes_per_token / (self.weights_gib * 2**30)

    def step_ms_at(self, batch: int, context: int) -> float:
        """The decode step of `batch` sequences whose attention spans `context` tokens each (a decode
        bucket's length): decode_step_ms, plus or minus the KV-cache reads between context and
        decode_context_tokens. Never below the batch-1 step's weight reads."""
        moved = self.step_ms(batch) + batch * (context - self.decode_context_tokens) * self.kv_ms_per_token()
        return max(moved, self.step_ms(1) - self.decode_context_tokens * self.kv_ms_per_token())

    def decode_speedup(self, batch: int) -> float:
        """Speculative decoding's speed-up at a batch size (1.0 without it), at decode_context_tokens."""
        if self.speculative is None:
            return 1.0
        return self.speculative.speedup(self.step_ms(batch), batch, self.prefill_tokens_per_second)

    def kv_cache_sequences(self, max_model_len: int) -> int:
        """Sequences of max_model_len tokens the replica's KV cache holds beside the weights.

        Assumes each sequence slot reserves a whole max_model_len of cache, as NxD Inference's contiguous
        KV cache does (its cache is allocated as max_num_seqs x max_model_len when the engine starts)."""
        hbm = (
            chips_per_replica(self.instance_type, self.tensor_parallel) * chip_of(self.instance_type).hbm_gib
        )
        free = hbm * self.usable_hbm_share - self.weights_gib
        return max(0, int(free * 2**30 // (self.kv_bytes_per_token * max_model_len)))

    def engine(
        self,
        max_num_seqs: int,
        max_model_len: int | None = None,
        prefill_buckets: tuple[int, ...] = (),
        speed: float = 1.0,
        speculative: bool = True,
        decode_buckets: tuple[int, ...] = (),
    ) -> Engine:
        """The replica as the simulation sees it, at the batch limit the deployed engine runs with.

        max_model_len: cap the batch at what the KV cache holds when that is lower than max_num_seqs.
        prefill_buckets, decode_buckets: the buckets the engine is compiled for (planner/buckets.py).
        speed: a throughput factor, e.g. throughput_range.low for the pessimistic plan.
        speculative: apply the profile's speculative decoding (if any), per batch size and bucket."""
        batch = max_num_seqs
        if max_model_len is not None:
            batch = min(batch, self.kv_cache_sequences(max_model_len))
            if batch < 1:
                raise ValueError(
                    f"{self.instance_type} at TP {self.tensor_parallel}: the weights leave no KV cache "
                    f"for a {max_model_len}-token sequence"
                )
        draft = self.speculative if speculative else None

        def seconds(step_ms: float, size: int) -> float:
            if draft is not None:
                step_ms = draft.token_ms(step_ms, size, self.prefill_tokens_per_second)
            return step_ms / 1000 / speed

        sizes = range(1, batch + 1)
        steps = tuple(seconds(self.step_ms(size), size) for size in sizes)
        tables = tuple(
            (0.0, *(seconds(self.step_ms_at(size, bucket), size) for size in sizes))
            for bucket in decode_buckets
        )
        return Engine(
            self.prefill_tokens_per_second * speed,
            (0.0, *steps),
            tuple(prefill_buckets),
            tuple(decode_buckets),
            tables,
        )

    def per_chip(self, instance_type: str, tensor_parallel: int) -> Profile:
        """This profile scaled to another type and TP degree: prefill with the chips' compute and decode
        steps with their memory bandwidth (an 8B model's decode reads its weights every step). Linear
        scaling ignores the collectives' cost at higher TP, so the range widens downwards."""
        here, there = chip_of(self.instance_type), chip_of(instance_type)
        compute = chips_per_replica(instance_type, tensor_parallel) * there.bf16_tflops
        compute /= chips_per_replica(self.instance_type, self.tensor_parallel) * here.bf16_tflops
        bandwidth = chips_per_replica(instance_type, tensor_parallel) * there.hbm_tb_per_second
        bandwidth /= chips_per_replica(self.instance_type, self.tensor_parallel) * here.hbm_tb_per_second
        same = here.generation == there.generation and tensor_parallel == self.tensor_parallel
        widen = 1.0 if same else (0.85 if here.generation == there.generation else 0.7)
        derived = self.derived or not same or instance_type != self.instance_type
        return self.model_copy(
            update={
                "instance_type": instance_type,
                "tensor_parallel": tensor_parallel,
                "source": (
                    f"derived per chip from the {self.instance_type} TP {self.tensor_parallel} profile "
                    f"({here.generation} -> {there.generation}: prefill x{compute:.2f} by compute, decode "
                    f"x{bandwidth:.2f} by memory bandwidth); measure it with make bench-serving PROFILE_OUT="
                ),
                "prefill_tokens_per_second": self.prefill_tokens_per_second * compute,
                "decode_step_ms": {b: ms / bandwidth for b, ms in self.decode_step_ms.items()},
                "throughput_range": ThroughputRange(
                    low=self.throughput_range.low * widen, high=self.throughput_range.high
                ),
                "derived": derived,
                "citation": None if derived else self.citation,
            }
        )


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


def profile_for(profiles: dict[ProfileKey, Profile], instance_type: str, tensor_parallel: int) -> Profile:
    """The profile for a type and TP degree: its own file, else one derived per chip from the file of the
    same chip generation (then any file) nearest in TP. Raises KeyError only when there are no files."""
    own = profiles.get((instance_type, tensor_parallel))
    if own is not None:
        return own
    generation = chip_of(instance_type).generation

    def closeness(item: tuple[ProfileKey, Profile]) -> tuple[bool, bool, float, bool]:
        (kind, tp), profile = item
        return (
            chip_of(kind).generation != generation,
            profile.derived,
            abs(chips_per_replica(kind, tp) - chips_per_replica(instance_type, tensor_parallel)),
            kind != instance_type,
        )

    if not profiles:
        raise KeyError((instance_type, tensor_parallel))
    base = min(profiles.items(), key=closeness)[1]
    return base.per_chip(instance_type, tensor_parallel)
