"""How a model ends, on servers of their own: engine death and stall, overload, a stop after a cancellation
burst, replicas.

Each test starts its own Triton (the pass-through model, ~3 GB per engine) and checks that nothing it
started is left running afterwards.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient

from local.client import StreamingClient
from local.demo_assets import DemoAssets
from local.triton_server import LOCAL_EXIT_TIMEOUT_S, TritonServer
from tests.container.conftest import (
    SERVER_START_TIMEOUT_S,
    TEST_ENVIRONMENT,
    emf_lines,
    engine_processes,
    process_group_members,
    read_metrics,
    wait_for,
)

pytestmark = [pytest.mark.serving, pytest.mark.vllm_version]


def own_server(
    demo_assets: DemoAssets, work_dir: Path, *, replicas: int = 1, environment: dict[str, str] | None = None
) -> TritonServer:
    return TritonServer(
        model_dir=demo_assets.model_dir,
        index_dir=demo_assets.index_dir,
        work_dir=work_dir,
        pick_ports=True,  # chosen at start, chosen again if taken before Triton binds
        models=("passthrough",),
        extra_environment={**TEST_ENVIRONMENT, **(environment or {})},
        replicas=replicas,
    )


def http_server_ready(server: TritonServer) -> bool:
    try:
        with urllib.request.urlopen(f"http://{server.http_url}/v2/health/ready", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def grpc_server_ready(server: TritonServer) -> bool:
    """gRPC ServerReady, as the ALB's gRPC health check calls it: ready=true, or anything else."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        return bool(client.is_server_ready(client_timeout=5))
    except Exception:  # refused, unavailable, timed out: not ready
        return False
    finally:
        client.close()


def engine_core(server: TritonServer) -> int:
    engines = engine_processes(server.process.pid)
    core = [pid for pid, command in engines.items() if "EngineCore" in command]
    assert core, f"no EngineCore among {engines}"
    return core[0]


def out_of_rotation_within(server: TritonServer, seconds: float) -> tuple[float | None, float | None]:
    """Seconds until HTTP /v2/health/ready and gRPC ServerReady each stopped answering ready (None: never)."""
    started = time.monotonic()
    http_s = grpc_s = None
    while time.monotonic() - started < seconds and (http_s is None or grpc_s is None):
        if http_s is None and not http_server_ready(server):
            http_s = time.monotonic() - started
        if grpc_s is None and not grpc_server_ready(server):
            grpc_s = time.monotonic() - started
        time.sleep(0.5)
    return http_s, grpc_s


def stays_out_until_exit(server: TritonServer, timeout_s: float = 90.0) -> bool:
    """True when neither readiness comes back before the server exits (a model unload passes through
    not-ready for a moment; what matters is that the host stays out)."""
    deadline = time.monotonic() + timeout_s
    while server.process.poll() is None and time.monotonic() < deadline:
        if http_server_ready(server) or grpc_server_ready(server):
            return False
        time.sleep(0.5)
    return server.process.poll() is not None


def exits_leaving_nothing(server: TritonServer, timeout_s: float = 90.0) -> list[int] | bool:
    """Wait for Triton to exit by itself, then for its process group to empty (the guard gets a few seconds
    to act); True, or what is left."""
    group = server.process.pid
    server.process.wait(timeout=timeout_s)
    return wait_for(lambda: not process_group_members(group), timeout_s=10) or process_group_members(group)


def model_ready(server: TritonServer, model: str = "passthrough") -> bool:
    try:
        with urllib.request.urlopen(
            f"http://{server.http_url}/v2/models/{model}/ready", timeout=5
        ) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError):
        return False


