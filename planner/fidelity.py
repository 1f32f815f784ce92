"""The simulator against a real engine: fit an engine model from a few single-request measurements, predict
TTFT and throughput at several arrival rates, and compare with what the engine measured at those rates.

`make bench-planner-fidelity` (bench/planner_fidelity.py) runs the real vLLM engine; everything here is
pure, so tests call it directly. The engine model is planner/simulate.py's: prefill at a token rate, then
decode steps whose time grows with the batch. A real engine also pays a fixed cost per forward pass (its
scheduler, sampling, output). With the separate scheduler (NxD Inference's, the plans') the fit counts
that cost as extra prefill tokens per request, as the simulator's prefills have no such term; with the
mixed scheduler (vLLM's, the engine this bench runs) it is the cost of a pass that only prefills, paid
once a pass, and the decodes' attention over their contexts is a term of its own."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.simulate import Engine, HostGroup, Requests, Scheduler, simulate


@dataclass(frozen=True)
class FittedEngine:
    """The engine model fitted to single-request measurements."""

    prefill_tokens_per_second: float
    overhead_seconds: float  # fixed cost per request before its first token, besides the prefill
    step_seconds_at_one: float  # decode step with one sequence
    step_seconds_per_sequence: float  # what each further sequence in the batch adds to a step
    max_num_seqs: int
    # What each token of the decoding sequences' contexts adds to a step (0: not measured). Only the mixed
    # scheduler models it; a separate engine's steps grow with the context through decode buckets.
    step_seconds_per_context_token: float = 0.0
    scheduler: Scheduler = Scheduler.SEPARATE
    max_num_batched_tokens: int = 0  # the mixed scheduler's token budget per step
    mixed_decode_share: float = 1.0  # what a mixed pass that also prefills pays of its decodes' step
    # Time to a first token outside the engine's passes (the front end's tokenizing and output path, an
    # idle engine waking): added to each first token, never to the engine's time (mixed fits only).
    first_token_latency_seconds: float = 0.0

    def step(self, batch: int, context: int = 0) -> float:
        """A decode step of `batch` sequences holding `context` tokens of KV cache between them."""
        return (
            self.step_seconds_at_one
            + self.step_seconds_per_sequence * (batch - 1)
            + self.step_seconds_per_context_token * context
        )

    def engine(self) -> Engine:
        steps = tuple(self.step(batch) for batch in range(1, self.max_num_seqs + 1))
        if self.scheduler is Scheduler.SEPARATE:
            return Engine(self.prefill_tokens_per_second, (0.0, *steps))
        return Engine(
            self.prefill_tokens_per_second,
            (self.overhead_seconds, *steps),
            scheduler=Scheduler.MIXED,
            max_num_batched_tokens=self.max_num_batched_tokens,
            decode_seconds_per_context_token=self.step_seconds_per_context_token,
            mixed_decode_share=self.mixed_decode_share,
        )

    def effective_prompts(self, prompt_tokens: np.ndarray) -> np.ndarray:
        """The prompt lengths the simulator charges: with the separate scheduler, the per-request overhead
        added as the prefill tokens it would take; with the mixed one, the prompts themselves (the overhead
        is a pass's fixed cost, in the engine's step table)."""
        if self.scheduler is Scheduler.MIXED:
            return prompt_tokens
        extra = round(self.overhead_seconds * self.prefill_tokens_per_second)
        return prompt_tokens + extra

    def mixed_step(self, batch: int, context: int, prompt_tokens: int) -> float:
        """The mixed scheduler's cost of one pass of `batch` decodes holding `context` tokens and a prompt
        (simulate.Engine)."""
        prefill = self.overhead_seconds + prompt_tokens / self.prefill_tokens_per_second
        return prefill + self.mixed_decode_share * self._decodes_past_the_fixed_cost(batch, context)

    def _decodes_past_the_fixed_cost(self, batch: int, context: int) -> float:
        return self.step(batch, context) - self.overhead_seconds if batch else 0.0


def _medians(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """One point per x, at the median of its y: a run slowed by the machine (a shared CPU) moves a median
    little, a least-squares line through every sample a lot."""
    by_x: dict[float, list[float]] = {}
    for x, y in points:
        by_x.setdefault(x, []).append(y)
    return [(x, statistics.median(ys)) for x, ys in sorted(by_x.items())]


def _line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares intercept and slope of y over x."""
    xs = np.array([x for x, _ in points], dtype=float)
    ys = np.array([y for _, y in points], dtype=float)
    if len(points) < 2 or np.ptp(xs) == 0:
        raise ValueError("a line needs measurements at two or more distinct sizes")
    slope, intercept = np.polyfit(xs, ys, 1)
    return float(intercept), float(slope)


