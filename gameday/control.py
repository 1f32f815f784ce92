"""One fleet's hosts and tasks, minute by minute, under its deployed control parameters.

Modelled as AWS documents it (docs/gameday.md lists the sources and the simplifications):
- scheduled actions set the service's and the group's min/max at their times; a scalable target whose
  bounds move clamps the desired count into them at once (a lower maximum is a scale-in);
- target tracking (Application Auto Scaling): the scale-out alarm needs 3 one-minute datapoints above the
  target, the scale-in alarm 15 below 90% of it; scale-out sets the desired count to the current one times
  metric over target; a scale-out cooldown holds further scale-out, a scale-in cooldown holds scale-in.
  AWS says it "scales out proportionally to the metric as fast as it can, but scales in more gradually"
  (Application Auto Scaling User Guide, "Target tracking scaling policies") without a figure: the twin
  removes at most SCALE_IN_STEP_SHARE of the desired count per scale-in (its assumption, not AWS's number);
- capacity-provider managed scaling: tasks that find no free host wait; hosts are launched for them, and
  while a launched host is inside `InstanceWarmupPeriod` no further step is taken; free hosts go after 15
  minutes without a task (managed termination protection keeps hosts with tasks);
- a host boots in BOOT_MINUTES (WARM_START_MINUTES from a warm pool), then its task cold-starts in
  COLD_START_MINUTES before the ALB sends it requests; ECS ignores the target group's health checks for the
  service's `HealthCheckGracePeriodSeconds` after a task starts and then replaces a task still unhealthy
  (ECS Developer Guide, "healthCheckGracePeriodSeconds"): a grace shorter than the cold start stops every
  new task before it serves, and a new one starts the cold start again;
- a task whose engine died keeps its target, failing every request it gets, until the task takes it out of
  its groups itself where the template lets it, or the HTTP target group's health check sees it
  (gameday/dead_targets.py: 4.5 s, or 8 s on average at 5 s x 2 without), part of a minute or several; ECS
  replaces it on the same host (a new cold start) from the next minute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from gameday.dead_targets import share_of_minute_in_rotation
from gameday.deploys import FAILED, Rollout
from gameday.templates import FleetControl

BOOT_MINUTES = 5  # EC2 launch, boot, ECS agent registration
WARM_START_MINUTES = 2  # a stopped warm-pool host starting
COLD_START_MINUTES = 12  # image, weights and compiled artifacts to a ready model, within the 1800 s budget
SCALE_OUT_DATAPOINTS = 3
SCALE_IN_DATAPOINTS = 15
SCALE_IN_RATIO = 0.9
SCALE_IN_STEP_SHARE = 0.1  # the most one scale-in removes: "more gradually", in the twin's own figure
FREE_HOST_MINUTES = 15


@dataclass
class Cohort:
    count: int
    at: int  # the minute the cohort moves on (booted, in service, detected dead)
    died: int = 0  # dead engines: the minute they died


@dataclass
class FleetState:
    control: FleetControl
    desired: int
    hosts: int  # registered with the cluster
    serving: int  # tasks in service behind the ALB
    asg_min: int = 0
    asg_max: int = 0
    service_min: int = 0
    service_max: int = 0
    booting: list[Cohort] = field(default_factory=list)
    starting: list[Cohort] = field(default_factory=list)
    dead: list[Cohort] = field(default_factory=list)  # still targets until detected
    warm_pool: int = 0
    last_launch: int = -(10**6)
    last_scale_out: int = -(10**6)
    last_scale_activity: int = -(10**6)
    above: int = 0
    below: int = 0
    free_minutes: int = 0
    # A rolling deployment of the service (gameday/deploys.py): its new tasks serve beside `serving`, which
    # are then the tasks of `revision`, the deployment before. None on a day without deploys.
    rollout: Rollout | None = None
    revision: str = "current"
    rollouts: list[Rollout] = field(default_factory=list)  # every deployment of the day, in order
    # The launch template's AMI: a change replaces no host by itself; hosts booted since run it.
    ami: str = "current"
    ami_hosts: int = 0  # of `hosts`, those booted from `ami` since the launch template took it
    ami_booted: int = 0  # every host booted from `ami` since

    def change_ami(self, ami: str) -> None:
        """The launch template's new AMI (CloudFormation updates it; no running host changes)."""
        if ami != self.ami:
            self.ami, self.ami_hosts, self.ami_booted = ami, 0, 0

    @classmethod
    def steady(cls, control: FleetControl, when: datetime, wanted: int) -> FleetState:
        """In service at the scenario's start: the bounds in force then, `wanted` tasks within them."""
        asg_min, asg_max, service_min, service_max = control.bounds_at(when)
        desired = min(max(wanted, service_min), service_max)
        hosts = max(desired, asg_min)
        state = cls(control, desired, hosts, desired, asg_min, asg_max, service_min, service_max)
        if control.warm_pool:
            prepared = control.warm_pool.max_prepared or asg_max
            state.warm_pool = max(control.warm_pool.min_size, prepared - hosts)
        return state

    @property
    def tasks(self) -> int:
        return self.serving + sum(c.count for c in self.starting) + sum(c.count for c in self.dead)

    @property
    def all_tasks(self) -> int:
        """Every task the service runs, the deployment's own (new, or being rolled back to) included: a
        task in a rollout is placed on a host like any other, so it is none waiting for one."""
        rollout = self.rollout
        return self.tasks + (rollout.new_serving + rollout.new_starting if rollout is not None else 0)

    @property
    def in_service(self) -> int:
        """Tasks serving behind the ALB, the deployment's new ones included."""
        return self.serving + (self.rollout.new_serving if self.rollout else 0)

    @property
    def dead_targets(self) -> int:
        return sum(c.count for c in self.dead)

    def dead_in_rotation(self, minute: int) -> tuple[int, float]:
        """(dead targets the ALB sends requests to in `minute`, the share of the minute it does): the
        longest-lived cohort's share, and the cohorts' target-minutes spread over it."""
        seconds = self.control.dead_target_seconds
        shares = [(c.count, share_of_minute_in_rotation(c.died, seconds, minute)) for c in self.dead]
        longest = max((share for _, share in shares), default=0.0)
        if longest <= 0:
            return 0, 0.0
        return round(sum(count * share for count, share in shares) / longest), longest

    @property
    def all_hosts(self) -> int:
        held = self.rollout.hosts if self.rollout else 0
        return self.hosts + sum(c.count for c in self.booting) + held

    def deploy(self, revision: str, minute: int, crashes: bool = False) -> Rollout | None:
        """ECS starts a rolling deployment of `revision` (None: the service runs it already)."""
        current = self.rollout.revision if self.rollout else self.revision
        if current == revision:
            return None
        if self.rollout is not None:
            self._end_rollout(minute)
        self.rollout = Rollout(
            self.control.rollout, revision, self.revision, self.desired, self.serving, minute, crashes
        )
        self.rollouts.append(self.rollout)
        return self.rollout

    def _end_rollout(self, minute: int) -> None:
        """A finished (or superseded) deployment's tasks and hosts become the fleet's own."""
        rollout = self.rollout
        assert rollout is not None
        self.serving += rollout.new_serving
        self.hosts += rollout.new_serving + rollout.new_starting + rollout.free_hosts
        if rollout.new_starting:
            self.starting.append(Cohort(rollout.new_starting, minute + self._first_ready_minutes()))
        self.booting.extend(Cohort(b.count, b.at) for b in rollout.booting)
        if rollout.new_serving or not self.serving - rollout.new_serving:
            self.revision = rollout.revision
        self.rollout = None

    def _step_rollout(self, minute: int, alarms: dict[str, bool], events: list[str]) -> int:
        """The deployment's minute; returns the old serving tasks it replaced."""
        rollout = self.rollout
        assert rollout is not None
        name = self.control.instance_type
        if rollout.done:
            return 0
        firing = next((a for a in rollout.control.alarms if alarms.get(a)), None)
        room = max(self.asg_max - self.all_hosts, 0)
        rollout.old_serving = self.serving
        stopped = rollout.step(minute, self.desired, room, firing)
        self.serving -= stopped
        self.hosts -= stopped  # their hosts now hold the new revision's tasks
        events.extend(f"{name}: {event}" for event in rollout.events)
        if rollout.state == FAILED:
            back = rollout.rollback(minute)
            if back is None:
                return stopped  # left as it is: the failed revision's tasks keep serving
            # The failed revision's serving tasks are now the deployment before; the old ones the new.
            self.hosts += back.old_serving - back.new_serving
            self.serving, self.revision = back.old_serving, rollout.revision
            self.rollout = back
            self.rollouts.append(back)
            events.append(f"{name}: rollback to {back.revision} started")
        elif rollout.done:
            self._end_rollout(minute)
        return stopped

    def _clamp(self, minute: int, events: list[str]) -> None:
        clamped = min(max(self.desired, self.service_min), self.service_max)
        if clamped != self.desired:
            events.append(f"{self.control.instance_type}: desired {self.desired} -> {clamped} (bounds)")
            self.desired = clamped
            self.last_scale_activity = minute

    def schedule(self, minute: int, before: datetime, now: datetime, events: list[str]) -> None:
        for action in self.control.asg_schedule:
            if action.fires(before, now):
                self.asg_min = action.min if action.min is not None else self.asg_min
                self.asg_max = action.max if action.max is not None else self.asg_max
                events.append(f"{self.control.instance_type}: group min/max {self.asg_min}/{self.asg_max}")
        for action in self.control.service_schedule:
            if action.fires(before, now):
                self.service_min = action.min if action.min is not None else self.service_min
                self.service_max = action.max if action.max is not None else self.service_max
                events.append(
                    f"{self.control.instance_type}: {action.name} service min/max "
                    f"{self.service_min}/{self.service_max}"
                )
        self._clamp(minute, events)

    def track(self, minute: int, metric: float | None, events: list[str]) -> None:
        """Target tracking on the minute's datapoint of the tracked metric (None: no data)."""
        tracking = self.control.tracking
        if tracking is None or metric is None:
            return
        self.above = self.above + 1 if metric > tracking.target else 0
        self.below = self.below + 1 if metric < tracking.target * SCALE_IN_RATIO else 0
        wanted = math.ceil(self.desired * metric / tracking.target)
        if self.above >= SCALE_OUT_DATAPOINTS and wanted > self.desired:
            if minute - self.last_scale_out >= tracking.scale_out_cooldown / 60:
                new = min(wanted, self.service_max)
                if new > self.desired:
                    events.append(f"{self.control.instance_type}: scale out {self.desired} -> {new}")
                    self.desired = new
                    self.last_scale_out = self.last_scale_activity = minute
        elif (
            self.below >= SCALE_IN_DATAPOINTS
            and wanted < self.desired
            and minute - self.last_scale_activity >= tracking.scale_in_cooldown / 60
        ):
            gradual = self.desired - max(1, math.floor(self.desired * SCALE_IN_STEP_SHARE))
            new = max(wanted, gradual, self.service_min)
            if new < self.desired:
                events.append(f"{self.control.instance_type}: scale in {self.desired} -> {new}")
                self.desired = new
                self.last_scale_activity = minute

    def _stop_tasks(self, count: int) -> int:
        """Stop `count` tasks, those not serving yet first; returns how many serving tasks stopped."""
        for pool in (self.dead, self.starting):
            while count and pool:
                take = min(count, pool[-1].count)
                pool[-1].count -= take
                count -= take
                if pool[-1].count == 0:
                    pool.pop()
        stopped = min(count, self.serving)
        self.serving -= stopped
        return stopped

    def step(
        self, minute: int, launch_blocked: bool, events: list[str], alarms: dict[str, bool] | None = None
    ) -> int:
        """Hosts boot, tasks start, die and are replaced, the group scales; returns serving tasks stopped
        this minute. `alarms`: alarm key -> in ALARM, for a deployment's alarms."""
        if self.rollout is not None and not self.rollout.done:
            # ECS's deployment owns the service's tasks: the deployment before starts none of its own.
            desired = self.desired
            self.desired = self.tasks
            try:
                stopped = self._step_own(minute, launch_blocked, events)
            finally:
                self.desired = desired
            # Old tasks a deployment replaces are drained (the target group's deregistration delay), not
            # stopped with requests in flight: not counted as stopped.
            self._step_rollout(minute, alarms or {}, events)
            return stopped
        if self.rollout is not None:  # failed, not rolled back: its tasks serve beside the fleet's
            desired = self.desired
            self.desired = max(desired - self.rollout.new_serving, 0)
            try:
                return self._step_own(minute, launch_blocked, events)
            finally:
                self.desired = desired
        return self._step_own(minute, launch_blocked, events)

    def _step_own(self, minute: int, launch_blocked: bool, events: list[str]) -> int:
        name = self.control.instance_type
        ready = sum(c.count for c in self.booting if c.at <= minute)
        self.booting[:] = [c for c in self.booting if c.at > minute]
        self.hosts += ready
        if ready and self.ami != "current":
            self.ami_hosts += ready
            self.ami_booted += ready
        ready = sum(c.count for c in self.starting if c.at <= minute)
        self.starting[:] = [c for c in self.starting if c.at > minute]
        if ready and self.control.grace_seconds < COLD_START_MINUTES * 60:
            # Still cold when the grace ran out: unhealthy, stopped and started again from the beginning.
            events.append(f"{name}: {ready} tasks stopped by the health check in their cold start, restarted")
            self.starting.append(Cohort(ready, minute + self._first_ready_minutes()))
        else:
            self.serving += ready
        detected = sum(c.count for c in self.dead if c.at <= minute)
        self.dead[:] = [c for c in self.dead if c.at > minute]
        if detected:
            events.append(f"{name}: {detected} dead tasks out of the target group, replaced")

        stopped = 0
        if self.tasks > self.desired:
            stopped = self._stop_tasks(self.tasks - self.desired)
        free = self.hosts - self.tasks
        wanted = self.desired - self.tasks
        if wanted > 0 and free > 0:
            placed = min(wanted, free)
            self.starting.append(Cohort(placed, minute + self._first_ready_minutes()))
            wanted -= placed
        # Managed scaling: hosts for the tasks waiting, one step per warm-up period.
        target_hosts = self.tasks + max(wanted, 0)
        launch = 0
        in_warmup = minute - self.last_launch < self.control.warmup_seconds / 60
        if wanted > 0 and not in_warmup:
            launch = min(wanted, self.asg_max - self.all_hosts)
        launch = max(launch, self.asg_min - self.all_hosts)  # the group's own minimum
        if launch > 0:
            if launch_blocked:
                events.append(f"{name}: launch of {launch} hosts failed (insufficient capacity)")
            else:
                warm = min(launch, self.warm_pool)
                self.warm_pool -= warm
                if warm:
                    self.booting.append(Cohort(warm, minute + WARM_START_MINUTES))
                if launch - warm:
                    self.booting.append(Cohort(launch - warm, minute + BOOT_MINUTES))
                self.last_launch = minute
                events.append(f"{name}: {launch} hosts launched ({warm} from the warm pool)")
        # Free hosts leave once managed scaling has seen them idle long enough, never below the minimum.
        idle = self.hosts - self.tasks
        self.free_minutes = self.free_minutes + 1 if idle > 0 and target_hosts < self.all_hosts else 0
        if self.free_minutes >= FREE_HOST_MINUTES:
            remove = min(idle, self.all_hosts - max(target_hosts, self.asg_min))
            if remove > 0:
                self.hosts -= remove
                events.append(f"{name}: {remove} idle hosts terminated")
            self.free_minutes = 0
        if self.all_hosts > self.asg_max:  # a lower group maximum terminates at once
            cut = min(self.all_hosts - self.asg_max, self.hosts)
            self.hosts -= cut
            over = self.tasks - self.hosts
            if over > 0:
                stopped += self._stop_tasks(over)
        self.ami_hosts = min(self.ami_hosts, self.hosts)
        return stopped

    def _first_ready_minutes(self) -> int:
        """When a new task is ready, or (grace shorter than the cold start) when ECS stops it."""
        grace = math.ceil(self.control.grace_seconds / 60)
        return COLD_START_MINUTES if grace >= COLD_START_MINUTES else max(grace, 1)

    def kill(self, count: int, minute: int) -> int:
        """Engines of `count` serving tasks die at the start of `minute`: they stay targets, failing every
        request, until they leave their groups or the health check takes them out (dead_in_rotation)."""
        count = min(count, self.serving)
        if count:
            self.serving -= count
            # Out of the target group after dead_target_seconds; the task is replaced from the minute after.
            leaves = minute + max(1, math.ceil(self.control.dead_target_seconds / 60))
            self.dead.append(Cohort(count, leaves, died=minute))
        return count
