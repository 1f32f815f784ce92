"""Discrete-event simulation of one region's serving fleet at the request level.

Requests arrive as a Poisson process; a load balancer picks a host (least outstanding requests, as the
ALB does, or round robin); the host hands the request to its least busy engine replica; each replica runs
continuous batching (a new sequence joins the running batch at the next decode step, up to max_num_seqs,
and waiting prompts are prefilled before decoding resumes) or static batching (a batch runs until its
longest sequence ends before the next one starts). Events are batched: a replica decoding a fixed batch
is not stepped token by token; it jumps to its next completion, or to the first step boundary after an
arrival it could admit, so the cost is a few heap operations per request, not per token. With decode
buckets (Engine) a replica also stops where its longest sequence outgrows its bucket, as its step changes
there.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

# One-sided 99th percentile of the standard normal distribution.
Z99 = 2.3263478740408408


class Balancer(StrEnum):
    LEAST_OUTSTANDING = "lor"
    ROUND_ROBIN = "round-robin"


class Batching(StrEnum):
    CONTINUOUS = "continuous"
    STATIC = "static"


@dataclass(frozen=True)
class LogNormal:
    """Token counts: positive, right-skewed, and pinned exactly by the two numbers a forecast gives.

    With ln X ~ N(mu, sigma^2): mean = exp(mu + sigma^2 / 2) and p99 = exp(mu + Z99 sigma), so
    sigma^2 / 2 - Z99 sigma + ln(p99 / mean) = 0; the smaller root is the fit whose p99 grows with sigma.
    A real root exists while p99 / mean <= exp(Z99^2 / 2), about 15."""

    mu: float
    sigma: float

    MAX_P99_OVER_MEAN = math.exp(Z99 * Z99 / 2)

    @classmethod
    def fit(cls, mean: float, p99: float) -> LogNormal:
        if mean <= 0 or p99 < mean:
            raise ValueError(f"need 0 < mean <= p99, got mean {mean}, p99 {p99}")
        ratio = math.log(p99 / mean)
        discriminant = Z99 * Z99 - 2 * ratio
        if discriminant < 0:
            raise ValueError(
                f"a p99 of {p99} is more than {cls.MAX_P99_OVER_MEAN:.1f}x the mean {mean}: no lognormal fits"
            )
        sigma = Z99 - math.sqrt(discriminant)
        return cls(mu=math.log(mean) - sigma * sigma / 2, sigma=sigma)

    def cdf(self, x: float) -> float:
        if x <= 0:
            return 0.0
        if self.sigma == 0:
            return 1.0 if x >= math.exp(self.mu) else 0.0
        return 0.5 * (1 + math.erf((math.log(x) - self.mu) / (self.sigma * math.sqrt(2))))

    def padded_mean(self, buckets: Sequence[int], cap: int) -> float:
        """Mean of min(X, cap) rounded up to the smallest bucket holding it (X itself past the largest):
        the prefill work per prompt of an engine compiled for those buckets."""
        total, below = 0.0, 0.0
        for bucket in sorted(buckets):
            reached = 1.0 if bucket >= cap else self.cdf(bucket)
            total += bucket * (reached - below)
            below = reached
            if reached == 1.0:
                return total
        # Past the largest bucket (a config the container refuses; kept for completeness): the prompt itself.
        mean = math.exp(self.mu + self.sigma * self.sigma / 2)
        shifted = LogNormal(self.mu + self.sigma * self.sigma, self.sigma)
        last = max(buckets) if buckets else 0
        tail = mean * (shifted.cdf(cap) - shifted.cdf(last)) + cap * (1 - self.cdf(cap))
        return total + tail

    def capped_mean(self, cap: float) -> float:
        """Mean of min(X, cap): the tokens an engine generates when it stops every answer at cap.

        E[min(X, c)] = E[X; X <= c] + c P(X > c), and E[X; X <= c] = mean x P(Y <= c) for Y lognormal
        with mu + sigma^2 (the first-moment distribution of a lognormal)."""
        mean = math.exp(self.mu + self.sigma * self.sigma / 2)
        shifted = LogNormal(self.mu + self.sigma * self.sigma, self.sigma)
        return mean * shifted.cdf(cap) + cap * (1 - self.cdf(cap))

    def draw(self, rng: np.random.Generator, size: int, cap: int) -> np.ndarray:
        """Whole tokens, at least 1 and at most cap (the engine's limit)."""
        values = (
            rng.lognormal(self.mu, self.sigma, size) if self.sigma > 0 else np.full(size, math.exp(self.mu))
        )
        return np.clip(np.rint(values), 1, cap).astype(np.int64)


@dataclass(frozen=True)
class Engine:
    """One engine replica's speed: prefill throughput and decode step time by batch size.

    With `prefill_buckets`, a prompt is prefilled at the length of the smallest bucket that holds it, as a
    Neuron engine runs the context-encoding graph compiled for that bucket (the padding is work too).

    With `decode_buckets`, a decode step runs the token-generation graph of the smallest bucket holding the
    batch's longest context, and every sequence's attention spans that bucket: NxD Inference picks, per
    sequence, the smallest bucket above its position and runs the whole batch at the largest of those
    (neuronx-distributed-inference, modules/autobucketing.py, `generation_model_bk`). The step time is then
    `decode_step_by_bucket[bucket index][batch size]`; past the largest bucket, the largest one's."""

    prefill_tokens_per_second: float
    decode_step_seconds: tuple[float, ...]  # index = sequences in the batch (0 unused), 1..max_num_seqs
    prefill_buckets: tuple[int, ...] = ()  # ascending; empty: prompts are prefilled at their own length
    decode_buckets: tuple[int, ...] = ()  # ascending; empty: decode_step_seconds at every length
    decode_step_by_bucket: tuple[tuple[float, ...], ...] = ()  # per decode bucket, as decode_step_seconds

    def __post_init__(self) -> None:
        if len(self.decode_step_by_bucket) != len(self.decode_buckets):
            raise ValueError("decode_step_by_bucket needs one step table per decode bucket")
        if any(len(table) != len(self.decode_step_seconds) for table in self.decode_step_by_bucket):
            raise ValueError("every decode bucket's step table covers the same batch sizes")

    def padded(self, prompt_tokens: np.ndarray) -> np.ndarray:
        """The tokens each prompt is prefilled at: its bucket, or itself past the largest bucket."""
        if not self.prefill_buckets:
            return prompt_tokens
        buckets = np.asarray(self.prefill_buckets, dtype=np.int64)
        index = np.searchsorted(buckets, prompt_tokens, side="left")
        inside = index < len(buckets)
        return np.where(inside, buckets[np.minimum(index, len(buckets) - 1)], prompt_tokens)

    def decode_step(self, batch: int, longest: int) -> float:
        """Seconds of one decode step of `batch` sequences whose longest context is `longest` tokens after
        the step (its prompt, the tokens generated so far and the one being generated)."""
        if not self.decode_buckets:
            return self.decode_step_seconds[batch]
        index = min(bisect.bisect_left(self.decode_buckets, longest), len(self.decode_buckets) - 1)
        return self.decode_step_by_bucket[index][batch]

    @property
    def max_num_seqs(self) -> int:
        return len(self.decode_step_seconds) - 1

    def requests_per_second(
        self, prompt_mean: float, output_mean: float, full_batch_step: float | None = None
    ) -> float:
        """Throughput bound of a full batch: the nominal capacity used to size a search and a slice.

        full_batch_step: the mean decode step of a full batch, where it depends on the decode buckets the
        requests reach (planner.demand.Demand.full_batch_step); default: the step without buckets."""
        full = self.max_num_seqs
        step = self.decode_step_seconds[full] if full_batch_step is None else full_batch_step
        per_request = prompt_mean / self.prefill_tokens_per_second
        per_request += max(output_mean - 1, 0) * step / full
        return 1 / per_request


@dataclass(frozen=True)
class HostGroup:
    """Hosts of one instance type in a region: `count` hosts with `replicas` engines each."""

    instance_type: str
    engine: Engine
    replicas: int
    count: int

    def with_count(self, count: int) -> HostGroup:
        return HostGroup(self.instance_type, self.engine, self.replicas, count)


@dataclass(frozen=True)
class Requests:
    arrival: np.ndarray  # seconds, sorted
    prompt: np.ndarray  # tokens
    output: np.ndarray  # tokens, the first one produced by the prefill

    def __len__(self) -> int:
        return len(self.arrival)


def draw_requests(
    rate: float,
    duration: float,
    prompt: LogNormal,
    output: LogNormal,
    seed: int,
    max_prompt: int = 1 << 20,
    max_output: int = 1 << 20,
) -> Requests:
    """A Poisson process at `rate` per second over `duration` seconds, token counts drawn per request.

    Common random numbers: a unit-rate process is stretched to the rate, and request i draws the same
    tokens whatever the rate, so comparing two rates (or two fleets) at one seed compares like with like."""
    if rate <= 0:
        empty = np.zeros(0, dtype=np.int64)
        return Requests(np.zeros(0), empty, empty)
    gaps_seed, prompt_seed, output_seed = np.random.SeedSequence(seed).spawn(3)
    expected = rate * duration
    count = int(expected + 8 * math.sqrt(expected) + 16)  # the process ends inside this with certainty
    unit = np.cumsum(np.random.default_rng(gaps_seed).exponential(1.0, count))
    arrival = unit[unit < expected] / rate
    count = len(arrival)
    return Requests(
        arrival,
        prompt.draw(np.random.default_rng(prompt_seed), count, max_prompt),
        output.draw(np.random.default_rng(output_seed), count, max_output),
    )


@dataclass(frozen=True)
class Outcome:
    ttft: np.ndarray  # seconds from arrival to first token, per request
    finish: np.ndarray  # seconds, when the last token left
    host: np.ndarray  # index of the host that served it
    # Refused at once by a replica holding its slots and a full queue (the container's admission bound):
    # no first token; ttft and finish are NaN for these.
    shed: np.ndarray | None = None

    @property
    def admitted(self) -> np.ndarray:
        return np.ones(len(self.ttft), dtype=bool) if self.shed is None else ~self.shed

    def p99_ttft_ms(self) -> float:
        ttft = self.ttft[self.admitted]
        return float(np.percentile(ttft, 99) * 1000) if len(ttft) else 0.0


class _Replica:
    __slots__ = (
        "admit_free",
        "admit_until",
        "buckets",
        "busy",
        "cap",
        "decode_start",
        "decoding",
        "engine",
        "event_time",
        "host",
        "index",
        "inv_prefill",
        "loads",
        "longest_offset",
        "prompt",
        "queue",
        "running",
        "slot",
        "step",
        "steps",
        "tables",
        "tokens",
    )

    def __init__(self, index: int, host: int, engine: Engine, prompt: list[int]) -> None:
        self.index = index
        self.prompt = prompt  # tokens each request is prefilled at on this engine (bucket-padded)
        self.host = host
        self.inv_prefill = 1.0 / engine.prefill_tokens_per_second
        self.engine = engine
        self.steps = engine.decode_step_seconds
        # Decode buckets: the step tables per bucket, and the longest running sequence's context less the
        # replica's step count (a running sequence's context grows by one with every step).
        self.buckets = list(engine.decode_buckets)
        self.tables = engine.decode_step_by_bucket
        self.longest_offset = -(1 << 62)
        self.cap = engine.max_num_seqs
        self.queue: deque[int] = deque()
        self.running: list[tuple[int, int]] = []  # heap of (token count at which it ends, request)
        self.tokens = 0  # decode steps this replica has run: every running sequence gains one per step
        # Outstanding requests of each replica of its host, this one's at `slot`: the host's pick of the
        # least loaded replica is then one min() in C.
        self.loads: list[int] = [0]
        self.slot = 0
        self.busy = False
        self.decoding = False
        self.decode_start = 0.0
        self.step = 0.0
        self.event_time = math.inf
        # A decode step boundary whose admissions already ran (see simulate): arrivals before it join the
        # prefill that starts there, while it has slots left.
        self.admit_until = -math.inf
        self.admit_free = 0


def simulate(
    groups: Sequence[HostGroup],
    requests: Requests,
    balancer: Balancer = Balancer.LEAST_OUTSTANDING,
    batching: Batching = Batching.CONTINUOUS,
    max_queued: int | None = None,
) -> Outcome:
    """Serve every request (the fleet drains after the last arrival) and return when each got its first
    and last token. Pure: the same inputs give the same outcome.

    `max_queued`: the container's admission bound (container/serving/streaming_model.py): a replica that
    already holds max_num_seqs + max_queued requests refuses the next at once (UNAVAILABLE, "shed"); the
    balancer's choice is the least loaded, so every replica is full then. None: every request waits."""
    replicas: list[_Replica] = []
    host_replicas: list[list[_Replica]] = []
    host_loads: list[list[int]] = []  # per host, its replicas' outstanding requests
    prefilled: dict[tuple[int, ...], list[int]] = {}  # bucket list -> padded prompts, shared by its engines
    for group in groups:
        buckets = group.engine.prefill_buckets
        if buckets not in prefilled:
            prefilled[buckets] = group.engine.padded(requests.prompt).tolist()
        for _ in range(group.count):
            host = len(host_replicas)
            members = [
                _Replica(len(replicas) + i, host, group.engine, prefilled[buckets])
                for i in range(group.replicas)
            ]
            loads = [0] * len(members)
            for slot, member in enumerate(members):
                member.loads, member.slot = loads, slot
            host_replicas.append(members)
            host_loads.append(loads)
            replicas.extend(members)
    hosts = len(host_replicas)
    if hosts == 0:
        raise ValueError("a fleet needs at least one host")

    arrival = requests.arrival.tolist()
    output = requests.output.tolist()
    tokens_in = requests.prompt.tolist()  # the prompt as the KV cache holds it (decode buckets)
    count = len(arrival)
    offset = [0] * count  # decode buckets: a running request's context less its replica's step count
    ttft = [0.0] * count
    finish = [0.0] * count
    served_by = [0] * count
    shed = [False] * count
    host_out = [0] * hosts
    # (time, key): key >= 0 is a replica's next step; key < 0 is request ~key ending (static batching only).
    events: list[tuple[float, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    bisect_left = bisect.bisect_left
    static = batching is Batching.STATIC

    def continuous_step(replica: _Replica, now: float) -> None:
        running = replica.running
        tokens = replica.tokens
        if replica.decoding:
            tokens += round((now - replica.decode_start) / replica.step)
            replica.tokens = tokens
            replica.decoding = False
        if running and running[0][0] <= tokens:
            done = 0
            longest_left = False
            longest_offset = replica.longest_offset
            while running and running[0][0] <= tokens:
                request = pop(running)[1]
                finish[request] = now
                done += 1
                if offset[request] == longest_offset:
                    longest_left = True
            host_out[replica.host] -= done
            replica.loads[replica.slot] -= done
            if longest_left and replica.buckets:
                replica.longest_offset = max([offset[r] for _, r in running]) if running else -(1 << 62)
        queue = replica.queue
        free = replica.cap - len(running)
        if queue and free > 0:
            # Prefill first: each admitted prompt is encoded in turn and emits its first token.
            time = now
            inv_prefill = replica.inv_prefill
            prompt = replica.prompt
            popleft = queue.popleft
            if replica.buckets:
                longest_offset = replica.longest_offset
                for _ in range(free if free < len(queue) else len(queue)):
                    request = popleft()
                    time += prompt[request] * inv_prefill
                    ttft[request] = time - arrival[request]
                    push(running, (tokens + output[request] - 1, request))
                    # Its context after the replica's next step: the prompt, the first token, the next.
                    context = tokens_in[request] + 1 - tokens
                    offset[request] = context
                    if context > longest_offset:
                        longest_offset = context
                replica.longest_offset = longest_offset
            else:
                for _ in range(free if free < len(queue) else len(queue)):
                    request = popleft()
                    time += prompt[request] * inv_prefill
                    ttft[request] = time - arrival[request]
                    push(running, (tokens + output[request] - 1, request))
            replica.event_time = time
            push(events, (time, replica.index))
        elif running:
            steps = running[0][0] - tokens  # to the next completion
            buckets = replica.buckets
            if buckets:
                longest = tokens + replica.longest_offset
                index = bisect_left(buckets, longest)
                if index < len(buckets):
                    # The batch runs at this bucket until its longest context outgrows it.
                    room = buckets[index] - longest + 1
                    if room < steps:
                        steps = room
                else:
                    index = len(buckets) - 1
                step = replica.tables[index][len(running)]
            else:
                step = replica.steps[len(running)]
            replica.decoding = True
            replica.decode_start = now
            replica.step = step
            time = now + steps * step
            replica.event_time = time
            push(events, (time, replica.index))
        else:
            replica.busy = False
            replica.event_time = math.inf

    def static_batch(replica: _Replica, now: float) -> None:
        queue = replica.queue
        if not queue:
            replica.busy = False
            replica.event_time = math.inf
            return
        size = min(replica.cap, len(queue))
        batch = [queue.popleft() for _ in range(size)]
        time = now
        for request in batch:
            time += replica.prompt[request] * replica.inv_prefill
            ttft[request] = time - arrival[request]
        longest = max(output[request] for request in batch)
        # A static batch steps at its full size until its longest sequence ends; with decode buckets, at
        # the bucket of its longest context, which grows by one per step: elapsed[k] = time after k steps.
        elapsed = [0.0]
        if replica.buckets:
            start = max(tokens_in[request] for request in batch)
            for step_number in range(1, longest):
                elapsed.append(elapsed[-1] + replica.engine.decode_step(size, start + step_number))
        else:
            step = replica.steps[size]
            elapsed = [k * step for k in range(longest)]
        for request in batch:
            done = time + elapsed[output[request] - 1]
            finish[request] = done
            push(events, (done, ~request))
        replica.event_time = time + elapsed[longest - 1]
        push(events, (replica.event_time, replica.index))

    handle = static_batch if static else continuous_step

    def admit(replica: _Replica, request: int) -> None:
        """Prefill `request` after the prompts already admitted at the replica's open step boundary (in
        arrival order, as continuous_step admits a queue) and move its event to the prefill's end."""
        tokens = replica.tokens
        time = replica.event_time + replica.prompt[request] * replica.inv_prefill
        ttft[request] = time - arrival[request]
        push(replica.running, (tokens + output[request] - 1, request))
        if replica.buckets:
            context = tokens_in[request] + 1 - tokens
            offset[request] = context
            if context > replica.longest_offset:
                replica.longest_offset = context
        replica.admit_free -= 1
        replica.event_time = time
        push(events, (time, replica.index))

    def advance(until: float) -> None:
        while events and events[0][0] <= until:
            time, key = pop(events)
            if key < 0:
                served = replicas[served_by[~key]]
                host_out[served.host] -= 1
                served.loads[served.slot] -= 1
                continue
            replica = replicas[key]
            if time == replica.event_time:  # otherwise an earlier boundary replaced this event
                handle(replica, time)

    least_outstanding = balancer is Balancer.LEAST_OUTSTANDING
    bounded, queued_limit = max_queued is not None, max_queued or 0
    ceil = math.ceil
    for request in range(count):
        now = arrival[request]
        if not static:
            # advance(now), inlined: the loop's hottest lines, a function call per arrival saved
            while events and events[0][0] <= now:
                time, key = pop(events)
                replica = replicas[key]
                if time == replica.event_time:  # otherwise an earlier boundary replaced this event
                    continuous_step(replica, time)
        elif events and events[0][0] <= now:
            advance(now)
        # The first host with the fewest outstanding (index of the min runs in C, unlike min with a key).
        host = host_out.index(min(host_out)) if least_outstanding else request % hosts
        # Its least loaded replica, the first of equals.
        loads = host_loads[host]
        slot = loads.index(min(loads))
        replica = host_replicas[host][slot]
        served_by[request] = replica.index
        if bounded and loads[slot] >= replica.cap + queued_limit:
            shed[request] = True
            ttft[request] = finish[request] = math.nan
            continue
        host_out[host] += 1
        loads[slot] += 1
        if not replica.busy:
            # Every event up to now has run, so an idle engine starts on it at once.
            replica.queue.append(request)
            replica.busy = True
            handle(replica, now)
        elif now < replica.admit_until and replica.admit_free:
            admit(replica, request)  # before the boundary another arrival opened: join its prefill
        elif replica.decoding and len(replica.running) < replica.cap:
            # Join at the next decode step boundary rather than at the next completion.
            start, step = replica.decode_start, replica.step
            boundary = start + ceil((now - start) / step) * step
            if boundary < replica.event_time:
                # The boundary's own event, run now rather than pushed: until it, only arrivals touch
                # this replica (its next completion is past the boundary, so none is due there), and
                # those that come before it join the same prefill; its arithmetic is the event's.
                replica.tokens += round((boundary - start) / step)
                replica.decoding = False
                replica.admit_until = boundary
                replica.admit_free = replica.cap - len(replica.running)
                replica.event_time = boundary  # the prefill starts here; admit() moves it to its end
                admit(replica, request)
            else:
                replica.queue.append(request)
        else:
            replica.queue.append(request)
    advance(math.inf)

    host_of = np.array([r.host for r in replicas], dtype=np.int64)
    return Outcome(
        np.array(ttft),
        np.array(finish),
        host_of[np.array(served_by, dtype=np.int64)],
        np.array(shed) if max_queued is not None else None,
    )
