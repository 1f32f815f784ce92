"""What ECS does with a new task definition, minute by minute: one fleet's rolling deployment, as the
template's DeploymentConfiguration sets it (pure code: no AWS, no clock of its own).

Modelled as the ECS Developer Guide documents it ("Deploy Amazon ECS services by replacing tasks", "How the
Amazon ECS deployment circuit breaker detects failures", "How CloudWatch alarms detect Amazon ECS deployment
failures"):
- the new deployment (PRIMARY) starts tasks of the new revision while the old one's keep serving: at most
  `MaximumPercent` of the desired count run in all, and old tasks stop only while at least
  `MinimumHealthyPercent` of it stay healthy, so with 100/200 each batch of new tasks must pass its health
  check before as many old ones stop;
- one task per host (distinctInstance): a new task needs a free host; the capacity provider launches hosts
  for the tasks that wait, up to the group's maximum (the surge the ASG maximum allows above the service's
  maximum: cdk_constructs/fleet/rollout.py), each BOOT_MINUTES; a host freed by a stopped old task takes
  the next new task at once;
- every new task cold-starts (COLD_START_MINUTES) before it serves; a revision that crashes on start stops
  CRASH_MINUTES after it is placed, never having passed a health check, and counts as a failed task;
- the circuit breaker fails the deployment once its failed tasks reach the threshold: the
  ThresholdConfiguration's COUNT where the template sets one, or its percent of the desired count
  (BOUNDED_PERCENT between 3 and 200), else ECS's default, half the desired count between 3 and 200 ("the
  failure threshold is calculated as 0.5 x desired count, minimum 3, maximum 200");
- a deployment alarm in ALARM while the deployment's tasks run fails it too; with deployment alarms the
  deployment stays IN_PROGRESS for a bake time once every task is replaced (ECS computes it from the alarms'
  configuration and states no formula: the twin takes the longest alarm's evaluation window);
- a failed deployment with rollback on is followed by a rollback: a deployment of the previous revision by the
  same rules (old tasks still serving count towards it; new ones stop as it completes). Without rollback the
  service stays as it is, with the failed deployment's tasks.

The twin's simplifications: a scale-out during a deployment starts new-revision tasks only; managed scaling's
warm-up between launches and the warm pool are not applied to the surge hosts; the hosts a deployment holds
go back to the fleet when it ends (its idle-host rule then terminates the extra ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gameday.templates import RolloutControl

BOOT_MINUTES = 5  # as gameday/control.py: EC2 launch, boot, ECS agent registration
COLD_START_MINUTES = 12  # as gameday/control.py: image, weights and artifacts to a ready model
CRASH_MINUTES = 2  # image pulled, container started, essential container exits
IN_PROGRESS, COMPLETED, FAILED = "IN_PROGRESS", "COMPLETED", "FAILED"


def failure_threshold(control: RolloutControl, desired: int) -> int:
    """Failed tasks after which the circuit breaker fails the deployment."""
    if control.failed_tasks_threshold is not None:
        return control.failed_tasks_threshold
    percent = 50 if control.failed_tasks_percent is None else control.failed_tasks_percent
    threshold = math.ceil(desired * percent / 100)
    return min(max(threshold, 3), 200) if control.failed_tasks_bounded else max(threshold, 1)


@dataclass
class Batch:
    count: int
    at: int  # the minute its tasks pass their health check (or crash)


@dataclass
class Rollout:
    """One deployment of `revision` over `old_serving` tasks of `previous`, `desired` tasks wanted."""

    control: RolloutControl
    revision: str
    previous: str
    desired: int
    old_serving: int
    started: int
    crashes: bool = False
    new_serving: int = 0
    starting: list[Batch] = field(default_factory=list)
    booting: list[Batch] = field(default_factory=list)  # hosts launched for new tasks
    free_hosts: int = 0  # hosts this deployment holds with no task on them
    failed: int = 0
    state: str = IN_PROGRESS
    reason: str = ""
    ended: int | None = None
    rolling_back: bool = False  # this deployment is the rollback of a failed one
    replaced: int | None = None  # the minute every task ran the new revision (its alarm bake starts)
    events: list[str] = field(default_factory=list)

    @property
    def new_starting(self) -> int:
        return sum(b.count for b in self.starting)

    @property
    def hosts(self) -> int:
        """Hosts the deployment holds: its new tasks' (serving or starting), free and booting ones (the old
        tasks' hosts are the fleet's until they stop)."""
        return self.new_serving + self.new_starting + self.free_hosts + sum(b.count for b in self.booting)

    @property
    def done(self) -> bool:
        return self.state != IN_PROGRESS

    def step(self, minute: int, desired: int, host_room: int, alarm: str | None = None) -> int:
        """One minute: hosts boot, batches become healthy (or crash), old tasks stop, new ones start.
        `desired`: the service's desired count now (scaling may move it); `host_room`: hosts the group may
        still add; `alarm`: a deployment alarm in ALARM (its name). Returns the old tasks stopped."""
        self.events = []
        self.desired = desired
        if self.done:
            return 0
        self.free_hosts += sum(b.count for b in self.booting if b.at <= minute)
        self.booting = [b for b in self.booting if b.at > minute]
        ready = [b for b in self.starting if b.at <= minute]
        self.starting = [b for b in self.starting if b.at > minute]
        for batch in ready:
            if self.crashes:
                self.failed += batch.count
                self.free_hosts += batch.count  # the task stopped; its host takes the next one
                self.events.append(f"{batch.count} tasks of {self.revision} stopped before healthy")
            else:
                self.new_serving += batch.count
        if self.control.breaker and self.failed >= failure_threshold(self.control, desired):
            self._fail(minute, f"circuit breaker: {self.failed} tasks failed to start")
            return 0
        # ECS watches the alarms once tasks of the new revision run; a rollback (to the last revision that
        # completed) is not failed by them: their data is still the failed revision's for minutes.
        watching = self.new_serving + self.new_starting > 0 and not self.rolling_back
        if alarm is not None and self.control.alarms and watching:
            self._fail(minute, f"deployment alarm {alarm} in ALARM")
            return 0
        # Old tasks stop while the healthy ones stay at or above the minimum healthy percent.
        floor = math.ceil(desired * self.control.min_healthy_percent / 100)
        stop = max(0, min(self.old_serving, self.old_serving + self.new_serving - floor))
        self.old_serving -= stop
        self.free_hosts += stop
        ceiling = desired * self.control.max_percent // 100
        running = self.old_serving + self.new_serving + self.new_starting
        start = max(0, min(desired - self.new_serving - self.new_starting, ceiling - running))
        placed = min(start, self.free_hosts)
        if placed:
            self.free_hosts -= placed
            ready = minute + (CRASH_MINUTES if self.crashes else COLD_START_MINUTES)
            self.starting.append(Batch(placed, ready))
        waiting = start - placed - sum(b.count for b in self.booting)
        launch = max(0, min(waiting, host_room))
        if launch:
            self.booting.append(Batch(launch, minute + BOOT_MINUTES))
            self.events.append(f"{launch} hosts launched for {self.revision}'s tasks")
        if self.new_serving >= desired and not self.old_serving and not self.starting:
            if self.replaced is None:
                self.replaced = minute
            # With deployment alarms ECS keeps the deployment IN_PROGRESS for a bake time it computes from
            # the alarms' configuration (ECS Developer Guide, "How CloudWatch alarms detect Amazon ECS
            # deployment failures"); a rollback has none.
            bake = 0 if self.rolling_back or not self.control.alarms else self.control.alarm_bake_minutes
            if minute - self.replaced >= bake:
                self.state, self.ended = COMPLETED, minute
                self.events.append(f"deployment of {self.revision} completed")
        return stop

    def _fail(self, minute: int, reason: str) -> None:
        self.state, self.reason, self.ended = FAILED, reason, minute
        self.events.append(f"deployment of {self.revision} failed: {reason}")

    def rollback(self, minute: int) -> Rollout | None:
        """The deployment ECS starts after this one failed with rollback on: the previous revision, its old
        tasks still serving counted, this one's tasks to stop (None: rollback off)."""
        by_breaker = self.reason.startswith("circuit breaker")
        rollback = self.control.breaker_rollback if by_breaker else self.control.alarms_rollback
        if self.state != FAILED or not rollback:
            return None
        # The failed revision's starting tasks stop at once; their hosts stay with the rollback.
        hosts = self.free_hosts + self.new_starting + sum(b.count for b in self.booting)
        back = Rollout(
            self.control,
            self.previous,
            self.revision,
            self.desired,
            old_serving=self.new_serving,
            started=minute,
            new_serving=self.old_serving,
            free_hosts=hosts,
            rolling_back=True,
        )
        return back
