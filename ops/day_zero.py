"""The day-zero sequence for a new account, in order (docs/deploying.md, "Day-zero checklist"), as
`make compile DRY_RUN=1` and `make deploy DRY_RUN=1` print it: each marks the step it is."""

from __future__ import annotations

from collections.abc import Sequence

# (step, command or action); {config} is the config file.
STEPS: Sequence[tuple[str, str]] = (
    ("quotas", "make validate CONFIG={config} STRICT=1: what the config needs above AWS's default quotas"),
    (
        "permissions",
        "python -m ops.operator_policy {config} --account ACCOUNT: the operator policy for these tools",
    ),
    (
        "account",
        "make preflight CONFIG={config}: your account's real quotas, zones, AMI and layer parameters",
    ),
    ("bootstrap", "npx cdk bootstrap aws://ACCOUNT/REGION, once per region (an administrator)"),
    (
        "weights",
        "python -m entrypoint.weights upload FOLDER <artifacts_s3_uri>weights/ (weights manifest last)",
    ),
    (
        "compile",
        "make compile CONFIG={config} APPROVE=1, until `make compile DRY_RUN=1` shows every key complete",
    ),
    ("index", "make index CATALOG=products.csv UPLOAD=<artifacts_s3_uri>catalog-index/"),
    ("deploy", "make deploy CONFIG={config} (security diff per wave), then APPROVE=1"),
    ("subscribe", "confirm each alarm topic's subscription email, or no alarm reaches anyone"),
    ("check", "make traffic CONFIG={config}: each region's record and weight"),
)
STEP_NAMES = tuple(name for name, _ in STEPS)


def checklist(config: str, here: str) -> str:
    """The sequence with `here` marked (one of STEP_NAMES)."""
    if here not in STEP_NAMES:
        raise ValueError(f"no day-zero step {here!r}; steps: {', '.join(STEP_NAMES)}")
    lines = ["day-zero sequence for a new account (docs/deploying.md):"]
    for number, (name, action) in enumerate(STEPS, start=1):
        marker = "->" if name == here else "  "
        lines.append(f" {marker} {number:>2}. {name}: {action.format(config=config)}")
    return "\n".join(lines)