def _through_origin(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of y over x for a line through the origin."""
    xs = np.array([x for x, _ in points], dtype=float)
    ys = np.array([y for _, y in points], dtype=float)
    return float(np.dot(xs, ys) / np.dot(xs, xs))


def fit_engine(
    prefill: Sequence[tuple[int, float]],
    steps: Sequence[tuple[int, float]],
    max_num_seqs: int,
    *,
    context_steps: Sequence[tuple[int, int, float]] = (),
    step_context: int = 0,
    scheduler: Scheduler = Scheduler.SEPARATE,
    max_num_batched_tokens: int = 0,
    mixed: Sequence[tuple[int, int, int, float]] = (),
) -> FittedEngine:
    """prefill: (prompt tokens, seconds to the first token) of requests run alone; steps: (batch size,
    seconds per decode step) of batches started together, each sequence holding about `step_context`
    tokens; context_steps: (batch size, tokens each sequence holds, seconds per step) at longer contexts;
    mixed: (decoding streams, the tokens of context they hold, prompt tokens, seconds of the pass that
    prefilled the prompt among their decodes). The median at each size, then least squares: TTFT =
    overhead + tokens / rate, step = a + b x (batch - 1) (+ c x batch x context, with context steps); a fit
    that would need a negative overhead (or a step shrinking with the batch or the context) is fitted
    again without that term, not clamped, so the other terms stay a least-squares fit. The mixed passes
    then give the prefill rate a busy engine spends and the share of the decodes' step a pass that also
    prefills pays (simulate.Engine), one least-squares fit (`_pass_terms`); what a prompt alone took beyond
    its pass becomes `first_token_latency_seconds`."""
    prefill = _medians(prefill)
    overhead, per_token = _line(prefill)
    if overhead < 0:
        overhead, per_token = 0.0, _through_origin(prefill)
    if per_token <= 0:
        raise ValueError("time to first token does not grow with the prompt: prompts too short to fit")
    at_one, per_sequence, per_context = _fit_steps(steps, context_steps, step_context)
    fitted = FittedEngine(
        prefill_tokens_per_second=1 / per_token,
        overhead_seconds=overhead,
        step_seconds_at_one=max(at_one, 1e-6),
        step_seconds_per_sequence=per_sequence,
        max_num_seqs=max_num_seqs,
        step_seconds_per_context_token=per_context,
        scheduler=scheduler,
        max_num_batched_tokens=max_num_batched_tokens,
    )
    if not mixed:
        return fitted
    groups: dict[tuple[int, int, int], list[tuple[int, float]]] = {}
    for streams, context, prompt, seconds in mixed:
        groups.setdefault(mixed_size(streams, context, prompt), []).append((context, seconds))
    rows = []  # (prompt tokens, the decodes' step past its fixed cost, the pass past the fixed cost)
    for (streams, prompt, _), runs in groups.items():
        context = round(statistics.median(c for c, _ in runs))
        decodes = fitted._decodes_past_the_fixed_cost(streams, context)
        rows.append((prompt, decodes, statistics.median(s for _, s in runs) - fitted.overhead_seconds))
    per_token, share = _pass_terms(rows, 1 / fitted.prefill_tokens_per_second)
    # What a prompt run alone took to its first token beyond its pass: time outside the engine.
    left = [ttft - fitted.overhead_seconds - tokens * per_token for tokens, ttft in prefill]
    return replace(
        fitted,
        prefill_tokens_per_second=1 / per_token,
        mixed_decode_share=share,
        first_token_latency_seconds=max(statistics.median(left), 0.0),
    )


def mixed_size(streams: int, context: int, prompt: int) -> tuple[int, int, int]:
    """The size a mixed pass is measured at, one median each: its streams, its prompt, and the streams'
    contexts to the nearest 128 tokens each."""
    return streams, prompt, round(context / streams / 128)


def _pass_terms(rows: Sequence[tuple[int, float, float]], alone_per_token: float) -> tuple[float, float]:
    """(seconds per prompt token, share of the decodes' step) of mixed passes: pass - fixed cost = per_token x
    prompt + share x decodes, least squares. The prefill rate is taken from the passes, not from prompts
    run alone: a prompt alone also waits for what does not occupy the engine (an idle engine's wake-up, the
    front end; on the CPU bench a 256-token prompt alone took 28.8 ms to its first token, its pass among 4
    decodes 20.0 ms). A share is bounded to 0-1 (past 1 the decodes would cost more beside a prefill than
    alone), the rate then refitted with it; with passes of one prompt size, or a rate that is not positive,
    the alone rate stays and the share is fitted alone (1 when the decodes cost nothing measurable)."""
    prompts = np.array([prompt for prompt, _, _ in rows], dtype=float)
    decodes = np.array([d for _, d, _ in rows], dtype=float)
    passes = np.array([y for _, _, y in rows], dtype=float)

    def share_with(per_token: float) -> float:
        if not decodes.any():
            return 1.0
        rest = passes - per_token * prompts
        return float(min(max(np.dot(decodes, rest) / np.dot(decodes, decodes), 0.0), 1.0))

    if len(set(prompts.tolist())) >= 2:
        design = np.column_stack([prompts, decodes])
        if np.linalg.matrix_rank(design) == 2:
            (per_token, share), *_ = np.linalg.lstsq(design, passes, rcond=None)
            if not 0.0 <= share <= 1.0:
                share = min(max(share, 0.0), 1.0)
                per_token = float(np.dot(prompts, passes - share * decodes) / np.dot(prompts, prompts))
            if per_token > 0:
                return float(per_token), float(share)
    return alone_per_token, share_with(alone_per_token)


def _fit_steps(
    steps: Sequence[tuple[int, float]], context_steps: Sequence[tuple[int, int, float]], step_context: int
) -> tuple[float, float, float]:
    """(a, b, c) of step = a + b x (batch - 1) + c x batch x context: at context steps' batch x context;
    without context steps, a + b x (batch - 1) alone (c = 0)."""
    if context_steps:
        groups: dict[tuple[int, int], list[float]] = {}
        for batch, seconds in steps:
            groups.setdefault((batch, step_context), []).append(seconds)
        for batch, context, seconds in context_steps:
            groups.setdefault((batch, context), []).append(seconds)
        rows = [(batch, context, statistics.median(ys)) for (batch, context), ys in sorted(groups.items())]
        design = np.array([[1.0, batch - 1, batch * context] for batch, context, _ in rows])
        ys = np.array([seconds for *_, seconds in rows])
        if np.linalg.matrix_rank(design) == 3:
            (at_one, per_sequence, per_context), *_ = np.linalg.lstsq(design, ys, rcond=None)
            if per_sequence >= 0 and per_context >= 0:
                return float(at_one), float(per_sequence), float(per_context)
    steps = _medians(steps)
    at_one, per_sequence = _line([(batch - 1, seconds) for batch, seconds in steps])
    if per_sequence < 0:
        at_one, per_sequence = statistics.median(seconds for _, seconds in steps), 0.0
    return at_one, per_sequence, 0.0


@dataclass(frozen=True)
class Point:
    """TTFT percentiles and throughput at one arrival rate."""

    rate: float  # offered requests per second
    ttft_p50: float  # seconds
    ttft_p99: float
    throughput: float  # output tokens per second over the run, first arrival to last token


def point(
    rate: float, arrival: np.ndarray, ttft: np.ndarray, finish: np.ndarray, output: np.ndarray
) -> Point:
    """One pass at a rate: its TTFT percentiles and its tokens over its span (`pooled` of that pass alone)."""
    return pooled(rate, [(arrival, ttft, finish, output)])


def best_of(points: Sequence[Point]) -> Point:
    """The same load measured more than once on a shared machine: per figure the best pass (lowest TTFT,
    highest throughput). Other work on the machine only ever slows the engine, so the best pass is the
    closest to the engine alone, which is what the simulator models."""
    if not points or len({p.rate for p in points}) != 1:
        raise ValueError("best_of needs passes of one rate")
    return Point(
        rate=points[0].rate,
        ttft_p50=min(p.ttft_p50 for p in points),
        ttft_p99=min(p.ttft_p99 for p in points),
        throughput=max(p.throughput for p in points),
    )


def pooled(rate: float, passes: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> Point:
    """One rate's passes over different draws of requests, as one sample: the TTFT percentiles of every
    request of every pass, the throughput every pass's tokens over their spans together. Each pass is
    (arrival, ttft, finish, output), its times from its own start.

    A p99 over one draw of 500 requests rests on its five slowest, which a few clusters of arrivals make:
    the bench's draws stretch one unit-rate process to each rate (common random numbers,
    `planner.simulate.draw_requests`), so the same clusters set the p99 at every rate, and what the model
    gets wrong about those few requests showed as an error of one sign at every rate."""
    if not passes:
        raise ValueError("pooled needs at least one pass")
    ttft = np.concatenate([t for _, t, _, _ in passes])
    tokens = float(sum(np.sum(o) for _, _, _, o in passes))
    span = sum(float(np.max(f) - np.min(a)) for a, _, f, _ in passes if len(a))
    return Point(
        rate=rate,
        ttft_p50=float(np.percentile(ttft, 50)),
        ttft_p99=float(np.percentile(ttft, 99)),
        throughput=tokens / span if span > 0 else 0.0,
    )


def predict_times(fitted: FittedEngine, requests: Requests) -> tuple[np.ndarray, np.ndarray]:
    """The simulator's first-token and finish times for one engine serving exactly these requests."""
    charged = Requests(requests.arrival, fitted.effective_prompts(requests.prompt), requests.output)
    outcome = simulate([HostGroup("engine", fitted.engine(), 1, 1)], charged)
    latency = fitted.first_token_latency_seconds  # outside the engine: every token leaves that much later
    return outcome.ttft + latency, outcome.finish + latency


def predict(fitted: FittedEngine, rate: float, requests: Requests) -> Point:
    """The simulator's view of one engine serving exactly these requests (arrival times, token counts)."""
    ttft, finish = predict_times(fitted, requests)
    return point(rate, requests.arrival, ttft, finish, requests.output)


def knee(points: Sequence[Point], slo_seconds: float) -> float | None:
    """The arrival rate at which TTFT p99 crosses the SLO, interpolated between the two measured rates
    around the crossing (log p99 against the rate: p99 grows about exponentially near a knee). None when
    no point crosses it; the lowest rate when the first already does."""
    ordered = sorted(points, key=lambda p: p.rate)
    for below, above in itertools.pairwise(ordered):
        if below.ttft_p99 <= slo_seconds < above.ttft_p99:
            low, high = math.log(below.ttft_p99), math.log(above.ttft_p99)
            share = (math.log(slo_seconds) - low) / (high - low)
            return below.rate + share * (above.rate - below.rate)
    if ordered and ordered[0].ttft_p99 > slo_seconds:
        return ordered[0].rate
    return None


@dataclass(frozen=True)
class Comparison:
    rate: float
    measured: Point
    predicted: Point

    def error(self, field: str) -> float:
        """Predicted over measured, minus one (+0.10: the simulator says 10% more)."""
        measured = getattr(self.measured, field)
        return getattr(self.predicted, field) / measured - 1 if measured else math.inf


def within(comparisons: Sequence[Comparison], below_rate: float, tolerance: float) -> bool:
    """Whether every figure at every rate below `below_rate` is within the tolerance."""
    return all(
        abs(c.error(field)) <= tolerance
        for c in comparisons
        if c.rate < below_rate
        for field in ("ttft_p50", "ttft_p99", "throughput")
    )
