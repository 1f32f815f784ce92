"""The shape both Triton models share: execute() only schedules, the engine loop streams.

execute() takes each request's response sender, validates its inputs (a bad request gets its own error at
once) and hands the work to the engine's event-loop thread. There the request is prepared (the assistant
plans, retrieves and builds its prompt; the pass-through uses the text as it is), then streamed from vLLM
chunk by chunk, checking between chunks whether the client cancelled so the engine slot is freed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import locale
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from assistant.prepare import PreparedRequest
from serving.engine_settings import engine_settings

logger = logging.getLogger(__name__)

INPUTS = ("text_input", "stream", "sampling_parameters", "exclude_input_in_output")


def read_inputs(pb_utils, request) -> dict[str, Any]:
    """Each known input as a Python value (bytes for strings, numpy scalar for BOOL), or None if absent."""
    values: dict[str, Any] = {}
    for name in INPUTS:
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        if tensor is None:
            values[name] = None
            continue
        array = tensor.as_numpy()
        values[name] = array.reshape(-1)[0] if array.size else None
    return values


class StreamingModel:
    """Base for the Triton Python-backend models; subclasses say how a request is prepared."""

    def initialize(self, args: dict[str, str]) -> None:
        # Before torch is imported: the stub may start under the C locale, which breaks tokenizer files.
        locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
        import triton_python_backend_utils as pb_utils

        from assistant.request import RequestLimits
        from serving.engine_loop import EngineLoop
        from serving.triton_metrics import ServingMetrics

        self.pb = pb_utils
        self.model_name = args["model_name"]
        model_config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(model_config):
            raise pb_utils.TritonModelException(
                f"{self.model_name}: config.pbtxt must make the model decoupled"
            )
        from assistant.metrics import serving_dimensions

        self.limits = RequestLimits.from_env()
        self.emf_dimensions, self.emf_dimension_sets = serving_dimensions(self.model_name)
        self.load_steps()  # fail fast (e.g. a missing index) before the minutes-long engine start
        model_json = Path(args["model_repository"]) / args["model_version"] / "model.json"
        self.engine = EngineLoop(engine_settings(model_json, os.environ), str(model_json))
        self.metrics = ServingMetrics(pb_utils, self.model_name)

    # ---- hooks for subclasses ----
    def load_steps(self) -> None:
        """Open what the request steps need (an index); raise with a clear message if it is unusable."""

    def prepare(self, text: str) -> PreparedRequest:
        raise NotImplementedError

    # ---- Triton entry points ----
    def execute(self, requests):
        from assistant.request import RequestError, parse_request

        for request in requests:
            arrival = time.perf_counter()
            sender = request.get_response_sender()
            try:
                inputs = read_inputs(self.pb, request)
                parsed = parse_request(
                    inputs["text_input"],
                    inputs["stream"],
                    inputs["sampling_parameters"],
                    inputs["exclude_input_in_output"],
                    limits=self.limits,
                )
            except RequestError as err:
                self.metrics.rejected()
                self._send_error(sender, str(err))
                continue
            except Exception as err:  # an input this code did not foresee: still this request's error only
                logger.exception("could not read request inputs")
                self.metrics.rejected()
                self._send_error(sender, f"could not read the request inputs: {type(err).__name__}: {err}")
                continue
            self.engine.submit(self._serve(sender, parsed, arrival))
        return None

    def finalize(self) -> None:
        self.engine.stop()

    # ---- the request, on the engine loop ----
    async def _serve(self, sender, parsed, arrival: float) -> None:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        request_id = uuid.uuid4().hex
        in_flight, queue_depth = self.metrics.started()
        outcome, output_tokens, ttft_ms, prepared, prepare_ms = "failed", 0, None, None, None
        try:
            prepare_started = time.perf_counter()
            # On the loop itself: plan + retrieve + prompt take ~0.2 ms (p99 0.4 ms, 5k products; the 1M
            # index searches at p99 ~10 ms). Handing them to a thread cost ~10 ms at p50 under load: the
            # result waits for the GIL, which the busy loop thread gives up only every switch interval.
            prepared = self.prepare(parsed.text)
            prepare_ms = (time.perf_counter() - prepare_started) * 1000.0
            if sender.is_cancelled():  # gone while we planned and retrieved: never reaches the engine
                outcome = "cancelled"
                sender.send(flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            kind = RequestOutputKind.DELTA if parsed.stream else RequestOutputKind.FINAL_ONLY
            params = SamplingParams(**parsed.sampling.engine_kwargs(), output_kind=kind)
            products_json = json.dumps(prepared.products)
            collected: list[str] = []
            engine = self.engine.engine
            # aclosing: however the loop ends (cancel, error), closing the generator aborts the engine
            # request, so its batch slot is freed at once rather than when the generator is collected.
            outputs = engine.generate({"prompt": prepared.prompt}, params, request_id)
            async with contextlib.aclosing(outputs):
                async for output in outputs:
                    if sender.is_cancelled():
                        outcome = "cancelled"
                        sender.send(flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                        return
                    completion = output.outputs[0]
                    first = ttft_ms is None
                    if first:
                        ttft_ms = (time.perf_counter() - arrival) * 1000.0
                        self.metrics.first_token(ttft_ms)
                    output_tokens = len(completion.token_ids) + (output_tokens if parsed.stream else 0)
                    if parsed.stream:
                        flags = self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL if output.finished else 0
                        sender.send(
                            self._response(completion.text, products_json if first else None), flags=flags
                        )
                    else:
                        collected.append(completion.text)
            if not parsed.stream:
                text = "".join(collected)
                if not parsed.exclude_input_in_output:
                    text = parsed.text + text
                sender.send(
                    self._response(text, products_json), flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )
            elif ttft_ms is None:  # the engine produced nothing at all; still close the stream
                sender.send(flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            outcome = "completed"
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception as err:  # one request's failure must not take the model down
            if sender.is_cancelled():
                # The client went away between our check and a send, which then fails: a cancellation.
                outcome = "cancelled"
            else:
                logger.exception("request %s failed", request_id)
                self._send_error_quietly(sender, f"request failed: {type(err).__name__}: {err}")
        finally:
            engine_unfinished = self.engine.unfinished_requests()
            in_flight = self.metrics.finished(
                outcome=outcome,
                output_tokens=output_tokens,
                got_first_token=ttft_ms is not None,
                engine_unfinished=engine_unfinished,
            )
            try:
                self._log_emf(
                    request_id, prepared, outcome, ttft_ms, output_tokens, in_flight, queue_depth, prepare_ms
                )
            except Exception:  # a metrics line must never fail a request that was already answered
                logger.exception("EMF line for request %s not written", request_id)

    def _response(self, text: str, products_json: str | None):
        tensors = [self.pb.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_))]
        if products_json is not None:
            tensors.append(
                self.pb.Tensor("products", np.array([products_json.encode("utf-8")], dtype=np.object_))
            )
        return self.pb.InferenceResponse(output_tensors=tensors)

    def _send_error(self, sender, message: str) -> None:
        response = self.pb.InferenceResponse(output_tensors=[], error=self.pb.TritonError(message))
        sender.send(response, flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _send_error_quietly(self, sender, message: str) -> None:
        try:
            self._send_error(sender, message)
        except Exception:  # the stream may already be closed; the request is over either way
            logger.exception("could not send the error response")

    def _log_emf(
        self, request_id, prepared, outcome, ttft_ms, output_tokens, in_flight, queue_depth, prepare_ms
    ) -> None:
        from assistant.metrics import emf_line, request_metrics_record

        record = request_metrics_record(
            output_tokens=output_tokens,
            in_flight=in_flight,
            queue_depth=queue_depth,
            ttft_ms=ttft_ms,
            dimensions=self.emf_dimensions,
            dimension_sets=self.emf_dimension_sets,
            properties={
                "RequestId": request_id,
                "Outcome": outcome,
                "Intent": prepared.intent if prepared and prepared.intent else "none",
                # Plan + retrieve + prompt time: the assistant's own share of TTFT (a property, not a metric).
                "PrepareMs": None if prepare_ms is None else round(prepare_ms, 3),
            },
        )
        # stdout of the stub reaches the container log, which the awslogs driver ships to CloudWatch.
        print(emf_line(record), flush=True)
