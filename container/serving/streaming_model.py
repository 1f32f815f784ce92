"""The shape both Triton models share: execute() only schedules, the engine loop streams, a thread sends.

execute() takes each request's response sender, validates its inputs (a bad request gets its own error at
once) and hands the work to the engine's event-loop thread. The request is prepared on a worker thread beside
the loop (the assistant plans, retrieves and builds its prompt; the pass-through counts its tokens) and then
streamed from vLLM.
Responses, cancellation checks, metric updates and log lines go through the outbox thread, so nothing that
waits on Triton's parent process or a pipe holds up the loop that serves every stream.

No silent failure: a dead or stalled engine (serving/engine_watch.py) stops the whole server, so its
readiness fails at once and the process exits (ECS replaces the task; the ALB's checks fail within a minute);
a client that goes away aborts its engine request, also while it waits for a batch slot; finalize() drains,
shuts the engine down and kills any engine process that did not exit; a guard process kills them if this
process dies first.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import gc
import json
import locale
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from assistant.environ_number import number_from_environ, whole_number_from_environ
from assistant.prepare import PreparedRequest
from serving.admission import (
    Admission,
    admission,
    first_output_deadline,
    queue_wait_budget_ms,
    queue_wait_shed_message,
)
from serving.engine_settings import engine_settings
from serving.line_out import emit

logger = logging.getLogger(__name__)

INPUTS = ("text_input", "stream", "sampling_parameters", "exclude_input_in_output")
GAUGE_INTERVAL_ENV = "GAUGE_INTERVAL_SECONDS"
MAX_QUEUED_ENV = "MAX_QUEUED_PER_REPLICA"
# Requests a replica lets wait beyond its batch slots, as a multiple of max_num_seqs: one more batch. A
# request behind that waits longer than a whole stream before its first token, so the objective is lost
# anyway; refusing it at once lets the client (or the ALB's next choice) go to a host with room.
DEFAULT_QUEUE_MULTIPLE = 1
DRAIN_TIMEOUT_ENV = "FINALIZE_DRAIN_SECONDS"
# vLLM's executor gives its workers 5 s to exit, then sends SIGTERM (vllm/v1/executor/multiproc_executor.py).
# Measured on the CPU engine after a burst of cancelled streams, the worker exited on neither, and vLLM's
# shutdown waited out whatever timeout it had; past the grace and a little, the model kills what is left.
ENGINE_SHUTDOWN_TIMEOUT_S = 8.0
# How long a dead engine's server waits for its requests' errors to go out before it stops.
ERRORS_DELIVERY_S = 2.0
# What Triton still does after finalize returns within its exit timeout: the stub's exit and the unload. The
# finalize is budgeted to end this long before the timeout, so the stop stays graceful.
FINALIZE_RESERVE_S = 5.0
ENGINE_SHUTDOWN_MIN_S = 3.0  # the engine's own shutdown gets at least this, even after a long drain
STOP_MIN_S = 0.5  # each thread's stop in the finalize gets at least this, even with the budget spent


def stop_in_turn(
    deadline: float,
    stoppers: Sequence[Callable[[float], object]],
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Call each stopper with a timeout: an equal share of what is left before `deadline` among those still
    to run (at least STOP_MIN_S), so one that ends early leaves its time to the next and one that takes its
    whole share cannot take the others'."""
    for index, stop in enumerate(stoppers):
        stop(max(STOP_MIN_S, (deadline - clock()) / (len(stoppers) - index)))


@dataclass(frozen=True)
class ShutdownBudget:
    drain_s: float  # waiting for live requests to end
    total_s: float  # the whole finalize: drain, engine shutdown, leftovers killed, threads stopped


def shutdown_budget(exit_timeout_s: float, drain_timeout_s: float) -> ShutdownBudget:
    """Fit the finalize inside Triton's --exit-timeout-secs: past it Triton kills the stub ("Exit timeout
    expired"), leaving engine processes to the guard. vLLM's own shutdown can take its whole timeout (a worker
    that ignores the engine core's SIGTERM is waited on, then killed), so the engine's part is whatever the
    drain leaves, and what outlives it is killed by the model itself."""
    total = max(ENGINE_SHUTDOWN_MIN_S, exit_timeout_s - FINALIZE_RESERVE_S)
    drain = max(0.0, min(drain_timeout_s, total - ENGINE_SHUTDOWN_MIN_S))
    return ShutdownBudget(drain_s=drain, total_s=total)


