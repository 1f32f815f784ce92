"""The two Triton models: the shopping assistant, and a pass-through that is a drop-in for clients of
Triton's stock vLLM backend (and the benchmark's baseline)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from assistant.prepare import PreparedRequest, prepare_request
from serving.stock_compat import ADDITIONAL_OUTPUTS
from serving.streaming_model import INPUTS, ServingRequest, StreamingModel, read_inputs

INDEX_DIR_VARIABLE = "ASSISTANT_INDEX_DIR"


class ModelLoadError(RuntimeError):
    """The model cannot serve; Triton shows this message as the reason the model failed to load."""


class AssistantModel(StreamingModel):
    """validate -> plan -> retrieve -> prompt -> stream, with product cards in the first response.

    Its request schema is stricter than the stock backend's on purpose: it faces shoppers' front ends, so
    sampling keys are a known list with bounds (no `n`, no logprobs of hidden prompt text), the prompt has a
    size limit, and max_tokens has a default that fits an answer.
    """

    has_products = True

    def load_steps(self, settings: dict[str, Any]) -> None:
        from assistant.chat import ChatFormat
        from assistant.retrieve import CatalogIndexError, ProductIndex

        index_dir = os.environ.get(INDEX_DIR_VARIABLE, "").strip()
        if not index_dir:
            raise ModelLoadError(f"{self.model_name}: set {INDEX_DIR_VARIABLE} to the catalog index folder")
        try:
            self.index = ProductIndex.open(Path(index_dir))
        except CatalogIndexError as err:
            raise ModelLoadError(f"{self.model_name}: cannot open the catalog index: {err}") from None
        self.chat = ChatFormat.load(settings.get("tokenizer") or settings["model"])
        self.max_model_len = int(settings["max_model_len"])
        self.sampling_platform = _sampling_platform()
        print(
            f"{self.model_name}: {self.index.describe()}; prompt format: {self.chat.describe()}; "
            f"sampling keys of platform {self.sampling_platform.name}",
            flush=True,
        )

    def parse(self, request) -> ServingRequest:
        from assistant.request import build_sampling_params, check_question_tokens, parse_request
        from serving.stock_compat import flags

        inputs = read_inputs(self.pb, request, INPUTS + ADDITIONAL_OUTPUTS)
        parsed = parse_request(
            inputs["text_input"],
            inputs["stream"],
            inputs["sampling_parameters"],
            inputs["exclude_input_in_output"],
            limits=self.limits,
            platform=self.sampling_platform,
        )
        # On Triton's thread, not the engine loop: the question's tokens against the limit, and its control
        # tokens removed once (the cleaner's cache hands the result to the prompt built on the loop).
        check_question_tokens(parsed.text, self.chat.count_tokens, self.limits)
        self.chat.clean(parsed.text)
        sampling = parsed.sampling.engine_kwargs()
        build_sampling_params(sampling)  # vLLM's own checks now, so the engine never refuses a request
        return ServingRequest(
            text=parsed.text,
            stream=parsed.stream,
            prepend_input=not parsed.exclude_input_in_output,
            sampling=sampling,
            returns=flags(inputs),
        )

    def prepare(self, text: str) -> PreparedRequest:
        from assistant.request import check_prompt_fits

        prepared = prepare_request(text, self.index, self.chat)
        # The engine refuses a prompt longer than max_model_len only once it has the request, as an
        # internal error: count here and answer the client's mistake as one (RequestError is INVALID_ARG).
        check_prompt_fits(prepared.prompt, self.chat.prompt_tokens, self.max_model_len)
        return prepared


def _sampling_platform():
    from assistant.sampling_platforms import active_engine_platform, resolve_platform

    try:
        return resolve_platform(os.environ, active_engine_platform())
    except ValueError as err:
        raise ModelLoadError(str(err)) from None


class PassthroughModel(StreamingModel):
    """What Triton's stock vLLM backend does: the text goes to the engine as it is, any vLLM sampling key
    the engine's platform honours."""

    def load_steps(self, settings: dict[str, Any]) -> None:
        from transformers import AutoTokenizer

        self.sampling_platform = _sampling_platform()
        self.max_model_len = int(settings["max_model_len"])
        tokenizer = AutoTokenizer.from_pretrained(settings.get("tokenizer") or settings["model"])
        self.count_prompt_tokens = lambda text: len(tokenizer.encode(text))
        # The most bytes one token stands for (special tokens included), for the no-tokenizing bound.
        self.max_token_bytes = max(
            len(tokenizer.convert_tokens_to_string([token]).encode("utf-8")) or 1
            for token in tokenizer.get_vocab()
        )

    def parse(self, request) -> ServingRequest:
        from assistant.request import RequestError, RequestLimits, build_sampling_params, parse_text
        from serving.stock_compat import flags, prepend_input, sampling_kwargs

        inputs = read_inputs(self.pb, request, INPUTS + ADDITIONAL_OUTPUTS)
        # The stock backend has no prompt size limit of its own: the engine's max_model_len is the limit.
        text = parse_text(inputs["text_input"], RequestLimits(max_prompt_chars=10_000_000), strip=False)
        stream = bool(inputs["stream"]) if inputs["stream"] is not None else False
        exclude = inputs["exclude_input_in_output"]
        prepend = prepend_input(stream, None if exclude is None else bool(exclude))
        raw = inputs["sampling_parameters"]
        if raw is None:
            # Without the tensor, the stock backend reads the request's parameters (a JSON object string).
            raw = request.parameters()
        try:
            sampling = sampling_kwargs(raw)
        except RequestError:
            raise
        except Exception as err:  # e.g. a structured_outputs object vLLM refuses
            raise RequestError(f"sampling_parameters: {err}") from None
        refusal = self.sampling_platform.refusal(sampling)
        if refusal is not None:
            raise RequestError(f"sampling_parameters.{refusal[0]}: {refusal[1]}")
        build_sampling_params(sampling)  # vLLM's own checks (ranges, combinations), before the engine
        return ServingRequest(
            text=text, stream=stream, prepend_input=prepend, sampling=sampling, returns=flags(inputs)
        )

    def prepare(self, text: str) -> PreparedRequest:
        from assistant.request import check_prompt_fits

        # The engine would refuse it as an internal error; refuse it here as the client's (INVALID_ARG).
        check_prompt_fits(
            text,
            self.count_prompt_tokens,
            self.max_model_len,
            max_token_bytes=self.max_token_bytes,
            what="the prompt",
        )
        return PreparedRequest(prompt=text)
