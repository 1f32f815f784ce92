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
Faster, where the template deploys it: the task leaves its target groups itself
(container/serving/leave_target_groups.py). On the death (as in 1.) the model starts a DeregisterTargets
call for its own target in each group, on a thread of its own, before it stops Triton; the ALB stops sending
new requests to a deregistering target and lets the requests in flight drain for the deregistration delay
(ELB API Reference, "DeregisterTargets",
https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_DeregisterTargets.html). The docs
give no figure for how soon the ALB's nodes act on the call, so the twin allows ALB_ACTS_SECONDS on top of the
call itself: self_deregistration_seconds. It needs both halves in the template: the serving container naming
each target group its service registers it in (TARGET_GROUP_ARN_<port>), and the task role allowed
DeregisterTargets on each (gameday/templates.py reads both); without either the health check alone acts. The
health check runs all the same, so a target leaves at whichever comes first.

Not relied on: ECS stopping the task and deregistering its target once the container exits. Triton's
graceful stop lets the host's other replicas finish their streams first (up to its exit timeout), so
the container exits after the target has left, and ECS gives no figure for how long after an exit it
deregisters.

Figures are means: a tenth of a fleet dying is many targets, each on its own phase against each node.
"""

from __future__ import annotations

# Half the engine watch's one-second interval (container/serving/engine_watch.py WATCH_INTERVAL_S).
ENGINE_DEATH_SEEN_SECONDS = 0.5


def dead_target_seconds(interval_seconds: int, unhealthy_threshold: int) -> float:
    """Mean seconds from an engine's death until the ALB stops sending its target requests."""
    first_failed_check = interval_seconds / 2
    return ENGINE_DEATH_SEEN_SECONDS + first_failed_check + interval_seconds * (unhealthy_threshold - 1)


# The container's side of leaving the target groups (container/serving/leave_target_groups.py; a test keeps
# these equal to the container's and the stack's).
TARGET_GROUP_ENV_PREFIX = "TARGET_GROUP_ARN_"
DEREGISTER_TARGETS_ACTION = "elasticloadbalancing:DeregisterTargets"
# The call itself, from the death seen to the answer: a new boto3 client (credentials from the ECS agent) and
# one round trip to the region's ELB endpoint, tens of milliseconds in a region; taken as a whole second.
DEREGISTER_CALL_SECONDS = 1.0
# From the answer until every ALB node has stopped sending the target new requests. The API reference says
# the load balancer stops sending requests to a deregistering target, with no figure; reports from
# Kubernetes users see requests reach a deregistered target for seconds (their controller's own delay mixed
# in). An allowance, not a measurement: docs/gameday.md's simplifications name it.
ALB_ACTS_SECONDS = 3.0


def self_deregistration_seconds() -> float:
    """Mean seconds from an engine's death until the ALB stops sending its target requests, when the task
    takes its own target out of its groups."""
    return ENGINE_DEATH_SEEN_SECONDS + DEREGISTER_CALL_SECONDS + ALB_ACTS_SECONDS


def dead_target_seconds_deployed(
    interval_seconds: int, unhealthy_threshold: int, leaves_itself: bool
) -> float:
    """Mean seconds a dead engine's target takes requests: the health check's, or the task's own leaving
    where deployed, whichever ends first."""
    checks = dead_target_seconds(interval_seconds, unhealthy_threshold)
    return min(checks, self_deregistration_seconds()) if leaves_itself else checks


def share_of_minute_in_rotation(died_at_minute: int, seconds: float, minute: int) -> float:
    """The share of `minute` that a target dead since the start of `died_at_minute` spends taking requests
    (the twin's engine deaths happen at the start of their minute)."""
    left = died_at_minute + seconds / 60 - minute
    return min(max(left, 0.0), 1.0)
