"""Pure functions over the clock and the runs the state remembers: which event times a run refuses, which
weights a minute's requests followed, and how a region that changes its number of cells hands its weight
over. The handler calls them; the offline replay calls the same ones."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from .policy import apportion

# An event or a state minute dated more than this ahead of the clock is refused: a run never takes a
# future minute as its own, so one bad `time` cannot make every later run look older and skip.
AHEAD_LIMIT = timedelta(minutes=1)


def parse_time(text: str) -> datetime:
    from datetime import UTC

    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def ahead_of_clock(now: datetime, moment: str | None) -> float | None:
    """Seconds `moment` is dated ahead of `now` when that is more than AHEAD_LIMIT, else None."""
    if not moment:
        return None
    ahead = parse_time(moment) - now
    return ahead.total_seconds() if ahead > AHEAD_LIMIT else None


def weights_followed(
    decisions: Sequence[Mapping[str, Any]], minute: datetime | None, current: Mapping[str, int]
) -> dict[str, int]:
    """The weights in force during `minute`: those decided by the newest remembered run at or before it
    (a run's weights apply within its own minute), target by target; `current` where none is known."""
    if minute is None:
        return dict(current)
    chosen: Mapping[str, Any] | None = None
    for decision in decisions:
        try:
            at = parse_time(str(decision["time"]))
        except (KeyError, ValueError):
            continue
        if at <= minute and (chosen is None or at >= parse_time(str(chosen["time"]))):
            chosen = decision
    weights = (chosen or {}).get("weights") or {}
    return {name: int(weights.get(name, weight)) for name, weight in current.items()}


# How a minute's requests follow the weights of the minutes before it. Route 53 makes a change available on
# its DNS servers "generally within 60 seconds" (Route 53 API Reference, ChangeResourceRecordSets): taken
# as half of the minute in which it is made. Resolvers then keep an answer for the record's TTL (an alias
# record to a load balancer has a fixed TTL of 60 s: Route 53 FAQs, "Do I need to adjust the TTL for my
# records in order to use DNS Failover?"), the cached answers expiring at random times: 1 - e^-1 a minute.
# Route 53 answers each record in proportion to its weight over the group's sum (Route 53 Developer Guide,
# "Weighted routing").
PROPAGATED_SHARE = 0.5
TTL_MINUTES = 1.0
FOLLOW_MINUTES = 5  # the kernel's length: what is older holds under 2% of a minute's requests


def follow_kernel() -> tuple[float, ...]:
    """The share of a minute's requests that follow the weights decided k minutes before it, k = 0, 1, ...
    (adding up to 1): answers in minute m are PROPAGATED_SHARE the weights of m and the rest those of m-1;
    clients ask again as their cached answers expire."""
    keep = math.exp(-1 / TTL_MINUTES)
    raw = [
        (1 - keep) * (PROPAGATED_SHARE * keep**k + (1 - PROPAGATED_SHARE) * (keep ** (k - 1) if k else 0.0))
        for k in range(FOLLOW_MINUTES)
    ]
    return tuple(value / sum(raw) for value in raw)


def weights_requests_followed(
    decisions: Sequence[Mapping[str, Any]], minute: datetime | None, current: Mapping[str, int]
) -> dict[str, float]:
    """The weights `minute`'s requests followed: those in force during it and the minutes before it, by
    `follow_kernel`. On main the policy took the weights in force alone: a region whose weight had just
    risen seemed to draw little load for its weight, was given more, and the weights swung for hours (the
    unplanned-surge game day: a cell at 25 beside its twin at 9). Minutes older than every remembered
    decision take the oldest one's weights; `current` where none is known."""
    if minute is None:
        return {name: float(weight) for name, weight in current.items()}
    oldest = min((d for d in decisions if _time_of(d) is not None), key=lambda d: _time_of(d), default=None)
    fallback = (
        weights_followed([oldest], datetime.max.replace(tzinfo=minute.tzinfo), current) if oldest else current
    )
    blended = dict.fromkeys(current, 0.0)
    for k, share in enumerate(follow_kernel()):
        at = minute - timedelta(minutes=k)
        known = any((t := _time_of(d)) is not None and t <= at for d in decisions)
        weights = weights_followed(decisions, at, current) if known else fallback
        for name in blended:
            blended[name] += share * weights[name]
    return blended


def _time_of(decision: Mapping[str, Any]) -> datetime | None:
    try:
        return parse_time(str(decision["time"]))
    except (KeyError, ValueError):
        return None


def group_of(name: str) -> str:
    """The region of a routing target: `us-east-1` for `us-east-1/2` and for `us-east-1`."""
    return name.split("/", 1)[0]


def starting_weights(
    initial: Mapping[str, int], existing: Mapping[str, int], legacy: Mapping[str, int]
) -> dict[str, int]:
    """Each configured target's weight now: its record's, else its initial weight; but a target whose region
    still has records under other names (`legacy`: the region before it was split into cells, or its cells
    before they were merged) starts with those records' weight, split by the initial weights, so the region
    is handed over at the share it had instead of gaining the new records' weight on top."""
    result = {name: existing[name] for name in initial if name in existing}
    new = [name for name in initial if name not in existing]
    by_group: dict[str, list[str]] = {}
    for name in new:
        by_group.setdefault(group_of(name), []).append(name)
    for group, names in by_group.items():
        old = sum(w for n, w in legacy.items() if group_of(n) == group)
        if old > 0:
            result.update(apportion(old, {n: float(initial[n]) or 1.0 for n in names}))
        else:
            result.update({n: initial[n] for n in names})
    return result


def legacy_weights(
    legacy: Mapping[str, int],
    configured: Mapping[str, str],
    started: Mapping[str, int],
    created: set[str],
) -> dict[str, int]:
    """The weight each legacy record keeps while its region's new records are created: the starting weight
    of the new targets not created yet (their share is still served by the legacy record), split over the
    region's legacy records; 0 once every new target has its record. `configured`: target -> region."""
    result: dict[str, int] = {}
    groups = {group_of(n) for n in legacy}
    for group in groups:
        names = [n for n in legacy if group_of(n) == group]
        pending = sum(w for t, w in started.items() if configured.get(t) == group and t not in created)
        if not any(region == group for region in configured.values()):
            continue  # the region left config altogether: the removal rule applies
        result.update(apportion(pending, {n: float(legacy[n]) or 1.0 for n in names}))
    return result