def test_a_killed_engine_core_takes_the_server_out_of_rotation_and_leaves_nothing(
    demo_assets: DemoAssets, tmp_path: Path
) -> None:
    """Server-level readiness, HTTP and gRPC, goes within 30 s: unloading the model alone would leave it
    green (strict readiness skips unloaded models) and the ALB's gRPC check (ServerReady) with it."""
    server = own_server(demo_assets, tmp_path)
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    try:
        assert http_server_ready(server) and grpc_server_ready(server)
        killed_at = time.monotonic()
        os.kill(engine_core(server), signal.SIGKILL)
        http_s, grpc_s = out_of_rotation_within(server, 30)
        assert http_s is not None, "HTTP /v2/health/ready stayed ready for 30 s with a dead engine"
        assert grpc_s is not None, "gRPC ServerReady stayed ready for 30 s with a dead engine"
        assert stays_out_until_exit(server), "the server answered ready again with a dead engine"
        leftovers = exits_leaving_nothing(server)
        # The ALB's gRPC check sees only a status code (ServerReady answers OK with ready=false): the
        # target fails it once the server stops listening, which must leave the check time within a minute.
        exited_s = time.monotonic() - killed_at
    finally:
        server.stop()
    log = server.log_path.read_text(errors="replace")
    assert "the vLLM engine is dead" in log and "stopping the server" in log
    assert leftovers is True, f"processes outlived the server: {leftovers}"
    assert exited_s < 30, f"the server took {exited_s:.0f} s to exit after its engine died"


def test_a_stalled_engine_takes_the_server_out_of_rotation_and_fails_its_streams(
    demo_assets: DemoAssets, tmp_path: Path
) -> None:
    """A stopped engine core (SIGSTOP) with streams in flight: no step for ENGINE_STALL_SECONDS is a dead
    engine. A stream that waited past the objective without a token counts SlowFirstToken=1."""
    server = own_server(demo_assets, tmp_path, environment={"ENGINE_STALL_SECONDS": "15"})
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    core = engine_core(server)
    try:
        # vLLM 0.13 on CPU takes 6 s and more for a fresh engine's first step, which a 5 s watch rightly calls
        # a stall: 15 s, and one request first, so that this test is about an engine stopped while serving.
        with StreamingClient(server.grpc_url) as client:
            warm = client.ask("warm up", model="passthrough", sampling={"max_tokens": 4}, timeout_s=120)
        assert warm.error is None, warm.error
        first_tokens = threading.Barrier(3)
        results = []

        def long_stream(number: int) -> None:
            with StreamingClient(server.grpc_url) as client:
                tokens = []

                def chunk(text: str) -> None:
                    tokens.append(text)
                    if len(tokens) == 1:
                        first_tokens.wait(timeout=60)

                results.append(
                    client.ask(
                        f"stall {number}",
                        model="passthrough",
                        sampling={"max_tokens": 4000, "ignore_eos": True},
                        on_chunk=chunk,
                        timeout_s=90,
                    )
                )

        streams = [threading.Thread(target=long_stream, args=(n,)) for n in range(2)]
        for thread in streams:
            thread.start()
        first_tokens.wait(timeout=60)
        os.kill(core, signal.SIGSTOP)
        with StreamingClient(server.grpc_url) as client:  # waits on the stopped engine without a token
            waiting = client.ask("no token", model="passthrough", sampling={"max_tokens": 4}, timeout_s=90)
        http_s, grpc_s = out_of_rotation_within(server, 30)
        for thread in streams:
            thread.join(timeout=60)
        assert http_s is not None and grpc_s is not None, "a stalled engine left the server ready"
        assert stays_out_until_exit(server), "the server answered ready again with a stalled engine"
        assert waiting.error is not None and "unavailable" in waiting.error, waiting.error
        assert len(results) == 2 and all(result.error for result in results), "streams hung on the stall"
        leftovers = exits_leaving_nothing(server)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(core, signal.SIGCONT)
        server.stop()
    log = server.log_path.read_text(errors="replace")
    assert "no engine step for" in log and "ENGINE_STALL_SECONDS=15" in log
    slow_without_token = [
        record
        for record in emf_lines(server)
        if record.get("SlowFirstToken") == 1 and "TimeToFirstToken" not in record
    ]
    assert slow_without_token, "the stream that waited past the objective without a token was not counted"
    assert leftovers is True, f"processes outlived the server: {leftovers}"


