"""CDK entry point: config file (context `config`) -> validated settings -> one stack per region.

The config is read and validated before aws_cdk is imported, so a user mistake ends with the message
and exit status 1, never a traceback and never after CDK has started.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from settings.loader import ConfigError, load_settings

DEFAULT_CONFIG = "config/default.yaml"


def cli_context(environ: Mapping[str, str]) -> dict[str, object]:
    """The context the CDK CLI hands the app, as aws-cdk-lib's App reads it: inline JSON in one variable,
    plus a file for what did not fit."""
    context: dict[str, object] = {}
    raw = environ.get("CDK_CONTEXT_JSON")
    if raw:
        context.update(json.loads(raw))
    overflow = environ.get("CONTEXT_OVERFLOW_LOCATION_ENV")
    if overflow and Path(overflow).is_file():
        context.update(json.loads(Path(overflow).read_text(encoding="utf-8")))
    return context


def main() -> int:
    context = cli_context(os.environ)
    config = str(context.get("config") or DEFAULT_CONFIG)
    try:
        settings = load_settings(config)
    except ConfigError as error:
        print(f"config error:\n{error}", file=sys.stderr)
        return 1

    from stacks.serving_app import build_app

    # `-c first_create=true` (ops/deploy_waves.py): load balancers created without deletion protection.
    build_app(settings, first_create=str(context.get("first_create", "")).lower() == "true").synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
