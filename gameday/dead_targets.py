"""How long a target whose engine died keeps taking requests, from the deployed health check.

The chain the kit relies on (container/README.md, "No silent failures"; docs/gameday.md cites each step):
1. the engine dies: a request meeting vLLM's EngineDeadError sees it at once, the engine watch within a
   second (it asks every WATCH_INTERVAL_S, container/serving/engine_watch.py); the model sends Triton
   SIGTERM, and Triton's graceful stop turns server readiness false at once and fails requests at once;
2. the ALB's health checks see it: each ALB node checks each target every `interval` seconds on its own
   phase, a check's result lasts the whole interval, and `unhealthy_threshold` failed checks in a row take
   the target out of service (ELB User Guide, "Health checks for Application Load Balancer target
   groups"). The first failed check comes half an interval after readiness fails on average (a death
   falls anywhere in an interval), the rest one interval apart;
3. meanwhile every request the ALB sends it fails at once, and least outstanding requests sends it far
   more than its share (gameday/loop.py failing_share).
Not relied on: ECS stopping the task and deregistering its target once the container exits (the ALB stops
sending new requests to a deregistering target at once: ELB API Reference, "DeregisterTargets"). Triton's
graceful stop lets the host's other replicas finish their streams first (up to its exit timeout), so
the container exits after the health check has already taken the target out, and ECS gives no figure for
how long after an exit it deregisters.

Figures are means: a tenth of a fleet dying is many targets, each on its own phase against each node.
"""

from __future__ import annotations

# Half the engine watch's one-second interval (container/serving/engine_watch.py WATCH_INTERVAL_S).
ENGINE_DEATH_SEEN_SECONDS = 0.5


def dead_target_seconds(interval_seconds: int, unhealthy_threshold: int) -> float:
    """Mean seconds from an engine's death until the ALB stops sending its target requests."""
    first_failed_check = interval_seconds / 2
    return ENGINE_DEATH_SEEN_SECONDS + first_failed_check + interval_seconds * (unhealthy_threshold - 1)


def share_of_minute_in_rotation(died_at_minute: int, seconds: float, minute: int) -> float:
    """The share of `minute` that a target dead since the start of `died_at_minute` spends taking requests
    (the twin's engine deaths happen at the start of their minute)."""
    left = died_at_minute + seconds / 60 - minute
    return min(max(left, 0.0), 1.0)
