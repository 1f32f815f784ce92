"""`python -m ops.traffic [--config FILE] show | pin REGION=WEIGHT... [--for 2h] [--reason TEXT] | clear`

For operators: show each region's weight in Route 53, the orchestrator's last decisions and the override;
pin weights for maintenance (the orchestrator obeys a pin until it expires, so a forgotten one ends by
itself) and clear a pin. `make traffic ARGS="..."` runs it with the Makefile's CONFIG.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from orchestrator.routing.override import NO_OVERRIDE, Override, OverrideError, parse_override
from orchestrator.routing.records import read_records
from orchestrator.routing.state import parse_state
from settings.loader import ConfigError, load_settings
from settings.schema import Settings
from stacks.routing_names import override_parameter, state_parameter

DEFAULT_CONFIG = "config/default.yaml"
DEFAULT_PIN = "2h"
LONGEST_PIN = timedelta(days=7)
_DURATION = re.compile(r"^(\d+)([mhd])$")
ClientFactory = Callable[[str, str], Any]


def parse_duration(text: str) -> timedelta:
    match = _DURATION.match(text.strip())
    if not match:
        raise OverrideError(f"--for {text!r}: use minutes, hours or days, e.g. 90m, 2h, 1d")
    amount, unit = int(match.group(1)), match.group(2)
    duration = {"m": timedelta(minutes=amount), "h": timedelta(hours=amount), "d": timedelta(days=amount)}[
        unit
    ]
    if not timedelta(0) < duration <= LONGEST_PIN:
        raise OverrideError(f"--for {text}: a pin lasts more than 0 and at most {LONGEST_PIN.days} days")
    return duration


def parse_pins(items: list[str]) -> dict[str, int]:
    pins: dict[str, int] = {}
    for item in items:
        region, _, weight = item.partition("=")
        if not region or not weight.isdigit():
            raise OverrideError(f"{item!r}: write REGION=WEIGHT, e.g. us-east-1=0")
        pins[region] = int(weight)
    return pins


def build_override(
    settings: Settings, items: list[str], duration: str, reason: str, now: datetime
) -> Override:
    """The pin as the orchestrator will read it, checked by the same parser it uses."""
    expires = now + parse_duration(duration)
    text = Override(parse_pins(items), expires, reason).to_json()
    override = parse_override(text, set(settings.regions))
    assert override is not None
    return override


def _parameter(ssm: Any, name: str) -> str | None:
    try:
        return ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        return None


def show(settings: Settings, client: ClientFactory, now: datetime) -> str:
    home = settings.orchestrator_region
    ssm = client("ssm", home)
    records = read_records(client("route53", home), settings.tls.hosted_zone_id, settings.tls.domain_name)
    total = sum(record.weight for record in records.values()) or 1
    lines = [f"{settings.tls.domain_name} (hosted zone {settings.tls.hosted_zone_id}):"]
    for region, config in settings.regions.items():
        record = records.get(region)
        if record is None:
            lines.append(f"  {region:<15} no record yet (configured initial weight {config.weight})")
        else:
            share = record.weight / total
            check = record.health_check_id or "none"
            lines.append(f"  {region:<15} weight {record.weight:>3} ({share:5.1%})  health check {check}")
    raw = _parameter(ssm, override_parameter(settings))
    try:
        override = parse_override(raw, set(settings.regions))
    except OverrideError as error:
        lines.append(f"override: unreadable, ignored by the orchestrator: {error}")
        override = None
    if override is not None:
        state = "active" if override.active(now) else "EXPIRED (ignored)"
        pins = ", ".join(f"{r}={w}" for r, w in override.weights.items())
        lines.append(f"override: {pins} until {override.expires_at.isoformat()} [{state}] {override.reason}")
    elif raw is None or raw.strip() in ("", NO_OVERRIDE):
        lines.append("override: none")
    decisions = parse_state(_parameter(ssm, state_parameter(settings))).decisions
    lines.append("last decisions:" if decisions else "last decisions: none yet")
    for decision in decisions:
        weights = ", ".join(f"{r}={w}" for r, w in decision.get("weights", {}).items())
        lines.append(f"  {decision.get('time', '?')}  {weights}  {decision.get('reason', '')}")
    return "\n".join(lines)


def _boto3_client(service: str, region: str) -> Any:
    import boto3

    return boto3.client(service, region_name=region)


def main(argv: list[str], client: ClientFactory = _boto3_client) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.traffic", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("show", help="weights in Route 53, the override, the last decisions")
    pin = commands.add_parser("pin", help="fix some regions' weights until the pin expires")
    pin.add_argument("weights", nargs="+", metavar="REGION=WEIGHT")
    pin.add_argument(
        "--for", dest="duration", default=DEFAULT_PIN, help=f"e.g. 90m, 2h, 1d (default {DEFAULT_PIN})"
    )
    pin.add_argument(
        "--reason", default="", help="logged by the orchestrator with every run it obeys the pin"
    )
    commands.add_parser("clear", help="remove the pin; the orchestrator's policy decides again")
    args = parser.parse_args(argv)

    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    from ops.credentials import no_credentials_message

    now = datetime.now(UTC)
    try:
        settings = load_settings(args.config)
        ssm = client("ssm", settings.orchestrator_region)
        if args.command == "show":
            print(show(settings, client, now))
        elif args.command == "pin":
            override = build_override(settings, args.weights, args.duration, args.reason, now)
            ssm.put_parameter(
                Name=override_parameter(settings), Value=override.to_json(), Type="String", Overwrite=True
            )
            pins = ", ".join(f"{r}={w}" for r, w in override.weights.items())
            print(
                f"pinned {pins} until {override.expires_at.isoformat()}; the next run (within a minute) obeys"
            )
        else:
            ssm.put_parameter(
                Name=override_parameter(settings), Value=NO_OVERRIDE, Type="String", Overwrite=True
            )
            print("override cleared; the orchestrator's policy decides from the next run")
    except ConfigError as error:
        print(f"config error:\n{error}", file=sys.stderr)
        return 1
    except OverrideError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except NoCredentialsError:
        needs = "it reads and pins region weights in your account's Route 53 and SSM"
        print(no_credentials_message("make traffic", needs), file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as error:
        print(f"AWS error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
