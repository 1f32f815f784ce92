"""`python -m settings CONFIG [--strict]`: validate a config file and summarize it, before any CDK code
runs. Warnings (what validates but would likely fail at deploy) go to stderr; --strict makes them errors,
which is how `make deploy` runs it."""

from __future__ import annotations

import argparse
import sys

from settings.loader import ConfigError, load_config


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m settings", description=__doc__.splitlines()[0])
    parser.add_argument("config", help="the config file, e.g. config/default.yaml")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")
    args = parser.parse_args(argv)
    try:
        loaded = load_config(args.config)
    except ConfigError as error:
        print(f"config error:\n{error}", file=sys.stderr)
        return 1
    if loaded.quota_warnings:
        print(
            "account quotas: this config needs more than AWS's defaults; raise them before the first deploy "
            "(`make preflight` reads your account's values):\n" + "\n".join(loaded.quota_warnings),
            file=sys.stderr,
        )
    found = (*loaded.warnings, *loaded.readiness)
    if found:
        label = "config error (--strict)" if args.strict else "config warning"
        print(f"{label}:\n" + "\n".join(found), file=sys.stderr)
        if args.strict:
            return 1
    for name, region in loaded.settings.regions.items():
        fleets = ", ".join(
            f"{f.instance_type} x{f.min}-{f.max} (TP {f.tensor_parallel})" for f in region.fleets
        )
        # The zones and NAT gateways defaults resolve to are worth seeing before a deploy.
        network = (
            f"zones {', '.join(loaded.settings.availability_zones(name))}; "
            f"NAT gateways {loaded.settings.nat_gateways(name)}"
        )
        cells = f" in {region.cells} cells" if region.cells > 1 else ""
        print(f"{args.config}: {name} weight {region.weight}{cells}: {fleets}; {network}")
    budget = loaded.settings.serving.cold_start_budget_seconds
    for event in loaded.settings.events:
        hosts = "; ".join(
            f"{region} " + ", ".join(f"{kind} x{b.min}-{b.max}" for kind, b in fleets.items())
            for region, fleets in event.regions.items()
        )
        print(
            f"{args.config}: event {event.name}: {event.start.isoformat()} to {event.end.isoformat()}, "
            f"bounds raised from {event.ramp_start(budget).isoformat()}, minimums restored at the end, "
            f"maximums from {event.scale_in_at.isoformat()}: {hosts}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
