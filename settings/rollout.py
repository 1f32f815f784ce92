"""The deploy surge: hosts a fleet may run above its service maximum while a rolling deploy starts new
tasks (cdk_constructs/fleet/rollout.py has the rest of the arithmetic). Here, without CDK, because config
validation and the preflight count those hosts against quotas too."""

from __future__ import annotations

import math


def surge_hosts(max_tasks: int, max_surge_percent: int) -> int:
    """Hosts above the service maximum that a deploy may start: a share of the maximum, at least one."""
    return max(1, math.ceil(max_tasks * max_surge_percent / 100))
