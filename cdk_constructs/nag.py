"""cdk-nag acknowledgments: by exact rule (or rule[finding]) id, always with a written reason, placed on the
construct that causes the finding so it covers nothing else."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

MIN_REASON_LENGTH = 20


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    if len(reason.strip()) < MIN_REASON_LENGTH:
        raise ValueError(f"acknowledging {rule_id} needs a reason of at least {MIN_REASON_LENGTH} characters")
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))
