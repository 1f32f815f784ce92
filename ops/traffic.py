"""`python -m ops.traffic [--config FILE] show | pin REGION=WEIGHT... [--for 2h] [--reason TEXT] [--replace]
| clear`

For operators: show each region's weight in Route 53 (records of regions no longer in config too), the
orchestrator's last decisions and the override; pin weights for maintenance (the orchestrator obeys a pin
until it expires, so a forgotten one ends by itself; a new pin adds to an active one unless --replace)
and clear a pin. `make traffic ARGS="..."` runs it with the Makefile's CONFIG.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from orchestrator.routing.override import LONGEST_PIN, NO_OVERRIDE, Override, OverrideError, parse_override
from orchestrator.routing.records import read_records
from orchestrator.routing.state import parse_state
from settings.loader import ConfigError, load_settings
from settings.schema import Settings
from stacks.routing_names import override_parameter, routing_targets, state_parameter

DEFAULT_CONFIG = "config/default.yaml"
DEFAULT_PIN = "2h"
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
    settings: Settings,
    items: list[str],
    duration: str,
    reason: str,
    now: datetime,
    active: Override | None = None,
) -> Override:
    """The pin as the orchestrator will read it, checked by the same parser it uses. An `active` pin's
    regions stay pinned (the new weights win where both name a region) until the new expiry."""
    expires = now + parse_duration(duration)
    pins = parse_pins(items)
    targets = routing_targets(settings)
    unknown = sorted(set(pins) - set(targets))
    if unknown:
        raise OverrideError(f"unknown region {unknown[0]!r}; configured: {', '.join(targets)}")
    if active is not None:
        pins = {**active.weights, **pins}
        reason = "; ".join(part for part in (active.reason, reason) if part)
    text = Override(pins, expires, reason).to_json()
    override = parse_override(text, set(routing_targets(settings)))
    assert override is not None
    return override


def write_pin(
    settings: Settings, ssm: Any, items: list[str], duration: str, reason: str, replace: bool
) -> str:
    """Write the pin, merged with the active one unless `replace`; what to tell the operator."""
    now = datetime.now(UTC)
    current = None
    parameter = _parameter_with_date(ssm, override_parameter(settings))
    if parameter is not None and not replace:
        try:
            found = parse_override(parameter["Value"], set(routing_targets(settings)))
        except OverrideError:
            found = None  # unreadable: the orchestrator ignores it too
        if found is not None and found.weights and found.active(now, parameter.get("LastModifiedDate")):
            current = found
    override = build_override(settings, items, duration, reason, now, current)
    ssm.put_parameter(
        Name=override_parameter(settings), Value=override.to_json(), Type="String", Overwrite=True
    )
    pins = ", ".join(f"{r}={w}" for r, w in override.weights.items())
    message = f"pinned {pins} until {override.expires_at.isoformat()}; the next run (within a minute) obeys"
    if current is not None:
        kept = sorted(set(current.weights) - set(parse_pins(items)))
        if kept:
            message += (
                f"\nkept from the active pin: {', '.join(kept)} (until the new expiry; --replace drops them)"
            )
    return message


def _parameter_with_date(ssm: Any, name: str) -> dict[str, Any] | None:
    try:
        return ssm.get_parameter(Name=name)["Parameter"]
    except ssm.exceptions.ParameterNotFound:
        return None


def _parameter(ssm: Any, name: str) -> str | None:
    found = _parameter_with_date(ssm, name)
    return found["Value"] if found else None


def show(settings: Settings, client: ClientFactory, now: datetime) -> str:
    home = settings.orchestrator_region
    ssm = client("ssm", home)
    records = read_records(client("route53", home), settings.tls.hosted_zone_id, settings.tls.domain_name)
    total = sum(record.weight for record in records.values()) or 1
    lines = [f"{settings.tls.domain_name} (hosted zone {settings.tls.hosted_zone_id}):"]
    targets = routing_targets(settings)
    for region, initial_weight in targets.items():
        record = records.get(region)
        if record is None:
            lines.append(f"  {region:<15} no record yet (configured initial weight {initial_weight})")
        else:
            share = record.weight / total
            check = record.health_check_id or "none"
            lines.append(f"  {region:<15} weight {record.weight:>3} ({share:5.1%})  health check {check}")
    run_state = parse_state(_parameter(ssm, state_parameter(settings)))
    after = settings.routing.remove_after_runs
    for region, record in records.items():
        if region in targets:
            continue
        seen = run_state.removed.get(region, 0)
        share = record.weight / total
        fate = (
            "at 0: delete the record by hand (docs/routing.md, Removing a region)"
            if record.weight == 0
            else f"set to 0 after {after} runs"
        )
        lines.append(
            f"  {region:<15} weight {record.weight:>3} ({share:5.1%})  not in config, {seen} runs: {fate}"
        )
    parameter = _parameter_with_date(ssm, override_parameter(settings))
    raw = parameter["Value"] if parameter else None
    try:
        override = parse_override(raw, set(routing_targets(settings)))
    except OverrideError as error:
        lines.append(f"override: unreadable, ignored by the orchestrator: {error}")
        override = None
    if override is not None:
        written_at = parameter.get("LastModifiedDate") if parameter else None
        state = "active" if override.active(now, written_at) else "EXPIRED (ignored)"
        pins = ", ".join(f"{r}={w}" for r, w in override.weights.items())
        ends = override.ends_at(written_at).isoformat()
        lines.append(f"override: {pins} until {ends} [{state}] {override.reason}")
        if override.ignored:
            lines.append(f"override entries ignored (not in config): {', '.join(override.ignored)}")
    elif raw is None or raw.strip() in ("", NO_OVERRIDE):
        lines.append("override: none")
    decisions = run_state.decisions
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
    pin.add_argument(
        "--replace", action="store_true", help="drop the active pin's other regions instead of keeping them"
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
            print(write_pin(settings, ssm, args.weights, args.duration, args.reason, args.replace))
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
