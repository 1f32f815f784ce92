"""The model: which weights, its context and batch limits, and where its artifacts live."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, model_validator

from settings.types import S3Uri, StrictModel, s3_bucket, s3_prefix


class ModelConfig(StrictModel):
    # The Triton model clients call; the ALB's HTTP health check asks /v2/models/<name>/ready.
    name: str = "assistant"
    # Which weights (and revision) the artifacts hold: part of the compiled-artifact key, so a new model
    # never loads another model's compiled graphs.
    model_id: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._/@:-]+$")] = (
        "llama-3.1-8b-instruct"
    )
    # Weights and compiled Neuron artifacts; only the task role may read this location. A region may name its
    # own replica (regions.<name>.artifacts_s3_uri).
    artifacts_s3_uri: S3Uri
    # Longest prompt plus output, in tokens, an engine accepts (vLLM max_model_len).
    max_model_len: Annotated[int, Field(ge=256, le=131072)] = 8192
    # Sequences an engine replica batches at once (vLLM max_num_seqs): its serving slots.
    max_num_seqs: Annotated[int, Field(ge=1, le=512)] = 32
    # Most output tokens a request may ask for; with serving.min_decode_tokens_per_second it sets the longest
    # stream.
    max_output_tokens: Annotated[int, Field(ge=1, le=32768)] = 1024
    # The data type the engine runs the weights in.
    dtype: str = "bfloat16"
    # Let a host without complete compiled artifacts for its key compile them at start instead of refusing to
    # start: a host compiling for an hour during a peak is an outage.
    allow_compile_on_start: bool = False
    # The shop's catalog index (`make index CATALOG=... UPLOAD=...`); hosts download and verify it at start.
    # It must lie under artifacts_s3_uri, the one prefix the serving tasks may read (a region with its own
    # replica reads it at the same place under its replica); by default <artifacts_s3_uri>/catalog-index/.
    catalog_index_s3_uri: S3Uri | None = None

    @model_validator(mode="after")
    def _index_readable_by_the_tasks(self) -> Self:
        root = self.artifacts_s3_uri.rstrip("/") + "/"
        if self.catalog_index_s3_uri is not None and not self.catalog_index_s3_uri.startswith(root):
            raise ValueError(
                f"catalog_index_s3_uri {self.catalog_index_s3_uri} must lie under artifacts_s3_uri {root} "
                "(the serving tasks may read that prefix only)"
            )
        return self

    def catalog_index_uri(self, artifacts_root: str) -> str:
        """The index under a region's artifacts root, at the same relative place as under the model's."""
        root = self.artifacts_s3_uri.rstrip("/") + "/"
        relative = self.catalog_index_s3_uri[len(root) :] if self.catalog_index_s3_uri else "catalog-index/"
        return artifacts_root.rstrip("/") + "/" + relative

    @property
    def artifacts_bucket(self) -> str:
        return s3_bucket(self.artifacts_s3_uri)

    @property
    def artifacts_prefix(self) -> str:
        return s3_prefix(self.artifacts_s3_uri)
