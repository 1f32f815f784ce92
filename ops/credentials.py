"""The one line every operator command prints when it finds no AWS credentials, and the check behind it."""

from __future__ import annotations

from typing import Any

WHAT_TO_SET = (
    "set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or run `aws configure` / "
    "`aws sso login`, and run it again"
)


def no_credentials_message(command: str, needs: str) -> str:
    """'make destroy: no AWS credentials found; it scales ... : set AWS_PROFILE ...' on one line."""
    return f"{command}: no AWS credentials found; {needs}: {WHAT_TO_SET}"


def has_credentials(session: Any) -> bool:
    """Whether boto3's chain (environment, shared files, SSO, process, container, instance metadata) finds
    any; expired ones still count here and fail at the first call instead."""
    return session.get_credentials() is not None
