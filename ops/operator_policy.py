"""`python -m ops.operator_policy CONFIG --account ID`: the IAM policy an operator needs for the kit's own
tools (`make deploy`'s waves and preflight, `make preflight`, `make traffic`, `make destroy`'s release, `make
compile`), rendered for one config from the shipped template, iam/operator-policy.json.

The template's placeholders are filled from the config: ${Partition}, ${Account}, ${Project}, ${ProjectId}
(the project without punctuation: CDK's task definition families start with it), ${OrchestratorRegion},
${HostedZoneId}, and ${ArtifactManifests} (a Resource entry that becomes every region's
`<artifacts prefix>/compiled/*/artifact-manifest.json`). The CloudFormation deploys themselves run under the
CDK bootstrap's roles (deploy, file- and image-publishing, lookup), which the policy lets the operator assume
and nothing more: what the stacks create is the deploy role's to grant, not the operator's.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TEMPLATE = Path(__file__).resolve().parents[1] / "iam" / "operator-policy.json"
LIST_PLACEHOLDER = "${ArtifactManifests}"
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z]+)\}")
ACCOUNT_PATTERN = re.compile(r"^[0-9]{12}$")


def artifact_manifests(settings: Any, partition: str) -> list[str]:
    """Every region's compiled-artifact manifests, as S3 object ARNs (the preflight and `make compile` read
    them with HeadObject, which s3:GetObject grants)."""
    found = []
    for region in settings.regions:
        uri = settings.artifacts_s3_uri(region).removeprefix("s3://").rstrip("/")
        bucket, _, prefix = uri.partition("/")
        root = f"{bucket}/{prefix}" if prefix else bucket
        arn = f"arn:{partition}:s3:::{root}/compiled/*/artifact-manifest.json"
        if arn not in found:
            found.append(arn)
    return found


def render(settings: Any, account: str, partition: str = "aws", template: Path = TEMPLATE) -> dict[str, Any]:
    if not ACCOUNT_PATTERN.match(account):
        raise ValueError(f"--account: an AWS account id is 12 digits, got {account!r}")
    values = {
        "Partition": partition,
        "Account": account,
        "Project": settings.project,
        "ProjectId": re.sub(r"[^A-Za-z0-9]", "", settings.project),
        "OrchestratorRegion": settings.orchestrator_region,
        "HostedZoneId": settings.tls.hosted_zone_id,
    }
    manifests = artifact_manifests(settings, partition)

    def fill(text: str) -> str:
        return _PLACEHOLDER.sub(lambda match: values[match.group(1)], text)

    policy = json.loads(template.read_text())
    for statement in policy["Statement"]:
        resources = statement["Resource"]
        if isinstance(resources, list):
            expanded: list[str] = []
            for resource in resources:
                expanded += manifests if resource == LIST_PLACEHOLDER else [fill(resource)]
            statement["Resource"] = expanded
        else:
            statement["Resource"] = fill(resources)
    return policy


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.operator_policy", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("config", help="the config file, e.g. config/prime-day.yaml")
    parser.add_argument("--account", required=True, help="the 12-digit AWS account id the policy is for")
    parser.add_argument("--partition", default="aws", help="aws, aws-cn or aws-us-gov (default aws)")
    args = parser.parse_args(argv)
    from settings.loader import ConfigError, load_settings

    try:
        policy = render(load_settings(args.config), args.account, args.partition)
    except ConfigError as error:
        print(f"config error:\n{error}", file=sys.stderr)
        return 1
    except ValueError as error:
        print(f"operator policy: {error}", file=sys.stderr)
        return 1
    print(json.dumps(policy, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
