"""How large a request body may be: derived from the request limits the model enforces, not a magic number.

Triton 2.51 has no cap of its own: no HTTP body limit (`--http-max-input-size` arrived in later releases) and
gRPC messages up to 2 GB (its gRPC server sets the maximum receive size to INT32_MAX). A body of megabytes in
many small HTTP chunks makes its HTTP frontend overflow its stack (CVE-2025-23310/23311, fixed in Triton
25.07): the edge refuses anything larger than the largest request a valid question can make.
"""

from __future__ import annotations

from assistant.request import RequestLimits

# JSON can spell one code point outside the Basic Multilingual Plane as two \uXXXX escapes: 12 bytes.
# Python's json.dumps does exactly that by default (ensure_ascii), so a valid question of N characters is at
# most 12 N bytes on the wire. A gRPC request carries the text as UTF-8 (at most 4 bytes a code point).
BYTES_PER_QUESTION_CHAR = 12
# The sampling parameters travel as a JSON string inside the request: each of its bytes at most 6 (\u00XX).
BYTES_PER_SAMPLING_BYTE = 6
# Tensor names, shapes, datatypes, the stream flag, request id and parameters around the two strings.
ENVELOPE_BYTES = 4_096


def max_request_body_bytes(limits: RequestLimits) -> int:
    """The largest body (HTTP) or message (gRPC) a request the model would accept can need."""
    return (
        limits.max_prompt_chars * BYTES_PER_QUESTION_CHAR
        + limits.max_sampling_json_bytes * BYTES_PER_SAMPLING_BYTE
        + ENVELOPE_BYTES
    )
