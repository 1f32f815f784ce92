"""The two Triton models: the shopping assistant, and a pass-through that is a drop-in for clients of
Triton's stock vLLM backend (and the benchmark's baseline)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from assistant.prepare import PreparedRequest, prepare_request
from serving.line_out import emit
from serving.stock_compat import ADDITIONAL_OUTPUTS
from serving.streaming_model import INPUTS, ServingRequest, StreamingModel, read_inputs

INDEX_DIR_VARIABLE = "ASSISTANT_INDEX_DIR"
# The assistant's own switch and output: the sampling the request ran with (defaults + its own keys), in the
# first response, for `make ask` and clients that want to see the model's defaults at work.
RETURN_SAMPLING = "return_sampling_parameters"
SAMPLING_OUTPUT = "sampling_parameters_used"


class ModelLoadError(RuntimeError):
    """The model cannot serve; Triton shows this message as the reason the model failed to load."""


class AssistantModel(StreamingModel):
    """validate -> plan -> retrieve -> prompt -> stream, with product cards in the first response.

    Its request schema is stricter than the stock backend's on purpose: it faces shoppers' front ends, so
    sampling keys are a known list with bounds (no `n`, no logprobs of hidden prompt text), the prompt has a
    size limit, and max_tokens has a default that fits an answer.
    """

    has_products = True
    follower = None

    def initialize(self, args) -> None:
        super().initialize(args)
        self._start_catalog_follow()

    def finalize(self) -> None:
        if self.follower is not None:
            self.follower.stop()
        super().finalize()

    def _start_catalog_follow(self) -> None:
        """Follow the index's pointer (CATALOG_INDEX_S3_URI) every CATALOG_FOLLOW_SECONDS, on a thread."""
        from entrypoint.s3_fetch import FetchError, S3Location
        from serving.catalog_follow import (
            FOLLOW_DIR_ENV,
            INDEX_URI_ENV,
            CatalogFollower,
            follow_seconds,
            manifest_sha256,
        )

        try:
            interval = follow_seconds(os.environ)
            uri = os.environ.get(INDEX_URI_ENV, "").strip()
            if interval == 0 or not uri:
                return
            location = S3Location.parse(uri, variable=INDEX_URI_ENV)
        except (ValueError, FetchError) as err:
            raise ModelLoadError(f"{self.model_name}: {err}") from None
        builds_dir = Path(os.environ.get(FOLLOW_DIR_ENV) or f"{self.index.path}-builds")
        self.follower = CatalogFollower(
            location,
            builds_dir,
            interval,
            manifest_sha256(self.index.path),
            swap=self._swap_index,
            report=self._follow_line,
        ).start()
        emit(f"{self.model_name}: following {location}/current.json every {interval} s")

    def _swap_index(self, index) -> None:
        """The new build serves the next request: one attribute, read once per request in prepare()."""
        from assistant.retrieve import ProductIndex

        self.index = index
        # The vocabulary cache holds the old index alive (and answers from it): start it afresh.
        ProductIndex.in_catalog.cache_clear()

    def _follow_line(self, report) -> None:
        from assistant.metrics import emf_line, index_follow_record

        properties = {
            "Kind": "index-follow",
            "Build": report.build,
            "Swapped": report.swapped,
            "Replica": self.replica.index,
        }
        if report.error is not None:
            properties["Error"] = report.error[:500]
        record = index_follow_record(
            report.version,
            report.error is not None,
            dimensions=self.emf_dimensions,
            dimension_sets=self.emf_dimension_sets,
            properties=properties,
        )
        self.log_writer.write(emf_line(record))

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
        self.sampling_defaults = _sampling_defaults(settings["model"], self.sampling_platform)
        from assistant.sampling_defaults import describe

        emit(
            f"{self.model_name}: {self.index.describe()}; prompt format: {self.chat.describe()}; "
            f"sampling keys of platform {self.sampling_platform.name}; {describe(self.sampling_defaults)}",
        )

    def parse(self, request) -> ServingRequest:
        from assistant.request import build_sampling_params, check_question_tokens, parse_request
        from assistant.sampling_defaults import apply
        from serving.stock_compat import flags

        inputs = read_inputs(self.pb, request, (*INPUTS, *ADDITIONAL_OUTPUTS, RETURN_SAMPLING))
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
        # The model's generation_config.json and the config's defaults, under what the client sent.
        sampling = apply(self.sampling_defaults, parsed.sampling.engine_kwargs())
        build_sampling_params(sampling)  # vLLM's own checks now, so the engine never refuses a request
        returns = flags(inputs)
        if inputs[RETURN_SAMPLING] is not None and bool(inputs[RETURN_SAMPLING]):
            returns |= {RETURN_SAMPLING}
        return ServingRequest(
            text=parsed.text,
            stream=parsed.stream,
            prepend_input=not parsed.exclude_input_in_output,
            sampling=sampling,
            returns=returns,
        )

    def _response(self, output, parsed: ServingRequest, products_json: str | None):
        response = super()._response(output, parsed, products_json)
        if products_json is None or RETURN_SAMPLING not in parsed.returns:
            return response
        import json

        import numpy as np

        used = json.dumps(parsed.sampling, sort_keys=True).encode("utf-8")
        tensor = self.pb.Tensor(SAMPLING_OUTPUT, np.array([used], dtype=np.object_))
        return self.pb.InferenceResponse(output_tensors=[*response.output_tensors(), tensor])

    def prepare(self, text: str) -> PreparedRequest:
        from assistant.request import check_prompt_fits

        prepared = prepare_request(text, self.index, self.chat)
        # The engine refuses a prompt longer than max_model_len only once it has the request, as an
        # internal error: count here and answer the client's mistake as one (RequestError is INVALID_ARG).
        check_prompt_fits(prepared.prompt, self.chat.prompt_tokens, self.max_model_len)
        return prepared


def _sampling_defaults(model_dir: str, platform) -> dict[str, Any]:
    """The defaults in force (the model's generation_config.json under the config's overrides), checked
    against the bounds a client's keys have; keys the engine's platform would ignore are left out."""
    from pydantic import ValidationError

    from assistant.request import SamplingSettings
    from assistant.sampling_defaults import (
        DEFAULTS_ENV,
        SamplingDefaultsError,
        from_generation_config,
        merge,
        overrides_from_env,
        read_generation_config,
    )
    from assistant.validation import first_error

    try:
        file_defaults = from_generation_config(read_generation_config(model_dir))
        defaults = merge(file_defaults, overrides_from_env(os.environ))
        checked = SamplingSettings.model_validate(defaults).engine_kwargs()
    except SamplingDefaultsError as err:
        raise ModelLoadError(str(err)) from None
    except ValidationError as err:
        field, message = first_error(err)
        from_config = field in overrides_from_env(os.environ)
        source = DEFAULTS_ENV if from_config else f"{model_dir}/generation_config.json"
        raise ModelLoadError(f"sampling default {field} from {source}: {message}") from None
    kept: dict[str, Any] = {}
    for key, value in checked.items():
        refusal = platform.refusal({key: value})
        if refusal is None:
            kept[key] = value
        else:
            emit(f"sampling default {key}={value} left out: {refusal[1]}")
    return kept


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
