"""The CDK CLI calls that `make deploy` and `make compile` both make: the first-create assembly and one
stack's deploy."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

# `cdk synth -c first_create=true`: load balancers without deletion protection and fleets at zero tasks
# (stacks/serving_app.py), for a stack's first creation.
FIRST_CREATE_CONTEXT = "first_create"


def synthesize_first_create(cdk: Sequence[str], config: str, assembly: Path) -> None:
    """The assembly a stack created now comes from: the same stacks, deletion protection off."""
    shutil.rmtree(assembly, ignore_errors=True)
    subprocess.run(
        [
            *cdk,
            "synth",
            "--quiet",
            "-c",
            f"config={config}",
            "-c",
            f"{FIRST_CREATE_CONTEXT}=true",
            "-o",
            str(assembly),
        ],
        check=True,
    )


def deploy_stack(cdk: Sequence[str], assembly: Path, stack: str, *, approve: bool = False) -> None:
    """Without approval the CLI still deploys what does not broaden security (`broadening`: it asks only for
    IAM and security-group widening, which the security diff before each wave has already stopped), so it
    never waits for a terminal that CI does not have."""
    # --exclusively: no stack drags another along (they share no values: docs/architecture.md, "What it
    # deploys").
    approval = "never" if approve else "broadening"
    subprocess.run(
        [*cdk, "deploy", "--app", str(assembly), "--exclusively", "--require-approval", approval, stack],
        check=True,
    )


def deploy_stacks(
    cdk: Sequence[str], assembly: Path, stacks: Sequence[str], *, approve: bool = False
) -> None:
    """Several stacks in one call, all at once (`--concurrency`): CloudFormation waits for an ECS service's
    update to reach a steady state before the stack's update completes (and rolls the stack back when it
    cannot), so a cell's `cdk deploy` lasts its whole rolling deployment, and cells deployed one call after
    another roll one after another. The hotfix path's cells roll side by side this way."""
    approval = "never" if approve else "broadening"
    subprocess.run(
        [
            *cdk,
            "deploy",
            "--app",
            str(assembly),
            "--exclusively",
            "--require-approval",
            approval,
            "--concurrency",
            str(len(stacks)),
            *stacks,
        ],
        check=True,
    )