@dataclass(frozen=True)
class ServingRequest:
    """A validated request, whichever model parsed it."""

    text: str
    stream: bool
    prepend_input: bool
    sampling: dict[str, Any]
    returns: frozenset[str] = frozenset()


def read_inputs(pb_utils, request, names) -> dict[str, Any]:
    """Each named input as a Python value (bytes for strings, numpy scalar for BOOL), or None if absent."""
    values: dict[str, Any] = {}
    for name in names:
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        if tensor is None:
            values[name] = None
            continue
        array = tensor.as_numpy()
        values[name] = array.reshape(-1)[0] if array.size else None
    return values


def _python() -> str:
    # Inside Triton's stub sys.executable may name the stub; the stub itself runs the first python3 on PATH.
    if Path(sys.executable).name.startswith("python"):
        return sys.executable
    return shutil.which("python3") or "python3"


def _count(environ, name: str, default: int) -> int:
    return whole_number_from_environ(environ, name, default, "requests (0 or more)")


def _seconds(environ, name: str, default: float) -> float:
    value, raw = number_from_environ(environ, name, default, "seconds")
    if value <= 0:
        raise ValueError(f"{name}: must be above 0, got {raw!r}")
    return value


# EMF metric of the lines the log writer dropped while the container's log stream was slow.
LOG_LINES_DROPPED = "LogLinesDropped"


