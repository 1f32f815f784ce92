"""The simulator against a real engine: fit an engine model from a few single-request measurements, predict
TTFT and throughput at several arrival rates, and compare with what the engine measured at those rates.

`make bench-planner-fidelity` (bench/planner_fidelity.py) runs the real vLLM engine; everything here is
pure, so tests call it directly. The engine model is planner/simulate.py's: prefill at a token rate, then
decode steps whose time grows with the batch. A real engine also pays a fixed cost per request (its
scheduler, the first token's sampling and output); the fit counts that cost as extra prefill tokens, so
the simulator, which has no such term, still charges it."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.simulate import Engine, HostGroup, Requests, simulate


@dataclass(frozen=True)
class FittedEngine:
    """The engine model fitted to single-request measurements."""

    prefill_tokens_per_second: float
    overhead_seconds: float  # fixed cost per request before its first token, besides the prefill
    step_seconds_at_one: float  # decode step with one sequence
    step_seconds_per_sequence: float  # what each further sequence in the batch adds to a step
    max_num_seqs: int

    def step(self, batch: int) -> float:
        return self.step_seconds_at_one + self.step_seconds_per_sequence * (batch - 1)

    def engine(self) -> Engine:
        steps = tuple(self.step(batch) for batch in range(1, self.max_num_seqs + 1))
        return Engine(self.prefill_tokens_per_second, (0.0, *steps))

    def effective_prompts(self, prompt_tokens: np.ndarray) -> np.ndarray:
        """Prompt lengths with the per-request overhead added as the prefill tokens it would take."""
        extra = round(self.overhead_seconds * self.prefill_tokens_per_second)
        return prompt_tokens + extra


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
    prefill: Sequence[tuple[int, float]], steps: Sequence[tuple[int, float]], max_num_seqs: int
) -> FittedEngine:
    """prefill: (prompt tokens, seconds to the first token) of requests run alone; steps: (batch size,
    seconds per decode step) of batches started together. The median at each size, then straight lines: TTFT =
    overhead + tokens / rate, step = a + b x (batch - 1); a line that would need a negative overhead (or a
    step shrinking with the batch) is fitted again without that term, not clamped, so its slope stays a
    least-squares fit."""
    prefill = _medians(prefill)
    steps = _medians(steps)
    overhead, per_token = _line(prefill)
    if overhead < 0:
        overhead, per_token = 0.0, _through_origin(prefill)
    if per_token <= 0:
        raise ValueError("time to first token does not grow with the prompt: prompts too short to fit")
    shifted = [(batch - 1, seconds) for batch, seconds in steps]
    at_one, per_sequence = _line(shifted)
    if per_sequence < 0:
        at_one, per_sequence = statistics.median(seconds for _, seconds in steps), 0.0
    return FittedEngine(
        prefill_tokens_per_second=1 / per_token,
        overhead_seconds=overhead,
        step_seconds_at_one=max(at_one, 1e-6),
        step_seconds_per_sequence=per_sequence,
        max_num_seqs=max_num_seqs,
    )


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
    span = float(np.max(finish) - np.min(arrival)) if len(arrival) else 0.0
    return Point(
        rate=rate,
        ttft_p50=float(np.percentile(ttft, 50)),
        ttft_p99=float(np.percentile(ttft, 99)),
        throughput=float(np.sum(output)) / span if span > 0 else 0.0,
    )


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


def predict(fitted: FittedEngine, rate: float, requests: Requests) -> Point:
    """The simulator's view of one engine serving exactly these requests (arrival times, token counts)."""
    charged = Requests(requests.arrival, fitted.effective_prompts(requests.prompt), requests.output)
    outcome = simulate([HostGroup("engine", fitted.engine(), 1, 1)], charged)
    return point(rate, requests.arrival, outcome.ttft, outcome.finish, requests.output)


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
