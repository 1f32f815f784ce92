"""The two Triton models: the shopping assistant and a plain pass-through for side-by-side benchmarks."""

from __future__ import annotations

import os
from pathlib import Path

from assistant.prepare import PreparedRequest, prepare_request
from serving.streaming_model import StreamingModel

INDEX_DIR_VARIABLE = "ASSISTANT_INDEX_DIR"


class ModelLoadError(RuntimeError):
    """The model cannot serve; Triton shows this message as the reason the model failed to load."""


class AssistantModel(StreamingModel):
    """validate -> plan -> retrieve -> prompt -> stream, with product cards in the first response."""

    def load_steps(self) -> None:
        from assistant.retrieve import CatalogIndexError, ProductIndex

        index_dir = os.environ.get(INDEX_DIR_VARIABLE, "").strip()
        if not index_dir:
            raise ModelLoadError(f"{self.model_name}: set {INDEX_DIR_VARIABLE} to the catalog index folder")
        try:
            self.index = ProductIndex.open(Path(index_dir))
        except CatalogIndexError as err:
            raise ModelLoadError(f"{self.model_name}: cannot open the catalog index: {err}") from None

    def prepare(self, text: str) -> PreparedRequest:
        return prepare_request(text, self.index)


class PassthroughModel(StreamingModel):
    """What Triton's stock vLLM backend does: the text goes to the engine as it is, no retrieval."""

    def prepare(self, text: str) -> PreparedRequest:
        return PreparedRequest(prompt=text)
