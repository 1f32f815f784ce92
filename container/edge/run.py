"""Run Triton behind the edge: the public HTTP and gRPC ports are the edge's, Triton's are on loopback.

    python -m edge.run --http=0.0.0.0:8000 --grpc=0.0.0.0:8001 \\
        --triton-http=127.0.0.1:18000 --triton-grpc=127.0.0.1:18001 -- tritonserver ... (its own flags)

The edge binds its ports first (a taken port fails the start at once), then starts Triton as its child. One
lives as long as the other: SIGTERM or SIGINT goes to Triton, which drains and exits, and the edge relays
until then (health checks included, so the ALB sees the drain); Triton's exit ends the edge with its code,
and an edge that fails stops Triton. The cap: edge/body_cap.py, from the same limits the model enforces.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from assistant.request import RequestLimits
from edge.body_cap import max_request_body_bytes
from edge.grpc_proxy import grpc_edge
from edge.http_proxy import HttpEdge

# How long Triton may take to exit after the edge failed: then it is killed.
STOP_TIMEOUT_S = 30.0


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"must be host:port, got {text!r}")
    return host, int(port)


def exit_code(returncode: int) -> int:
    """A shell's code for a process: 128 + the signal that ended it, else its own."""
    return 128 - returncode if returncode < 0 else returncode


async def serve(
    http: tuple[str, int],
    grpc: tuple[str, int],
    triton_http: tuple[str, int],
    triton_grpc: tuple[str, int],
    max_body_bytes: int,
    command: Sequence[str],
) -> int:
    http_edge = HttpEdge(f"{triton_http[0]}:{triton_http[1]}", max_body_bytes)
    # handler_cancellation: a client that leaves while Triton prepares its answer ends the upstream call too.
    runner = web.AppRunner(http_edge.application(), handler_cancellation=True, access_log=None)
    await runner.setup()
    grpc_server, channel = grpc_edge(
        f"{grpc[0]}:{grpc[1]}", f"{triton_grpc[0]}:{triton_grpc[1]}", max_body_bytes
    )
    try:
        await web.TCPSite(runner, http[0], http[1], reuse_port=False).start()
        await grpc_server.start()
    except BaseException:
        await runner.cleanup()
        await grpc_server.stop(None)
        await channel.close()
        raise
    print(
        f"edge: HTTP {http[0]}:{http[1]} and gRPC {grpc[0]}:{grpc[1]} -> Triton on "
        f"{triton_http[1]}/{triton_grpc[1]}; request bodies up to {max_body_bytes:,} bytes",
        flush=True,
    )
    triton = await asyncio.create_subprocess_exec(*command)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _pass_on, triton, sig)
    try:
        returncode = await triton.wait()
    finally:
        if triton.returncode is None:  # the edge itself failed or was cancelled: Triton must not outlive it
            triton.terminate()
            try:
                await asyncio.wait_for(triton.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                triton.kill()
                await triton.wait()
        await grpc_server.stop(1.0)
        await runner.cleanup()
        await channel.close()
    print(f"edge: Triton exited with {returncode}", flush=True)
    return exit_code(returncode)


def _pass_on(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(sig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="edge", description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=_address, required=True, help="public HTTP address (the ALB's)")
    parser.add_argument("--grpc", type=_address, required=True, help="public gRPC address (the ALB's)")
    parser.add_argument("--triton-http", type=_address, required=True, help="Triton's HTTP, on loopback")
    parser.add_argument("--triton-grpc", type=_address, required=True, help="Triton's gRPC, on loopback")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then Triton's command line")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("Triton's command line must follow --")
    try:
        limits = RequestLimits.from_env(os.environ)
    except ValueError as err:
        print(f"edge: cannot start: {err}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(
            serve(
                args.http,
                args.grpc,
                args.triton_http,
                args.triton_grpc,
                max_request_body_bytes(limits),
                command,
            )
        )
    except (OSError, RuntimeError) as err:  # a port taken or not ours to bind
        print(f"edge: cannot start: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
