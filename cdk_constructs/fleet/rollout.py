"""Rolling-deploy arithmetic for a fleet whose every task needs a whole host.

ECS keeps the service's healthy tasks at 100% of the desired count and may run up to `max_healthy_percent`
of it during a deploy; with one task per host the new tasks also need hosts above the desired count, and
the ASG's maximum caps those. So the ASG maximum must exceed the service maximum, or a deploy at the
maximum has no host to start a new task on and stalls until the circuit breaker rolls it back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from settings.rollout import surge_hosts

__all__ = ["MAX_HEALTHY_PERCENT", "MIN_HEALTHY_PERCENT", "HostBounds", "deploy_batch", "surge_hosts"]

# ECS rounds desired x max percent down: 200% is the smallest that lets a one-task service start a
# replacement; the ASG ceiling, not this percentage, is what bounds a deploy's batch.
MAX_HEALTHY_PERCENT = 200
MIN_HEALTHY_PERCENT = 100


def deploy_batch(desired: int, asg_max: int, max_healthy_percent: int = MAX_HEALTHY_PERCENT) -> int:
    """New tasks a rolling deploy can start at once when `desired` tasks run, one per host: what ECS's
    maximum percent allows, capped by the hosts the ASG may still add."""
    ceiling = min(desired * max_healthy_percent // 100, asg_max)
    return max(0, ceiling - desired)


@dataclass(frozen=True)
class HostBounds:
    """The ASG's bounds for a fleet whose service runs between min_tasks and max_tasks."""

    min_hosts: int
    max_hosts: int
    surge: int

    @classmethod
    def for_service(cls, min_tasks: int, max_tasks: int, max_surge_percent: int) -> HostBounds:
        surge = surge_hosts(max_tasks, max_surge_percent)
        return cls(min_hosts=min_tasks, max_hosts=max_tasks + surge, surge=surge)

    def deploy_rounds(self, desired: int) -> int:
        """Batches a deploy of `desired` tasks takes (each batch is one cold start long)."""
        if desired == 0:
            return 0
        return math.ceil(desired / deploy_batch(desired, self.max_hosts))
