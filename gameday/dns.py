"""Which region a client's request reaches: Route 53's answer shares and resolvers that lag behind them.

Route 53 answers a weighted name with each healthy record in proportion to its weight; a record of
weight 0 only when every other is unhealthy (or 0); when every record is unhealthy, it answers as if all
were healthy (Route 53 Developer Guide, "How Amazon Route 53 chooses records when health checking is
configured"). Clients move to new answers as their resolvers' cached answers expire: within the TTL for
most, and over STALE_MINUTES for the share of resolvers that ignore TTLs (a simplification: one time
constant each, exponential)."""

from __future__ import annotations

import math
from collections.abc import Mapping

STALE_MINUTES = 30.0
# Route 53: a change reaches its DNS servers "generally within 60 seconds" (Route 53 API Reference,
# ChangeResourceRecordSets; health-check status changes likewise take effect over the checkers' next
# rounds): taken as spread evenly over the minute, so a change made at a minute's start is in half of that
# minute's answers and in all of the next minute's.
PROPAGATED_SHARE = 0.5


def propagated(previous: Mapping[str, float], new: Mapping[str, float]) -> dict[str, float]:
    """The answers Route 53's servers gave over the minute in which `new` replaced `previous`."""
    return {
        name: PROPAGATED_SHARE * share + (1 - PROPAGATED_SHARE) * previous.get(name, 0.0)
        for name, share in new.items()
    }


def answer_shares(weights: Mapping[str, int], healthy: Mapping[str, bool]) -> dict[str, float]:
    regions = list(weights)
    live = [r for r in regions if healthy.get(r, True)] or regions  # all unhealthy: fail open
    total = sum(weights[r] for r in live)
    if total == 0:
        # Weight 0 records are used when nothing else is: equal shares among them.
        return {r: (1 / len(live) if r in live else 0.0) for r in regions}
    return {r: (weights[r] / total if r in live else 0.0) for r in regions}


class Clients:
    def __init__(self, initial: Mapping[str, float], ttl_seconds: int, stale_share: float) -> None:
        self.fresh = dict(initial)
        self.stale = dict(initial)
        self.stale_share = stale_share
        self.fresh_rate = 1.0 if ttl_seconds == 0 else 1 - math.exp(-60 / ttl_seconds)
        self.stale_rate = 1 - math.exp(-1 / STALE_MINUTES)

    def follow(self, answers: Mapping[str, float]) -> dict[str, float]:
        """One minute later: each region's share of requests."""
        for region, share in answers.items():
            self.fresh[region] += self.fresh_rate * (share - self.fresh.get(region, 0.0))
            self.stale[region] += self.stale_rate * (share - self.stale.get(region, 0.0))
        return {
            region: (1 - self.stale_share) * self.fresh[region] + self.stale_share * self.stale[region]
            for region in answers
        }