def test_a_burst_of_four_times_the_slots_sheds_the_excess_at_once(
    demo_assets: DemoAssets, tmp_path: Path
) -> None:
    """16 batch slots (engine-cpu.json max_num_seqs) and the default queue of one more batch. A burst of 64
    (4x the slots): the first 32 long streams fill slots and queue; the next 32, sent while those still run,
    over gRPC and HTTP, are all refused at once with UNAVAILABLE and counted as shed."""
    server = own_server(demo_assets, tmp_path)
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    slots, burst = 16, 64
    in_flight_key = 'llm_requests_in_flight{model="passthrough",replica="0"}'
    clients = contextlib.ExitStack()
    try:
        admitted_pool = ThreadPoolExecutor(max_workers=2 * slots)
        # Every stream opened before any request is sent: opening 32 gRPC streams takes seconds here, and
        # the first requests would finish before the last arrived.
        streams = [clients.enter_context(StreamingClient(server.grpc_url)) for _ in range(2 * slots)]

        def long_stream(number: int):
            return streams[number].ask(
                f"fill {number}",
                model="passthrough",
                # Long enough to outlast the last stream's arrival and the excess on an idle machine.
                sampling={"max_tokens": 1500, "ignore_eos": True},
                timeout_s=600,
            )

        admitted = [admitted_pool.submit(long_stream, number) for number in range(2 * slots)]
        full = wait_for(lambda: read_metrics(server).get(in_flight_key, 0) >= 2 * slots, timeout_s=60)
        assert full, "the first 32 streams were not all admitted"

        def grpc_excess(number: int):
            with StreamingClient(server.grpc_url) as client:
                return client.ask(f"excess {number}", model="passthrough", sampling={"max_tokens": 8})

        def http_excess(number: int) -> tuple[int, str, float]:
            started = time.monotonic()
            request = urllib.request.Request(
                f"http://{server.http_url}/v2/models/passthrough/generate",
                data=json.dumps({"text_input": f"excess {number}", "parameters": {"max_tokens": 8}}).encode(),
                method="POST",
            )
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    return response.status, response.read().decode(), time.monotonic() - started
            except urllib.error.HTTPError as err:
                return err.code, err.read().decode(), time.monotonic() - started

        excess = burst - 2 * slots
        with ThreadPoolExecutor(max_workers=excess) as pool:
            grpc_results = list(pool.map(grpc_excess, range(excess // 2)))
            http_results = list(pool.map(http_excess, range(excess // 2)))
        still_running = sum(not future.done() for future in admitted)
        served = [future.result() for future in admitted]
        admitted_pool.shutdown()
        assert still_running >= 2 * slots - 2, "the admitted streams ended before the excess arrived"
        assert all(result.error is None for result in served), [r.error for r in served if r.error]
        for result in grpc_results:
            assert result.error and "overloaded" in result.error, result.error
            assert result.total_s < 10, f"a shed request waited {result.total_s:.1f} s"
        for status, body, seconds in http_results:
            # The model answers UNAVAILABLE; Triton 2.51's generate endpoint answers any model error 400.
            assert status in (400, 503) and "overloaded" in body, (status, body)
            assert seconds < 10
        shed_key = 'llm_requests_total{model="passthrough",outcome="shed",replica="0"}'
        assert wait_for(lambda: read_metrics(server).get(shed_key) == excess, timeout_s=20), read_metrics(
            server
        ).get(shed_key)
        shed_lines = wait_for(
            lambda: [r for r in emf_lines(server) if r.get("Shed") == 1] or None, timeout_s=20
        )
        assert shed_lines and len(shed_lines) == excess
        assert all(record["Outcome"] == "shed" and record["RequestFailed"] == 1 for record in shed_lines)

        # A stream's EMF line goes through the log writer's thread, after its final response: wait for all.
        def completed_lines() -> list[dict]:
            return [record for record in emf_lines(server) if record.get("Outcome") == "completed"]

        wait_for(lambda: len(completed_lines()) >= 2 * slots, timeout_s=20)
        completed = completed_lines()
        assert len(completed) == 2 * slots and all(record["Shed"] == 0 for record in completed)
    finally:
        clients.close()
        server.stop()


QUEUE_WAIT_BUDGET_MS = 400


def test_a_queued_request_without_a_first_token_within_its_budget_is_shed(
    demo_assets: DemoAssets, tmp_path: Path
) -> None:
    """One batch slot, a queue of one and a 400 ms queue-wait budget. While a long request holds the slot, a
    request admitted into the queue, streaming (gRPC) and then non-streaming (HTTP), is answered UNAVAILABLE
    once its budget has passed, not served after the long one: aborted in the engine (never prefilled),
    counted as shed. The long request completes and the server keeps serving."""
    server = own_server(
        demo_assets,
        tmp_path,
        environment={
            "ENGINE_MAX_NUM_SEQS": "1",
            "MAX_QUEUED_PER_REPLICA": "1",
            "QUEUE_WAIT_BUDGET_MS": str(QUEUE_WAIT_BUDGET_MS),
            # The tiny model's whole length (its 4,096 positions): the long request decodes for about 14 s on
            # a quiet machine, twice as long as at the local engine's 2,048 (at 2,000 tokens its slot once
            # came free while the test still sent its second request, which was then served: CI, 2026-12-06).
            "ENGINE_MAX_MODEL_LEN": "4096",
        },
    )
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    in_flight_key = 'llm_requests_in_flight{model="passthrough",replica="0"}'
    try:
        held: list[tuple[int, str, float]] = []

        def hold_the_slot() -> None:
            # Not streamed: its one response comes when the engine has made its last token, so it leaves no
            # backlog of token responses in the outbox ahead of the sheds' answers (streamed, the 4,000
            # responses came to the client seconds behind the engine, and a shed's answer waited behind
            # them: 5.6 s in CI, 2026-12-06), and it ends when the slot is free, not when its reader is done.
            generate = urllib.request.Request(
                f"http://{server.http_url}/v2/models/passthrough/generate",
                data=json.dumps(
                    {"text_input": "hold the slot", "parameters": {"max_tokens": 4000, "ignore_eos": True}}
                ).encode(),
                method="POST",
            )
            with urllib.request.urlopen(generate, timeout=600) as response:
                held.append((response.status, response.read().decode(), time.monotonic()))

        # Both queued requests' connections are open before the slot is taken: on a busy machine setting one
        # up has taken seconds (a gRPC stream 17 s, beside two CPU hogs), and the test is about when the
        # model answers, not when the client gets a connection.
        grpc_client = StreamingClient(server.grpc_url)
        assert grpc_client.client.is_server_ready()
        host, port = server.http_url.rsplit(":", 1)
        http_connection = http.client.HTTPConnection(host, int(port), timeout=120)
        http_connection.connect()
        holder = threading.Thread(target=hold_the_slot)
        holder.start()
        assert wait_for(lambda: read_metrics(server).get(in_flight_key) == 1, timeout_s=120), (
            "the long request never reached the model"
        )
        with grpc_client:
            queued = grpc_client.ask("wait for the slot", model="passthrough", sampling={"max_tokens": 8})
        grpc_answered = time.monotonic()
        started = time.monotonic()
        http_connection.request(
            "POST",
            "/v2/models/passthrough/generate",
            body=json.dumps({"text_input": "wait again", "parameters": {"max_tokens": 8}}),
            headers={"Content-Type": "application/json"},
        )
        with http_connection.getresponse() as response:
            status, body = response.status, response.read().decode()
        http_connection.close()
        http_s = time.monotonic() - started
        slot_still_held = holder.is_alive()
        holder.join(timeout=600)
        with StreamingClient(server.grpc_url) as client:
            after = client.ask("after the sheds", model="passthrough", sampling={"max_tokens": 8})

        # Shed while the long request still held the slot, not served after it: the property, whatever the
        # machine's speed (a bar in seconds here failed a shed answered in 7.7 s on a busy CI machine).
        assert slot_still_held, "the queued requests were answered only once the long request had ended"
        assert held and grpc_answered < held[0][2], "the gRPC request was answered after the long one ended"
        cause = f"no batch slot freed within {QUEUE_WAIT_BUDGET_MS} ms of arrival"
        assert queued.error and "overloaded" in queued.error and cause in queued.error, queued.error
        assert queued.total_s >= QUEUE_WAIT_BUDGET_MS / 1000, f"shed after {queued.total_s:.2f} s"
        # The model answers UNAVAILABLE; Triton 2.51's generate endpoint answers any model error 400.
        assert status in (400, 503) and cause in body, (status, body)
        assert http_s >= QUEUE_WAIT_BUDGET_MS / 1000, f"shed after {http_s:.2f} s"
        assert held and held[0][0] == 200, held
        assert after.error is None, after.error
        assert http_server_ready(server) and grpc_server_ready(server)

        shed_key = 'llm_requests_total{model="passthrough",outcome="shed",replica="0"}'
        assert wait_for(lambda: read_metrics(server).get(shed_key) == 2, timeout_s=20), read_metrics(
            server
        ).get(shed_key)

        def request_lines() -> list[dict] | None:  # once both completed requests have theirs
            lines = [record for record in emf_lines(server) if "Outcome" in record]
            return lines if sum(record["Outcome"] == "completed" for record in lines) == 2 else None

        records = wait_for(request_lines, timeout_s=20)
        assert records, [record.get("Outcome") for record in emf_lines(server)]
        shed_lines = [record for record in records if record.get("Shed") == 1]
        assert len(shed_lines) == 2, shed_lines
        assert all(
            record["Outcome"] == "shed"
            and record["ShedCause"] == "queue-wait"
            and record["ServingError"] == 0
            for record in shed_lines
        ), shed_lines
        assert sorted(record["Stream"] for record in shed_lines) == [False, True]
        # Aborted in the engine: had either stayed in vLLM's queue, the engine would have prefilled it once
        # the slot was free, before the last request, and its prompt would be in the engine's count.
        completed_prompts = sum(
            record["InputTokens"] for record in records if record["Outcome"] == "completed"
        )
        prompt_key = 'vllm:prompt_tokens_total{model="passthrough",replica="0"}'
        prefilled = wait_for(lambda: read_metrics(server).get(prompt_key) == completed_prompts, timeout_s=20)
        assert prefilled, (read_metrics(server).get(prompt_key), completed_prompts)
    finally:
        server.stop()


# Triton 2.51's gRPC frontend sometimes aborts the whole server in a burst of cancelled streams (its log:
# "API misuse of type GRPC_CALL_ERROR_TOO_MANY_OPERATIONS", then signal 6): an upstream fault of the server
# this kit tests on, not of the model. Seen once in several runs here; such a run is tried once more.
TRITON_GRPC_ABORT = "GRPC_CALL_ERROR_TOO_MANY_OPERATIONS"


def test_a_stop_after_a_cancellation_burst_is_graceful_and_leaves_nothing(
    demo_assets: DemoAssets, tmp_path: Path
) -> None:
    try:
        _cancellation_burst_then_stop(demo_assets, tmp_path / "first")
    except AssertionError:
        log = (tmp_path / "first" / "tritonserver.log").read_text(errors="replace")
        if TRITON_GRPC_ABORT not in log:
            raise
        _cancellation_burst_then_stop(demo_assets, tmp_path / "second")


def _cancellation_burst_then_stop(demo_assets: DemoAssets, tmp_path: Path) -> None:
    tmp_path.mkdir()
    server = own_server(demo_assets, tmp_path)
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    try:
        stop_at = time.monotonic() + 20

        def stream(number: int) -> int:
            done = 0
            while time.monotonic() < stop_at:
                with StreamingClient(server.grpc_url) as client:
                    cancel = {"cancel_after_chunks": 3} if number % 3 == 0 else {}
                    result = client.ask(
                        f"question {number}",
                        model="passthrough",
                        sampling={"max_tokens": 48, "ignore_eos": True},
                        **cancel,
                    )
                    assert result.error is None, result.error
                    done += 1
            return done

        with ThreadPoolExecutor(max_workers=24) as pool:
            finished = sum(pool.map(stream, range(24)))
        assert finished >= 24
        # The burst's last cancellations may still be settling; the stop must not wait on them.
        group = server.process.pid
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=60)
        stop_s = time.monotonic() - started
        # Triton is gone; whatever is left in its process group outlived it (the guard gets 5 s to act).
        leftovers = wait_for(lambda: not process_group_members(group), timeout_s=5) or process_group_members(
            group
        )
    finally:
        server.stop()
    log = server.log_path.read_text(errors="replace")
    assert "Exit timeout expired" not in log and "Non-graceful termination" not in log
    # Within the server's exit timeout, the engine shut down by finalize, not killed after it.
    assert stop_s < LOCAL_EXIT_TIMEOUT_S, f"the graceful stop took {stop_s:.1f} s"
    finalize = re.search(r"passthrough: finalize took ([0-9.]+) s of ([0-9.]+) s", log)
    assert finalize, "finalize reports its time"
    assert float(finalize.group(1)) <= float(finalize.group(2)), "finalize kept within its budget"
    assert leftovers is True, f"processes outlived the server: {leftovers}"


def test_model_processes_do_not_outlive_a_killed_triton(demo_assets: DemoAssets, tmp_path: Path) -> None:
    """Triton gone without a graceful stop (OOM kill, its exit timeout) while streams run: the stub, its
    engine and its guard must not stay behind (a stub was found running 50 minutes after its Triton)."""
    server = own_server(demo_assets, tmp_path)
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    group = server.process.pid
    try:
        started = threading.Event()

        def stream() -> None:
            with StreamingClient(server.grpc_url) as client:
                client.ask(
                    "long",
                    model="passthrough",
                    sampling={"max_tokens": 4000, "ignore_eos": True},
                    on_chunk=lambda _: started.set(),
                    timeout_s=30,
                )

        threads = [threading.Thread(target=stream, daemon=True) for _ in range(4)]
        for thread in threads:
            thread.start()
        assert started.wait(60)
        server.process.kill()  # Triton alone, not its process group
        server.process.wait(timeout=30)
        leftovers = wait_for(lambda: not process_group_members(group), timeout_s=15) or {
            pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:80] for pid in process_group_members(group)
        }
    finally:
        server.stop()
    assert leftovers is True, f"processes outlived Triton: {leftovers}"


def test_a_model_whose_finalize_outlasts_triton_does_not_outlive_it(
    demo_assets: DemoAssets, tmp_path: Path
) -> None:
    """A graceful stop whose finalize() outlasts Triton's exit timeout (here: a stopped engine core, whose
    shutdown waits out its own timeout): Triton exits first; the stub, its engine and its guard must follow
    within seconds, with no launcher to kill them (the reported stub ran 50 minutes after its Triton)."""
    server = own_server(demo_assets, tmp_path)
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    core = engine_core(server)
    group = server.process.pid
    try:
        os.kill(core, signal.SIGSTOP)  # idle, so the engine watch has nothing to notice
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=90)
        leftovers = wait_for(lambda: not process_group_members(group), timeout_s=20) or {
            pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:80] for pid in process_group_members(group)
        }
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(core, signal.SIGCONT)
        server.stop()
    assert leftovers is True, f"processes outlived Triton: {leftovers}"


def test_replicas_each_run_their_own_engine_on_their_own_cores(
    demo_assets: DemoAssets, tmp_path: Path
) -> None:
    server = own_server(demo_assets, tmp_path, replicas=2)
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    try:
        log = server.log_path.read_text(errors="replace")
        assert "passthrough: engine replica 1 of 2 on NeuronCores 0 " in log
        assert "passthrough: engine replica 2 of 2 on NeuronCores 1 " in log
        cores = set()
        for pid, command in engine_processes(server.process.pid).items():
            if "EngineCore" in command:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                cores |= {
                    item.split(b"=", 1)[1] for item in environ if item.startswith(b"NEURON_RT_VISIBLE_CORES=")
                }
        assert cores == {b"0", b"1"}, "each engine process sees only its own cores"
        barrier = threading.Barrier(8)

        def one(number: int) -> None:
            with StreamingClient(server.grpc_url) as client:
                barrier.wait(timeout=30)
                result = client.ask(
                    f"hi {number}", model="passthrough", sampling={"max_tokens": 32, "ignore_eos": True}
                )
                assert result.error is None

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(one, range(8)))
        time.sleep(1.5)
        metrics = read_metrics(server)
        served = {
            replica: metrics.get(
                f'llm_requests_total{{model="passthrough",outcome="completed",replica="{replica}"}}', 0
            )
            for replica in ("0", "1")
        }
        assert sum(served.values()) == 8
        assert min(served.values()) >= 1, f"Triton sent every request to one replica: {served}"
        summed = wait_for(
            lambda: '"ServingSlots":32' in server.log_path.read_text(errors="replace"),
            timeout_s=15,
        )
        assert summed, "no host gauge line summing both replicas (2 x 16 slots)"
    finally:
        server.stop()
