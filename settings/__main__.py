"""`python -m settings CONFIG`: validate a config file and summarize it, before any CDK code runs."""

from __future__ import annotations

import sys

from settings.loader import ConfigError, load_settings


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m settings CONFIG.yaml", file=sys.stderr)
        return 2
    try:
        settings = load_settings(argv[0])
    except ConfigError as error:
        print(f"config error:\n{error}", file=sys.stderr)
        return 1
    for name, region in settings.regions.items():
        fleets = ", ".join(
            f"{f.instance_type} x{f.min}-{f.max} (TP {f.tensor_parallel})" for f in region.fleets
        )
        print(f"{argv[0]}: {name} weight {region.weight}: {fleets}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
