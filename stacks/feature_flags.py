"""The CDK feature flags the kit builds with, read from cdk.json: one list that `cdk synth` (through the
CLI) and the tests (through `App(context=...)`) both use, so they build the same templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CDK_JSON = Path(__file__).resolve().parents[1] / "cdk.json"

# Recommended flags of the pinned aws-cdk-lib that the kit deliberately leaves unset, with the reason.
# tests/stacks/test_feature_flags.py compares cdk.json against the library's own recommended list.
LEFT_OFF: dict[str, str] = {
    "@aws-cdk/core:enableAdditionalMetadataCollection": (
        "collects construct properties into the template's CDK metadata for AWS's usage reporting; the "
        "kit turns version reporting off and sends nothing home"
    ),
}


def feature_flags(cdk_json: Path = CDK_JSON) -> dict[str, Any]:
    context = json.loads(cdk_json.read_text(encoding="utf-8")).get("context", {})
    return {key: value for key, value in context.items() if key.startswith("@aws-cdk")}
