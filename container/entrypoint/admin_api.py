"""Triton's admin APIs behind a key nobody outside the container holds.

Triton (2.51 and later) restricts API groups per endpoint with `--http-restricted-api` and
`--grpc-restricted-protocol`, each `<apis>:<header>=<value>`: a restricted call without the header and
value is refused. HTTP reads the header as named; gRPC reads it from the call's metadata with the prefix
`triton-grpc-protocol-` (Triton's docs/customization_guide/inference_protocols.md, "Limit Endpoint Access").

Restricted: loading and unloading models (a load with file overrides runs the caller's own model.py),
model configuration, shared-memory registration, logging, trace and statistics. Open: health, metadata and
inference, which is what clients and the load balancer's health checks use.

The key is generated at every start and never stored or logged: nothing in production needs these APIs
(the entrypoint loads the one served model at start; the model unloads itself through the Python backend,
not through an endpoint; metrics come from the metrics port). A key kept in a secret would be one more
credential to rotate, and anyone holding it could load code. An operator who needs an admin call runs it
inside the container (ECS Exec), where the key is in Triton's command line.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

RESTRICTED_APIS = ("model-repository", "model-config", "shared-memory", "logging", "trace", "statistics")
HTTP_HEADER = "serving-admin-key"
GRPC_HEADER = f"triton-grpc-protocol-{HTTP_HEADER}"
REDACTED = "<redacted>"


def new_admin_key() -> str:
    return secrets.token_urlsafe(32)


def restricted_api_flags(key: str) -> list[str]:
    """The two Triton options that put the admin API groups behind HTTP_HEADER: key."""
    group = f"{','.join(RESTRICTED_APIS)}:{HTTP_HEADER}={key}"
    return [f"--http-restricted-api={group}", f"--grpc-restricted-protocol={group}"]


def redacted(command: Sequence[str]) -> list[str]:
    """The command line with the admin key replaced, for logs."""
    marker = f":{HTTP_HEADER}="
    return [
        argument.split(marker)[0] + marker + REDACTED
        if argument.startswith(("--http-restricted-api=", "--grpc-restricted-protocol="))
        and marker in argument
        else argument
        for argument in command
    ]
