"""Kills a model's engine processes if the model's own process dies without shutting them down, and the
model's process itself if it outlives Triton.

vLLM's engine core and workers are child processes of the Triton stub that runs the model. A clean finalize()
shuts them down; but if the stub is killed (Triton's exit timeout, an OOM kill, a crash), nothing tells the
children, and they keep ~2.4 GB and the NeuronCores with no parent. And a stub still busy when Triton exits
(its finalize outlasting Triton's exit timeout, a launcher killed in the middle of a graceful stop) is never
told to stop: it was seen running, engine children defunct, 50 minutes after Triton had gone. This guard runs
as its own small process: it notes the stub's descendants twice a second; once Triton (the stub's parent when
the guard started) is gone for ORPHAN_GRACE_S, it kills the stub; once the stub is gone, it kills the
descendants still running.

A stub that dies while Triton runs (SIGKILL, OOM kill, a crash) leaves a silent replica: Triton 2.51's Python
backend never restarts a decoupled model's stub, its readiness stays green and every request to the model
fails for ever. A clean finalize() kills this guard before the stub exits, so a guard that sees its stub gone
knows the death was not clean: it writes an EMF line (RequestFailed=1, with the reason) and sends Triton
SIGTERM, as a dead engine does (readiness fails at once, the server exits, ECS replaces the task).

    python -m serving.orphan_guard <stub pid> [<model name>]
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from serving.line_out import emit

POLL_S = 0.5
# A stub normally exits before Triton does (Triton waits for its models to unload); one still running this
# long after Triton is gone has nobody left to tell it to stop.
ORPHAN_GRACE_S = 2.0
TRITON_DEFAULT_EXIT_TIMEOUT_S = 30.0
# After Triton's exit timeout: time to finish exiting before a hung Triton is killed.
EXIT_MARGIN_S = 3.0


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # exited, not yet reaped by its parent
        return None
    return int(fields[1]), fields[19]


def process_start(pid: int) -> str | None:
    """The start time of a live process (None when gone or a zombie): with the pid it names one process."""
    stat = _stat(pid)
    return None if stat is None else stat[1]


def descendants(root: int) -> dict[int, str]:
    """Every process below root, as pid -> start time (to tell a pid from its reuse later)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is not None:
            children.setdefault(stat[0], []).append(int(entry.name))
            starts[int(entry.name)] = stat[1]
    found: dict[int, str] = {}
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        if pid in found or pid not in starts:
            continue
        found[pid] = starts[pid]
        pending.extend(children.get(pid, []))
    return found


def kill_recorded(recorded: dict[int, str]) -> list[int]:
    killed = []
    for pid, started in recorded.items():
        stat = _stat(pid)
        if stat is not None and stat[1] == started and pid != os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def is_triton(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip().startswith("tritonserver")
    except OSError:
        return False


def stub_death_record(model_name: str, stub_pid: int, environ: dict[str, str] | None = None) -> dict:
    """The EMF line for a model process that died without a clean shutdown: the requests it held failed."""
    from assistant.metrics import (
        REQUEST_FAILED,
        MetricValue,
        emf_record,
        namespace_from_env,
        serving_dimensions,
    )

    dimensions, dimension_sets = serving_dimensions(model_name, os.environ if environ is None else environ)
    return emf_record(
        namespace=namespace_from_env(),
        dimensions=dimensions,
        metrics=[MetricValue(REQUEST_FAILED, 1, "Count")],
        timestamp_ms=int(time.time() * 1000),
        properties={
            "Outcome": "failed",
            "Reason": f"model process {stub_pid} died without a clean shutdown; stopping the server",
        },
        dimension_sets=dimension_sets,
    )


def stop_server_for_dead_stub(stub_pid: int, server_pid: int, model_name: str) -> None:
    """The stub died while Triton runs: take the host out of its target groups, report it and stop Triton,
    so the host leaves service."""
    from assistant.metrics import emf_line
    from serving.leave_target_groups import DEADLINE_S, start_leaving

    # First, on a thread of its own: a dead replica's target draws far more than its share of requests
    # until it leaves rotation (serving/leave_target_groups.py).
    leaving = start_leaving(f"model process {stub_pid} ({model_name}) died", model_name)
    try:
        _stop_server(stub_pid, server_pid, model_name, emf_line)
    finally:
        leaving.join(timeout=DEADLINE_S)


def _stop_server(stub_pid: int, server_pid: int, model_name: str, emf_line) -> None:
    emit(emf_line(stub_death_record(model_name, stub_pid)))
    emit(
        f"orphan_guard: model process {stub_pid} ({model_name}) died without a clean shutdown; "
        f"stopping Triton (pid {server_pid}) so the host is replaced",
        sys.stderr,
    )
    server = _stat(server_pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(server_pid, signal.SIGTERM)
    # Triton drains the other models' streams for its exit timeout, then exits; but with a request held by
    # the dead stub, Triton 2.51 was seen to hang after "Exit timeout expired. Exiting immediately." A host
    # that neither serves nor exits is what this guard is for: past the timeout and a margin, it is killed.
    deadline = time.monotonic() + exit_timeout_s(server_pid) + EXIT_MARGIN_S
    while time.monotonic() < deadline:
        if server is None or _stat(server_pid) != server:
            return
        time.sleep(POLL_S)
    emit(
        f"orphan_guard: Triton (pid {server_pid}) did not exit after its exit timeout; killing it",
        sys.stderr,
    )
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(server_pid, signal.SIGKILL)


def exit_timeout_s(server_pid: int) -> float:
    """Triton's --exit-timeout-secs, from its command line (Triton's default, 30 s, when not given)."""
    try:
        arguments = Path(f"/proc/{server_pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return TRITON_DEFAULT_EXIT_TIMEOUT_S
    for argument in arguments:
        name, _, value = argument.partition("=")
        if name == "--exit-timeout-secs" and value.isdigit():
            return float(value)
    return TRITON_DEFAULT_EXIT_TIMEOUT_S


def guard(stub_pid: int, model_name: str = "model") -> list[int]:
    recorded: dict[int, str] = {}
    stub = _stat(stub_pid)
    if stub is None:
        return []
    server_pid = stub[0]  # Triton, which forked the stub
    server = _stat(server_pid)
    orphaned_at: float | None = None
    while (now := _stat(stub_pid)) is not None and now[1] == stub[1]:
        recorded.update(descendants(stub_pid))
        recorded.pop(os.getpid(), None)
        server_gone = now[0] != server_pid or server is None or _stat(server_pid) != server
        if server_gone:
            orphaned_at = orphaned_at if orphaned_at is not None else time.monotonic()
            if time.monotonic() - orphaned_at >= ORPHAN_GRACE_S:
                emit(
                    f"orphan_guard: model process {stub_pid} outlived Triton (pid {server_pid}); killing it",
                    sys.stderr,
                )
                kill_recorded({stub_pid: stub[1]})
                return kill_recorded(recorded)
        time.sleep(POLL_S)
    killed = kill_recorded(recorded)
    # Gone while this guard lives: a clean finalize() would have stopped the guard first.
    if server is not None and _stat(server_pid) == server and is_triton(server_pid):
        stop_server_for_dead_stub(stub_pid, server_pid, model_name)
    return killed


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or not argv[0].isdigit():
        emit("usage: python -m serving.orphan_guard <pid> [<model name>]", sys.stderr)
        return 2
    # A terminal's Ctrl-C or the group's SIGTERM is meant for the server; the guard outlives it by design.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    killed = guard(int(argv[0]), *argv[1:])
    if killed:
        emit(f"orphan_guard: killed engine processes {killed} left by pid {argv[0]}", sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
