"""Which AWS operations moto itself answered while a recording is open: what lets a test's claim "this call
runs against moto" be checked rather than trusted.

moto answers boto3 by a handler on botocore's `before-send` event (moto/core/botocore_stubber.py), which
every botocore session registers. The recorder wraps that handler: a call counts when moto returned its
answer, an AWS error such as ParameterNotFound included. Calls a botocore Stubber answers never reach
`before-send`; calls moto does not implement raise NotImplementedError inside it or get its "Not yet
implemented" 404 (an API path it has no route for); calls its IAM enforcement refuses never ran: none
counts."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

# An operation as botocore names it on the wire: (service id hyphenized, operation), e.g.
# ("cloudwatch", "DescribeAlarms"), ("elastic-load-balancing-v2", "DescribeAccountLimits").
WireName = tuple[str, str]

_open: list[set[WireName]] = []
_NOT_IMPLEMENTED = b"Not yet implemented"


def _answered(response: Any) -> bool:
    """moto ran the operation: not a refusal by its IAM enforcement (403: the operation never ran), not its
    "Not yet implemented" 404, not a fault of its own (5xx)."""
    if response is None or response.status_code == 403 or response.status_code >= 500:
        return False
    return not (response.status_code == 404 and response.content == _NOT_IMPLEMENTED)


def install() -> bool:
    """Wrap moto's handler once (its class: the instance is already registered). False without moto (the
    serving environments)."""
    try:
        from moto.core.botocore_stubber import BotocoreStubber
    except ImportError:
        return False
    original = BotocoreStubber.__call__
    if getattr(original, "records_calls", False):
        return True

    def call(self: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        response = original(self, event_name, request, **kwargs)
        if _open and _answered(response):
            _, service_id, operation = event_name.split(".", 2)
            for made in _open:
                made.add((service_id, operation))
        return response

    call.records_calls = True  # type: ignore[attr-defined]
    BotocoreStubber.__call__ = call  # type: ignore[method-assign]
    return True


@contextlib.contextmanager
def recording() -> Iterator[set[WireName]]:
    """The operations moto answers from here to the end of the block (recordings may nest)."""
    install()
    made: set[WireName] = set()
    _open.append(made)
    try:
        yield made
    finally:
        _open.remove(made)


@functools.cache
def _service_model(service: str) -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


def wire_name(call: str) -> WireName:
    """ "service:operation" as the code calls it (botocore's service name, boto3's method name) -> the name
    the recorder sees."""
    from botocore import xform_name

    service, operation = call.split(":")
    model = _service_model(service)
    by_method = {xform_name(name): name for name in model.operation_names}
    return model.service_id.hyphenize(), by_method[operation]


def unmet(claimed: list[str], made: set[WireName]) -> list[str]:
    """The claimed calls ("service:operation") moto did not answer."""
    return [call for call in claimed if wire_name(call) not in made]