class StreamingModel:
    """Base for the Triton Python-backend models; subclasses say how a request is parsed and prepared."""

    def initialize(self, args: dict[str, str]) -> None:
        # Before torch is imported: the stub may start under the C locale, which breaks tokenizer files.
        locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
        import triton_python_backend_utils as pb_utils

        from assistant.metrics import serving_dimensions, slow_first_token_ms
        from assistant.request import RequestLimits
        from serving.engine_loop import EngineLoop
        from serving.engine_stats import EngineStats
        from serving.host_gauge import HostGaugeBoard
        from serving.log_writer import LineWriter
        from serving.outbox import Outbox
        from serving.prepare_worker import PrepareWorker
        from serving.replicas import placement
        from serving.triton_metrics import ServingMetrics

        self.pb = pb_utils
        self.model_name = args["model_name"]
        model_config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(model_config):
            raise pb_utils.TritonModelException(
                f"{self.model_name}: config.pbtxt must make the model decoupled"
            )
        self.limits = RequestLimits.from_env()
        self.slo_ms = slow_first_token_ms()
        self.gauge_interval_s = _seconds(os.environ, GAUGE_INTERVAL_ENV, 10.0)
        from serving.engine_watch import DEFAULT_STALL_S, STALL_ENV

        self.stall_s = _seconds(os.environ, STALL_ENV, DEFAULT_STALL_S)
        self.drain_timeout_s = _seconds(os.environ, DRAIN_TIMEOUT_ENV, 10.0)
        from serving.gil_switch import apply_switch_interval

        # The loop, the outbox and the prepare worker share this process's GIL (serving/gil_switch.py).
        self.switch_interval_ms = apply_switch_interval(os.environ)
        self.emf_dimensions, self.emf_dimension_sets = serving_dimensions(self.model_name)
        model_json = Path(args["model_repository"]) / args["model_version"] / "model.json"
        settings = engine_settings(model_json, os.environ)
        self.replica = placement(
            args.get("model_instance_name", ""), settings["tensor_parallel_size"], os.environ
        )
        # Each replica is its own stub process: this variable reaches only this replica's engine.
        os.environ["NEURON_RT_VISIBLE_CORES"] = self.replica.visible_cores
        emit(f"{self.replica.describe(self.model_name)}; GIL switch interval {self.switch_interval_ms:g} ms")
        self.load_steps(settings)  # fail fast (e.g. a missing index) before the minutes-long engine start

        self.live: dict[str, Any] = {}  # request id -> LiveRequest; touched on the engine loop only
        self._busy_since: float | None = None  # when live last went from empty to not (engine loop writes)
        self._last_output = 0.0  # when any request last got an output from the engine
        self._watch = None
        self._leaving: threading.Thread | None = None  # the target groups being left (engine death)
        self._dying: threading.Thread | None = None  # stops the server once a dead engine's errors are out
        self.healthy = True
        self.draining = False
        self.outbox = Outbox()
        self.prepare_worker = PrepareWorker(self.prepare)
        # EMF lines: off the outbox thread, which sends every stream's tokens (serving/log_writer.py).
        self.log_writer = LineWriter(report_drops=self._drops_line)
        self.metrics = ServingMetrics(pb_utils, self.model_name, replica=self.replica.index)
        self.gauge_board = HostGaugeBoard.for_server(self.model_name, self.replica)
        self.engine_stats = EngineStats()
        self.serving_slots = int(settings["max_num_seqs"])
        self.max_queued = _count(os.environ, MAX_QUEUED_ENV, DEFAULT_QUEUE_MULTIPLE * self.serving_slots)
        # How long a request admitted into the queue may wait for its first output (serving/admission.py).
        self.queue_wait_budget_ms = queue_wait_budget_ms(os.environ)
        # Requests accepted and not finished: execute() (Triton's thread) admits, the engine loop releases.
        self._admitted = 0
        self._admission = threading.Lock()
        self._guard = subprocess.Popen(
            [_python(), "-m", "serving.orphan_guard", str(os.getpid()), self.model_name],
            cwd=str(Path(__file__).resolve().parents[1]),
        )
        try:
            self.engine = EngineLoop(settings, str(model_json), stat_loggers=[self.engine_stats.factory])
        except BaseException:
            self._stop_guard()
            raise
        # The engine's processes as started: one of them gone means the engine is dead, whether or not vLLM
        # noticed (its own monitor does not always wake a request that waits on a killed engine core).
        from serving.orphan_guard import descendants

        self._engine_processes = descendants(os.getpid())
        self._engine_processes.pop(self._guard.pid, None)
        self.engine.submit(self._gauge_loop())
        from serving.engine_watch import EngineWatch

        self._watch = EngineWatch(self._observe_engine, self._engine_died, stall_s=self.stall_s).start()
        # The start-up heap is frozen at the first request, not here: frozen inside initialize(), a server
        # of two models never saw the second's load finish (serving/gc_heap.py).
        self._heap_frozen = False

    # ---- hooks for subclasses ----
    def load_steps(self, settings: dict[str, Any]) -> None:
        """Open what the request steps need (an index); raise with a clear message if it is unusable."""

    def parse(self, request) -> ServingRequest:
        raise NotImplementedError

    def prepare(self, text: str) -> PreparedRequest:
        raise NotImplementedError

    # ---- Triton entry points ----
    def execute(self, requests):
        from assistant.request import RequestError
        from serving.outbox import LiveRequest

        if not getattr(self, "_heap_frozen", True):
            self._freeze_startup_heap()
        for request in requests:
            arrival = time.perf_counter()
            sender = request.get_response_sender()
            if not self.healthy or self.draining:
                reason = "the engine is not healthy" if not self.healthy else "the model is shutting down"
                self._send_error_now(sender, f"{self.model_name} is unavailable: {reason}", "UNAVAILABLE")
                continue
            try:
                parsed = self.parse(request)
            except RequestError as err:
                self._send_error_now(sender, str(err), "INVALID_ARG")
                self.outbox.put(lambda: self._record(None, "rejected", None, 0, None, None))
                continue
            except Exception as err:  # an input this code did not foresee: still this request's error only
                logger.exception("could not read request inputs")
                self._send_error_now(
                    sender, f"could not read the request inputs: {type(err).__name__}: {err}"
                )
                self.outbox.put(lambda: self._record(None, "rejected", None, 0, None, None))
                continue
            admitted = self._admit()
            if admitted is Admission.REFUSED:
                self._send_error_now(
                    sender,
                    f"{self.model_name} is overloaded: {self.max_queued} requests already wait for its "
                    f"{self.serving_slots} batch slots; retry (another host may have room)",
                    "UNAVAILABLE",
                )
                properties = {"Stream": bool(parsed.stream), "ShedCause": "queue-full"}
                self.outbox.put(functools.partial(self._record, None, "shed", None, 0, None, properties, 0.0))
                continue
            live = LiveRequest(uuid.uuid4().hex, sender, arrival, parsed.stream)
            deadline = first_output_deadline(arrival, admitted, self.queue_wait_budget_ms)
            self.engine.submit(self._serve(live, parsed, deadline))
        return None

    def finalize(self) -> None:
        """Drain what is in flight, then stop the engine, its processes and the threads; within seconds."""
        from serving.orphan_guard import exit_timeout_s

        self.draining = True
        started = time.monotonic()
        # The stub's parent is Triton, whose command line holds the exit timeout.
        budget = shutdown_budget(exit_timeout_s(os.getppid()), self.drain_timeout_s)
        if self._watch is not None:  # the shutdown below ends the engine's processes on purpose
            self._watch.stop()
        deadline = started + budget.drain_s
        while time.monotonic() < deadline:
            # Asked of the loop with a timeout: a blocked loop must not hold the shutdown (and with it the
            # host, failing new requests fast) for ever.
            try:
                if not self.engine.run(self._live_count(), timeout_s=max(0.1, deadline - time.monotonic())):
                    break
            except concurrent.futures.TimeoutError:
                emit(f"{self.model_name}: the engine loop did not answer within the drain; stopping it")
                break
            time.sleep(0.2)
        drained = time.monotonic()
        engine_s = min(ENGINE_SHUTDOWN_TIMEOUT_S, max(1.0, started + budget.total_s - drained - 1.0))
        self.engine.stop(timeout_s=engine_s)
        engine_stopped = time.monotonic()
        self.prepare_worker.stop()
        self._kill_leftover_processes()
        self.gauge_board.leave()
        # The outbox sends what the drain and the engine's stop left queued (their last responses), the log
        # writer their EMF lines; the call to leave the target groups ends within its own deadline. Each
        # within its share of what the budget has left, so the finalize ends before Triton's exit timeout
        # (past it Triton kills the stub, and the stop is no longer graceful).
        leaving = self._leaving
        stop_in_turn(
            started + budget.total_s,
            [
                lambda timeout_s: self.outbox.stop(timeout_s=timeout_s),
                lambda timeout_s: self.log_writer.stop(timeout_s=timeout_s),
                lambda timeout_s: leaving.join(timeout=timeout_s) if leaving is not None else None,
            ],
        )
        self._stop_guard()
        emit(
            f"{self.model_name}: finalize took {time.monotonic() - started:.1f} s of {budget.total_s:.0f} s "
            f"(drain {drained - started:.1f} s, engine {engine_stopped - drained:.1f} s)",
        )
        # Release the metric families while Triton's shared memory still exists: left to interpreter exit,
        # their destructors write to unmapped memory and the stub segfaults.
        self.metrics = None
        gc.collect()

    def _freeze_startup_heap(self) -> None:
        """Once, at the first request, the load long finished: the start-up heap never becomes garbage, and
        a full collection walking it holds the GIL from every stream for a long time (serving/gc_heap.py)."""
        from serving.gc_heap import freeze_startup_heap

        self._heap_frozen = True
        frozen = freeze_startup_heap()
        emit(f"{self.model_name}: start-up heap frozen for the garbage collector ({frozen:,} objects)")

    def _admit(self) -> Admission:
        """One more request into a slot or the queue, unless the replica already holds both full."""
        with self._admission:
            admitted = admission(self._admitted, self.serving_slots, self.max_queued)
            if admitted is not Admission.REFUSED:
                self._admitted += 1
            return admitted

    def _release(self) -> None:
        with self._admission:
            self._admitted -= 1

    # ---- the request, on the engine loop ----
    async def _live_count(self) -> int:
        return len(self.live)

    async def _serve(self, live, parsed: ServingRequest, deadline: float | None = None) -> None:
        """Prepare and stream one request; `deadline` (perf_counter seconds): a queued request's first
        output must come by then, or it is aborted in the engine and shed (serving/admission.py)."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        from assistant.request import RequestError

        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        live.on_cancel = lambda: loop.call_soon_threadsafe(task.cancel)
        if not self.live:
            self._busy_since = time.monotonic()
        self.live[live.request_id] = live
        self.outbox.watch(live)
        self._publish_counts()
        outcome, ttft_ms, prepared, prepare_time = "failed", None, None, None
        input_tokens, output_tokens = None, 0
        first_output_due, shed_cause = None, None
        try:
            # Only until the first output: the timeout cancels this task, which closes the engine's generator
            # and so aborts its request (vLLM's AsyncLLM.generate aborts on CancelledError/GeneratorExit).
            async with asyncio.timeout(
                None if deadline is None else deadline - time.perf_counter()
            ) as first_output_due:
                # Off the loop, which serves every stream's tokens (serving/prepare_worker.py): one worker, in
                # arrival order; a cancel while it waits or runs raises CancelledError here.
                prepared, prepare_time = await self.prepare_worker.prepare(parsed.text)
                if live.cancelled:  # gone while we planned and retrieved: never reaches the engine
                    raise asyncio.CancelledError
                kind = RequestOutputKind.DELTA if parsed.stream else RequestOutputKind.CUMULATIVE
                sampling = dict(parsed.sampling)
                # The chat turn's end tokens stop the answer, unless the client asked to ignore the end of
                # sequence (benchmarks and tests that need a fixed length).
                if prepared.stop_token_ids and not sampling.get("ignore_eos"):
                    sampling["stop_token_ids"] = sorted(
                        set(sampling.get("stop_token_ids") or []) | set(prepared.stop_token_ids)
                    )
                params = SamplingParams(**sampling, output_kind=kind)
                products_json = json.dumps(prepared.products) if self.has_products else None
                last = None
                choices: dict[int, Any] = {}
                # aclosing: however the loop ends (cancel, error), closing the generator aborts the engine
                # request, so its batch slot is freed at once rather than when the generator is collected.
                outputs = self.engine.engine.generate({"prompt": prepared.prompt}, params, live.request_id)
                async with contextlib.aclosing(outputs):
                    async for output in outputs:
                        self._last_output = time.monotonic()  # a sign of life even where no stat logger runs
                        if input_tokens is None and output.prompt_token_ids is not None:
                            input_tokens = len(output.prompt_token_ids)
                        if not live.first_token:
                            live.first_token = True
                            first_output_due.reschedule(None)  # from here on, the stream runs its course
                            self._publish_counts()
                            if parsed.stream:  # a non-streaming client's first byte is its last
                                ttft_ms = (time.perf_counter() - live.arrival) * 1000.0
                        if parsed.stream:
                            output_tokens += sum(len(choice.token_ids) for choice in output.outputs)
                            response = self._response(output, parsed, products_json)
                            products_json = None
                            self.outbox.send(
                                live, response, self._final_flag(output.finished), final=output.finished
                            )
                        else:
                            # With n > 1, vLLM reports each choice in outputs of its own: keep the latest.
                            for choice in output.outputs:
                                choices[choice.index] = choice
                        last = output
                if not parsed.stream and last is not None:
                    final = SimpleNamespace(
                        outputs=[choices[index] for index in sorted(choices)],
                        prompt_token_ids=last.prompt_token_ids,
                    )
                    output_tokens = sum(len(choice.token_ids) for choice in final.outputs)
                    response = self._response(final, parsed, products_json)
                    self.outbox.send(live, response, self._final_flag(True), final=True)
                if not live.final_queued:  # the engine produced nothing at all; still close the stream
                    self.outbox.send(live, None, self._final_flag(True), final=True)
                outcome = "completed"
        except asyncio.CancelledError:
            if live.cancelled:
                # As the stock backend: a cancelled request ends with a CANCELLED error, not an empty final.
                outcome = "cancelled"
                self._queue_error(live, "Request was cancelled", "CANCELLED")
            elif not self.healthy:  # the engine died under this request
                self._queue_error(live, f"{self.model_name} is unavailable: the engine died", "UNAVAILABLE")
            else:  # the model is shutting down under this request
                outcome = "aborted"
                self._queue_error(live, f"{self.model_name} is shutting down", "UNAVAILABLE")
        except RequestError as err:  # the request's prompt does not fit the engine: the client's mistake
            outcome = "rejected"
            self._queue_error(live, str(err), "INVALID_ARG")
        except TimeoutError as err:
            if first_output_due is not None and first_output_due.expired():
                # Queued past its budget: overload, not a failure, so shed as a full queue is (UNAVAILABLE).
                outcome, shed_cause = "shed", "queue-wait"
                self._queue_error(
                    live, queue_wait_shed_message(self.model_name, self.queue_wait_budget_ms), "UNAVAILABLE"
                )
            else:
                self._request_failed(live, err)
        except Exception as err:  # one request's failure must not take the model down, but a dead engine does
            self._request_failed(live, err)
        finally:
            self._release()
            # A stream that ends without a token still tells how long its client waited for one.
            waited_ms = (
                (time.perf_counter() - live.arrival) * 1000.0
                if parsed.stream and not live.first_token
                else None
            )
            self.live.pop(live.request_id, None)
            if not self.live:
                self._busy_since = None
                self.engine_stats.idle()
            properties = {
                "Intent": prepared.intent if prepared and prepared.intent else "none",
                # Plan + retrieve + prompt time: the assistant's own share of TTFT (a property, not a metric),
                # and the worker's CPU for it (the wall time also holds waits for a core or the GIL).
                "PrepareMs": None if prepare_time is None else round(prepare_time.wall_ms, 3),
                "PrepareCpuMs": None if prepare_time is None else round(prepare_time.cpu_ms, 3),
                # Of the wall time, waiting for a core (the kernel's count) and the rest (mostly the GIL).
                "PrepareRunQueueMs": (
                    None
                    if prepare_time is None or prepare_time.run_queue_ms is None
                    else round(prepare_time.run_queue_ms, 3)
                ),
                "Stream": parsed.stream,
                **({"ShedCause": shed_cause} if shed_cause else {}),
            }
            self.outbox.put(
                lambda: self._record(
                    live.request_id, outcome, ttft_ms, output_tokens, input_tokens, properties, waited_ms
                )
            )
            # After its record: both go through the outbox in order, so a reader that sees the request out
            # of flight sees its counters too (the gauge once fell first, and a test read between the two).
            self._publish_counts()

    def _request_failed(self, live, err: Exception) -> None:
        if self._engine_dead(err):
            self._engine_died(err)
            self._queue_error(
                live, f"{self.model_name} is unavailable: the engine died ({err})", "UNAVAILABLE"
            )
        else:
            logger.exception("request %s failed", live.request_id)
            self._queue_error(live, f"Error generating stream: {type(err).__name__}: {err}")

    has_products = False

    def _final_flag(self, final: bool) -> int:
        return self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL if final else 0

    def _response(self, output, parsed: ServingRequest, products_json: str | None):
        from serving.stock_compat import logprobs_json

        pb = self.pb
        choices = output.outputs
        prefix = parsed.text if parsed.prepend_input else ""  # only ever for the one non-streaming response
        texts = [(prefix + choice.text).encode("utf-8") for choice in choices]
        tensors = [pb.Tensor("text_output", np.array(texts, dtype=np.object_))]
        if self.has_products and products_json is not None:
            tensors.append(pb.Tensor("products", np.array([products_json.encode("utf-8")], dtype=np.object_)))
        returns = parsed.returns
        if "return_finish_reason" in returns:
            reasons = [str(choice.finish_reason).encode("utf-8") for choice in choices]
            tensors.append(pb.Tensor("finish_reason", np.array(reasons, dtype=np.object_)))
        if "return_cumulative_logprob" in returns:
            values = [choice.cumulative_logprob or 0.0 for choice in choices]
            tensors.append(pb.Tensor("cumulative_logprob", np.array(values, dtype=np.float32)))
        if "return_logprobs" in returns:
            values = [logprobs_json(choice.logprobs) for choice in choices]
            tensors.append(pb.Tensor("logprobs", np.array(values, dtype=np.object_)))
        if "return_num_input_tokens" in returns:
            count = len(output.prompt_token_ids or [])
            tensors.append(pb.Tensor("num_input_tokens", np.array(count, dtype=np.uint32)))
        if "return_num_output_tokens" in returns:
            counts = [len(choice.token_ids) for choice in choices]
            tensors.append(pb.Tensor("num_output_tokens", np.array(counts, dtype=np.uint32)))
        return pb.InferenceResponse(output_tensors=tensors)

    def _error_response(self, message: str, code: str | None):
        error_code = getattr(self.pb.TritonError, code, None) if code else None
        error = (
            self.pb.TritonError(message) if error_code is None else self.pb.TritonError(message, error_code)
        )
        return self.pb.InferenceResponse(output_tensors=[], error=error)

    def _queue_error(self, live, message: str, code: str | None = None) -> None:
        if not live.final_queued:
            self.outbox.send(live, self._error_response(message, code), self._final_flag(True), final=True)

    def _send_error_now(self, sender, message: str, code: str | None = None) -> None:
        try:
            sender.send(self._error_response(message, code), flags=self._final_flag(True))
        except Exception:  # the stream may already be closed; the request is over either way
            logger.exception("could not send the error response")

    # ---- engine health ----
    def _engine_dead(self, err: BaseException) -> bool:
        from vllm.v1.engine.exceptions import EngineDeadError

        return isinstance(err, EngineDeadError) or bool(getattr(self.engine.engine, "errored", False))

    def _engine_died(self, err: BaseException | str) -> None:
        """Out of service, from any thread: the server stops, so its readiness fails at once (HTTP and gRPC)
        and the process exits; ECS replaces the task. Unloading the model alone would leave the server's
        readiness green (with --strict-readiness Triton skips unloaded models), and the ALB's gRPC check
        (ServerReady) would keep sending streams to a host that cannot serve them."""
        if not self.healthy:
            return
        self.healthy = False
        emit(
            f"{self.model_name}: the vLLM engine is dead ({err}); "
            "leaving the target groups and stopping the server so the host is replaced",
            sys.stderr,
        )
        # Out of the load balancer's rotation first, on a thread of its own, while the server stops: a dead
        # target draws far more than its share of requests until it leaves (serving/leave_target_groups.py).
        from serving.leave_target_groups import start_leaving

        self._leaving = start_leaving(f"{self.model_name}: the vLLM engine is dead ({err})", self.model_name)
        # Requests waiting on a dead engine would wait forever: end them now, each with its error, and stop
        # the server only once those errors are handed to Triton. Stopped first, Triton closed a stream before
        # its error went out, and the client got an empty final response: a clean end to an answer cut short
        # (a real-server test saw it in one CI run of three). On a thread of its own: this may run on the
        # engine loop, which has to run the cancels.
        self.engine.loop.call_soon_threadsafe(self._cancel_live)
        self._dying = threading.Thread(
            target=self._stop_server_once_errors_sent, name="engine-died", daemon=True
        )
        self._dying.start()

    def _stop_server_once_errors_sent(self) -> None:
        """Stop the server once every live request has ended and the outbox has sent what they queued (their
        errors), or after ERRORS_DELIVERY_S whatever is left: a blocked loop must not keep a dead host up."""
        deadline = time.monotonic() + ERRORS_DELIVERY_S
        while self.live and time.monotonic() < deadline:
            time.sleep(0.02)
        sent = threading.Event()
        self.outbox.put(sent.set)  # runs after every response queued before it
        sent.wait(timeout=max(0.0, deadline - time.monotonic()))
        self._stop_server()

    def _cancel_live(self) -> None:
        for live in list(self.live.values()):
            live.on_cancel()

    def _stop_server(self) -> None:
        """SIGTERM to Triton (this stub's parent): its graceful stop fails readiness first, then unloads the
        models (finalize() here) and exits. Where the parent is not Triton, unload this model instead."""
        parent = os.getppid()
        try:
            parent_name = Path(f"/proc/{parent}/comm").read_text().strip()
        except OSError:
            parent_name = ""
        if parent_name.startswith("tritonserver"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(parent, signal.SIGTERM)
            return

        def unload() -> None:
            try:
                self.pb.unload_model(self.model_name)
            except Exception:
                logger.exception("could not unload %s; exiting so the host is replaced", self.model_name)
                os._exit(1)

        self.outbox.put(unload)

    def _observe_engine(self):
        from serving.engine_watch import EngineState

        return EngineState(
            now=time.monotonic(),
            errored=bool(getattr(self.engine.engine, "errored", False)),
            gone_processes=tuple(self._engine_processes_gone()),
            in_flight=len(self.live),
            busy_since=self._busy_since,
            last_step=max(self.engine_stats.last_step, self._last_output),
        )

    def _engine_processes_gone(self) -> list[int]:
        from serving.orphan_guard import process_start

        return [pid for pid, started in self._engine_processes.items() if process_start(pid) != started]

    # ---- metrics ----
    def _counts(self) -> tuple[int, int]:
        in_flight = len(self.live)
        queued = sum(1 for live in self.live.values() if not live.first_token)
        return in_flight, queued

    def _publish_counts(self) -> None:
        in_flight, queued = self._counts()
        self.outbox.put(lambda: self.metrics.live_counts(in_flight, queued))

    async def _gauge_loop(self) -> None:
        """Every interval, whether or not a request finished: the host gauge line and the engine's stats."""
        while True:
            await asyncio.sleep(self.gauge_interval_s)
            in_flight, queued = self._counts()
            engine = self.engine_stats.snapshot
            self.outbox.put(functools.partial(self._publish_gauge, in_flight, queued, engine))

    def _publish_gauge(self, in_flight: int, queued: int, engine) -> None:
        from assistant.metrics import emf_line, host_gauge_record

        self.metrics.engine(engine, serving_slots=self.serving_slots)
        gauge = self.gauge_board.post(in_flight, queued, engine.kv_cache_usage, self.serving_slots)
        if gauge is not None:  # one replica per host writes the host's line
            record = host_gauge_record(
                gauge,
                dimensions=self.emf_dimensions,
                dimension_sets=self.emf_dimension_sets,
                properties={"Kind": "host-gauge"},
            )
            self.log_writer.write(emf_line(record))

    def _drops_line(self, count: int) -> str:
        """The EMF line that reports metric lines dropped while the log stream was slow."""
        from assistant.metrics import MetricValue, emf_line, emf_record, namespace_from_env

        return emf_line(
            emf_record(
                namespace=namespace_from_env(),
                dimensions=self.emf_dimensions,
                metrics=[MetricValue(LOG_LINES_DROPPED, count, "Count")],
                timestamp_ms=int(time.time() * 1000),
                properties={"Kind": "log-lines-dropped"},
                dimension_sets=self.emf_dimension_sets,
            )
        )

    def _record(
        self, request_id, outcome, ttft_ms, output_tokens, input_tokens, properties, waited_ms=None
    ) -> None:
        """On the outbox thread: the Prometheus counters and the request's EMF line."""
        from assistant.metrics import emf_line, request_metrics_record

        self.metrics.finished(
            outcome=outcome, ttft_ms=ttft_ms, output_tokens=output_tokens, input_tokens=input_tokens
        )
        record = request_metrics_record(
            output_tokens=output_tokens,
            input_tokens=input_tokens,
            # Rejected requests (client mistakes) stay out of the error share: RequestRejected instead.
            failed=None if outcome == "rejected" else outcome == "failed",
            shed=outcome == "shed",
            waited_ms=waited_ms,
            ttft_ms=ttft_ms,
            slow_first_token_ms=self.slo_ms,
            dimensions=self.emf_dimensions,
            dimension_sets=self.emf_dimension_sets,
            properties={"RequestId": request_id or "none", "Outcome": outcome, **(properties or {})},
        )
        # stdout of the stub reaches the container log, which the awslogs driver ships to CloudWatch.
        self.log_writer.write(emf_line(record))

    def _kill_leftover_processes(self) -> None:
        """Engine processes still alive after the shutdown (a worker stuck in a step) go now, not never."""
        from serving.orphan_guard import descendants, kill_recorded

        leftovers = descendants(os.getpid())
        guard = getattr(self, "_guard", None)
        if guard is not None:
            leftovers.pop(guard.pid, None)
        killed = kill_recorded(leftovers)
        if killed:
            emit(f"{self.model_name}: killed engine processes {killed} that outlived the shutdown")

    def _stop_guard(self) -> None:
        guard = getattr(self, "_guard", None)
        if guard is not None and guard.poll() is None:
            guard.kill()
            guard.wait(timeout=5)


def with_returns(parsed: ServingRequest, returns: frozenset[str]) -> ServingRequest:
    return replace(parsed, returns=returns)
