"""An operator's pin: fixed weights for some regions until an expiry, kept in an SSM parameter as JSON.

    {"weights": {"us-east-1": 0}, "expires_at": "2027-07-08T12:00:00Z", "reason": "patching us-east-1"}

The orchestrator obeys an unexpired pin and logs it; an expired or unreadable one is ignored (and said
so), so a forgotten pin cannot hold for ever and a typo cannot stop the orchestrator. No pin lasts more
than LONGEST_PIN after it was written, whatever its `expires_at` says (the orchestrator counts from the
parameter's LastModifiedDate), and an entry naming a region not in config is ignored alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .policy import MAX_WEIGHT

NO_OVERRIDE = "{}"  # what a cleared override parameter holds
LONGEST_PIN = timedelta(days=7)


class OverrideError(ValueError):
    """The override text is not a valid pin."""


@dataclass(frozen=True)
class Override:
    weights: dict[str, int]
    expires_at: datetime
    reason: str = ""
    ignored: tuple[str, ...] = ()  # entries naming regions not in config

    def ends_at(self, written_at: datetime | None = None) -> datetime:
        """When the pin stops being obeyed: its expiry, but never later than LONGEST_PIN after writing."""
        if written_at is None:
            return self.expires_at
        return min(self.expires_at, written_at + LONGEST_PIN)

    def active(self, now: datetime, written_at: datetime | None = None) -> bool:
        return now < self.ends_at(written_at)

    def to_json(self) -> str:
        return json.dumps(
            {
                "weights": self.weights,
                "expires_at": self.expires_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                "reason": self.reason,
            },
            sort_keys=True,
        )


def parse_time(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise OverrideError(f"expires_at {text!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise OverrideError(f"expires_at {text!r} has no time zone (add Z or an offset)")
    return moment


def parse_override(text: str | None, regions: set[str]) -> Override | None:
    """None for an empty or cleared parameter; OverrideError for anything malformed."""
    if not text or not text.strip() or text.strip() == NO_OVERRIDE:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise OverrideError(f"not JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("weights"), dict) or not data["weights"]:
        raise OverrideError('expected {"weights": {region: weight, ...}, "expires_at": "...Z"}')
    weights = {region: weight for region, weight in data["weights"].items() if region in regions}
    ignored = tuple(sorted(set(data["weights"]) - set(weights)))
    for region, weight in weights.items():
        if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= MAX_WEIGHT:
            raise OverrideError(f"weight for {region} must be an integer 0-{MAX_WEIGHT}, got {weight!r}")
    if "expires_at" not in data:
        raise OverrideError("expires_at is missing: a pin must end by itself")
    if set(weights) == regions and not any(weights.values()):
        raise OverrideError("every region pinned to 0 would send no traffic anywhere")
    return Override(weights, parse_time(str(data["expires_at"])), str(data.get("reason", "")), ignored)
