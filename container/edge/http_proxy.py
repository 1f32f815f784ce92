"""The HTTP side of the edge: bodies over the cap get 413, the rest go to Triton, answers stream back.

A request body is read whole (it is at most the cap, about 100 KB) and sent on with a Content-Length, so
Triton never sees a chunked body: the chunk count its 2.51 frontend put on the stack is one. The cap is
checked on the Content-Length before anything is read (with `Expect: 100-continue` before the client sends
the body) and counted while reading, for chunked bodies. Compressed request bodies are refused: Triton would
inflate them past any cap. Responses are copied as they arrive, chunk by chunk (generate_stream's events).
"""

from __future__ import annotations

import json

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web
from aiohttp.client_exceptions import ClientError
from yarl import URL

# Hop-by-hop headers (RFC 9110 section 7.6.1) and the ones the proxy sets itself.
_NOT_FORWARDED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "expect",
    }
)
UPSTREAM_CONNECT_TIMEOUT_S = 5.0


def _error(status: int, message: str, *, close: bool = False) -> web.Response:
    headers = {"Connection": "close"} if close else None
    return web.Response(
        status=status, text=json.dumps({"error": message}), content_type="application/json", headers=headers
    )


def too_large(max_body_bytes: int, received: int | None = None) -> web.Response:
    got = f", got {received:,}" if received is not None else ""
    # The rest of an oversize body is not read: the connection closes after the answer.
    return _error(413, f"request body: must be at most {max_body_bytes:,} bytes{got}", close=True)


def content_length(request: web.BaseRequest) -> int | None:
    raw = request.headers.get("Content-Length")
    if raw is None:
        return None
    return int(raw) if raw.strip().isdigit() else -1


class HttpEdge:
    """aiohttp handler forwarding to Triton's HTTP frontend at upstream ("host:port")."""

    def __init__(self, upstream: str, max_body_bytes: int) -> None:
        self.upstream = f"http://{upstream}"
        self.max_body_bytes = max_body_bytes
        self._session: ClientSession | None = None

    def application(self) -> web.Application:
        # client_max_size bounds aiohttp's own reads too (the handler reads itself, below).
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_route("*", "/{path:.*}", self.forward, expect_handler=self.expect)
        app.on_cleanup.append(self._close)
        return app

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    def session(self) -> ClientSession:
        if self._session is None:
            self._session = ClientSession(
                # A connection per request: Triton waits for open HTTP connections when it stops, so pooled
                # idle ones would hold its drain until --exit-timeout-secs and cut the models' clean unload.
                connector=TCPConnector(limit=0, force_close=True),
                timeout=ClientTimeout(total=None, sock_connect=UPSTREAM_CONNECT_TIMEOUT_S),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            )
        return self._session

    def refusal(self, request: web.BaseRequest) -> web.Response | None:
        """The answer for a request refused on its headers alone, else None."""
        length = content_length(request)
        if length is not None and length < 0:
            return _error(400, "Content-Length: must be a whole number of bytes", close=True)
        if length is not None and length > self.max_body_bytes:
            return too_large(self.max_body_bytes, length)
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in {"", "identity"}:
            return _error(415, f"Content-Encoding: request bodies are not compressed here, got {encoding!r}")
        return None

    async def expect(self, request: web.Request) -> web.StreamResponse | None:
        """`Expect: 100-continue`: refuse before the client sends an oversize body."""
        refusal = self.refusal(request)
        if refusal is not None:
            return refusal
        if request.version >= (1, 1) and request.headers.get("Expect", "").lower() == "100-continue":
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0  # as aiohttp's own handler: the answer proper has not begun
        return None

    async def read_body(self, request: web.Request) -> bytes | None:
        """The body, or None once it has passed the cap (chunked bodies announce no length)."""
        parts = []
        received = 0
        while True:
            chunk = await request.content.readany()
            if not chunk:
                return b"".join(parts)
            received += len(chunk)
            if received > self.max_body_bytes:
                return None
            parts.append(chunk)

    async def forward(self, request: web.Request) -> web.StreamResponse:
        refusal = self.refusal(request)
        if refusal is not None:
            return refusal
        body = await self.read_body(request)
        if body is None:
            return too_large(self.max_body_bytes)
        headers = {
            name: value for name, value in request.headers.items() if name.lower() not in _NOT_FORWARDED
        }
        try:
            upstream = await self.session().request(
                request.method,
                URL(self.upstream + request.raw_path, encoded=True),
                headers=headers,
                data=body if body or request.method not in {"GET", "HEAD"} else None,
                allow_redirects=False,
            )
        except (TimeoutError, ClientError, OSError) as err:
            return _error(502, f"the inference server is not answering: {type(err).__name__}")
        completed = False
        try:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in upstream.headers.items():
                if name.lower() not in _NOT_FORWARDED:
                    response.headers.add(name, value)
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            await response.prepare(request)
            # Each piece as it arrives: a streamed answer's events reach the client without waiting.
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            completed = True
            return response
        finally:
            if completed:
                upstream.release()
            else:
                # A client gone mid-stream closes the upstream connection, so Triton cancels the request.
                upstream.close()
