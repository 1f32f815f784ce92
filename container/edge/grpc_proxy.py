"""The gRPC side of the edge: each call relayed to Triton's gRPC frontend as raw messages, each one capped.

Triton 2.51 has no option for its gRPC receive limit (`tritonserver --help` lists none; its gRPC server sets
the maximum to INT32_MAX), so the cap is this server's `grpc.max_receive_message_length`: gRPC itself fails a
call whose message is larger with RESOURCE_EXHAUSTED before the message reaches Triton. Messages are not
decoded: each method is relayed as a stream of bytes in both directions (a unary call is a stream of one on
the wire), with metadata, deadline, status and cancellation passed through.
"""

from __future__ import annotations

import grpc
from grpc import aio

# Set by gRPC itself on each side of a call; forwarding them would duplicate or contradict the channel's own.
_NOT_FORWARDED = frozenset({"user-agent", "te", "content-type", "grpc-accept-encoding", "grpc-encoding"})
# Answers are small (tokens, product cards); Triton's own is unlimited: keep a bound, far above any answer.
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


def _identity(message: bytes) -> bytes:
    return message


def forwarded_metadata(
    metadata: tuple[tuple[str, str | bytes], ...] | None,
) -> tuple[tuple[str, str | bytes], ...]:
    return tuple(
        (key, value)
        for key, value in (metadata or ())
        if key not in _NOT_FORWARDED and not key.startswith((":", "grpc-"))
    )


class _Relay(grpc.GenericRpcHandler):
    def __init__(self, channel: aio.Channel) -> None:
        self.channel = channel

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = details.method
        channel = self.channel

        async def relay(requests, context: aio.ServicerContext):
            remaining = context.time_remaining()
            call = channel.stream_stream(
                method, request_serializer=_identity, response_deserializer=_identity
            )(
                requests,
                metadata=forwarded_metadata(context.invocation_metadata()),
                timeout=remaining,
            )
            try:
                async for response in call:
                    yield response
                trailing = await call.trailing_metadata()
                if trailing:
                    context.set_trailing_metadata(forwarded_metadata(tuple(trailing)))
            except aio.AioRpcError as err:
                await context.abort(
                    err.code(), err.details() or "", forwarded_metadata(err.trailing_metadata())
                )
            finally:
                # The client cancelled or went away: so does the call to Triton (which frees the engine slot).
                call.cancel()

        return grpc.stream_stream_rpc_method_handler(
            relay, request_deserializer=_identity, response_serializer=_identity
        )


def grpc_edge(listen: str, upstream: str, max_message_bytes: int) -> tuple[aio.Server, aio.Channel]:
    """A gRPC server on listen ("host:port") relaying to Triton at upstream, and its channel (close both)."""
    channel = aio.insecure_channel(
        upstream,
        options=[
            ("grpc.max_receive_message_length", MAX_RESPONSE_BYTES),
            ("grpc.max_send_message_length", max_message_bytes),
        ],
    )
    server = aio.server(
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", MAX_RESPONSE_BYTES),
            # A fresh bind of our own: never share the port with another process (SO_REUSEPORT).
            ("grpc.so_reuseport", 0),
        ]
    )
    server.add_generic_rpc_handlers((_Relay(channel),))
    if server.add_insecure_port(listen) == 0:
        raise OSError(f"gRPC: cannot listen on {listen}")
    return server, channel
