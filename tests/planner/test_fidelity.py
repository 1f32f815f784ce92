"""The fidelity bench's pure parts: fitting an engine from single-request measurements, the knee between
measured rates, and the comparison (bench/planner_fidelity.py runs the real engine around them)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.fidelity import Comparison, Point, best_of, fit_engine, knee, point, pooled, predict, within
from planner.simulate import Requests, Scheduler


def test_the_fit_recovers_a_known_engine_from_its_measurements() -> None:
    # TTFT = 20 ms + tokens / 10,000; step = 8 ms + 0.5 ms per further sequence.
    prefill = [(n, 0.020 + n / 10_000) for n in (16, 256, 512, 1024) for _ in range(3)]
    steps = [(b, 0.008 + 0.0005 * (b - 1)) for b in (1, 4, 8, 16)]
    fitted = fit_engine(prefill, steps, max_num_seqs=16)
    assert fitted.prefill_tokens_per_second == pytest.approx(10_000)
    assert fitted.overhead_seconds == pytest.approx(0.020)
    assert fitted.step(1) == pytest.approx(0.008) and fitted.step(16) == pytest.approx(0.0155)
    engine = fitted.engine()
    assert engine.max_num_seqs == 16 and engine.decode_step_seconds[16] == pytest.approx(0.0155)
    # The overhead is charged as the prefill tokens it would take: 20 ms at 10,000 tokens/s = 200.
    assert fitted.effective_prompts(np.array([100]))[0] == 300


def test_the_fit_with_long_context_steps_separates_the_context_from_the_batch() -> None:
    # step = 4 ms + 0.05 ms per further sequence + 1 us per token of context across the batch.
    def step(batch: int, context: int) -> float:
        return 0.004 + 0.00005 * (batch - 1) + 1e-6 * batch * context

    prefill = [(n, 0.004 + n / 10_000) for n in (16, 256, 512, 1024)]
    steps = [(b, step(b, 40)) for b in (1, 4, 8, 16)]
    long = [(b, c, step(b, c)) for b, c in ((4, 536), (8, 536), (16, 280))]
    fitted = fit_engine(
        prefill,
        steps,
        16,
        context_steps=long,
        step_context=40,
        scheduler=Scheduler.MIXED,
        max_num_batched_tokens=4096,
    )
    assert fitted.step_seconds_at_one == pytest.approx(0.004)
    assert fitted.step_seconds_per_sequence == pytest.approx(0.00005)
    assert fitted.step_seconds_per_context_token == pytest.approx(1e-6)
    # Mixed: the engine's pass without decodes costs the overhead, paid once a pass, not per prompt.
    engine = fitted.engine()
    assert engine.scheduler is Scheduler.MIXED and engine.max_num_batched_tokens == 4096
    assert engine.decode_step_seconds[0] == pytest.approx(0.004)
    assert engine.decode_seconds_per_context_token == pytest.approx(1e-6)
    assert fitted.effective_prompts(np.array([100]))[0] == 100
    assert fitted.mixed_step(4, 1000, 500) == pytest.approx(step(4, 250) + 0.050)


def fit_mixed_engine(prefill_per_token: float, share: float, stalled: bool = False):
    """A hand-made vLLM-CPU engine measured as the bench measures it: prompts alone take 4 ms + tokens x
    `prefill_per_token` to their first token; a step is 4 ms + 0.05 ms per further sequence + 1 us per
    context token; a pass that prefills a prompt among decodes costs 4 ms + tokens / 10,000 + `share` of the
    decodes' step past its fixed cost (`stalled`: and one pass the machine stalled)."""

    def step(batch: int, context: int) -> float:
        return 0.004 + 0.00005 * (batch - 1) + 1e-6 * batch * context

    def pass_seconds(streams: int, context: int, prompt: int) -> float:
        decodes = 0.00005 * (streams - 1) + 1e-6 * context  # context: the tokens the streams hold together
        return 0.004 + prompt / 10_000 + share * decodes

    sizes = [(4, 84, 256), (12, 252, 1024), (12, 3_132, 256), (12, 3_132, 1024)]
    mixed = [(k, c, p, pass_seconds(k, c, p)) for k, c, p in sizes for _ in range(3)]
    if stalled:
        mixed.append((12, 3_140, 256, 5.0))
    return fit_engine(
        [(n, 0.004 + n * prefill_per_token) for n in (16, 256, 512, 1024)],
        [(b, step(b, 40)) for b in (1, 4, 8, 16)],
        16,
        context_steps=[(b, c, step(b, c)) for b, c in ((4, 536), (8, 536), (16, 280))],
        step_context=40,
        scheduler=Scheduler.MIXED,
        max_num_batched_tokens=4096,
        mixed=mixed,
    )


@pytest.mark.parametrize(("share", "fitted_share"), [(0.5, 0.5), (0.0, 0.0), (1.6, 1.0)])
def test_mixed_passes_give_the_share_of_the_decodes_step_a_prefilling_pass_pays(
    share: float, fitted_share: float
) -> None:
    """The median ignores the stalled pass. A share is bounded to 0-1: past 1 the decodes would cost more
    beside a prefill than alone."""
    fitted = fit_mixed_engine(1 / 10_000, share, stalled=True)
    assert fitted.mixed_decode_share == pytest.approx(fitted_share, abs=1e-6)
    assert fitted.engine().mixed_decode_share == pytest.approx(fitted_share, abs=1e-6)


def test_a_mixed_prediction_for_one_request_alone_is_its_overhead_plus_prefill_then_its_steps() -> None:
    fitted = fit_engine(
        [(0, 0.020), (1000, 0.120)],
        [(1, 0.010), (2, 0.010)],
        4,
        scheduler=Scheduler.MIXED,
        max_num_batched_tokens=2048,
    )
    predicted = predict(fitted, 0.001, Requests(np.array([0.0]), np.array([500]), np.array([11])))
    assert predicted.ttft_p50 == pytest.approx(0.020 + 0.050, rel=1e-3)
    assert predicted.throughput == pytest.approx(11 / 0.17, rel=1e-3)


def test_the_fit_takes_the_median_at_each_size_so_one_stalled_run_does_not_move_it() -> None:
    prefill = [(n, 0.020 + n / 10_000) for n in (16, 256, 512, 1024) for _ in range(3)]
    prefill.append((1024, 19.0))  # the machine stalled the engine for one request
    fitted = fit_engine(prefill, [(1, 0.008), (1, 0.008), (1, 5.0), (16, 0.0155)], max_num_seqs=16)
    assert fitted.prefill_tokens_per_second == pytest.approx(10_000, rel=0.02)
    assert fitted.step(1) == pytest.approx(0.008)


def test_a_negative_overhead_is_refitted_through_the_origin_not_clamped() -> None:
    # Noise can pull the intercept below zero: the line is then fitted again with no overhead.
    prefill = [(100, 0.009), (200, 0.020), (400, 0.041)]
    fitted = fit_engine(prefill, [(1, 0.01), (8, 0.02)], 16)
    assert fitted.overhead_seconds == 0.0
    slope = (100 * 0.009 + 200 * 0.020 + 400 * 0.041) / (100**2 + 200**2 + 400**2)
    assert fitted.prefill_tokens_per_second == pytest.approx(1 / slope)


def test_the_fit_refuses_measurements_it_cannot_draw_a_line_through() -> None:
    with pytest.raises(ValueError, match="two or more distinct"):
        fit_engine([(256, 0.05), (256, 0.06)], [(1, 0.01), (8, 0.02)], 16)
    with pytest.raises(ValueError, match="does not grow with the prompt"):
        fit_engine([(16, 0.05), (1024, 0.04)], [(1, 0.01), (8, 0.02)], 16)


def test_a_prediction_for_one_request_alone_is_its_overhead_plus_prefill() -> None:
    fitted = fit_engine([(0, 0.020), (1000, 0.120)], [(1, 0.010), (2, 0.010)], 4)
    requests = Requests(np.array([0.0]), np.array([500]), np.array([11]))
    predicted = predict(fitted, 0.001, requests)
    assert predicted.ttft_p50 == pytest.approx(0.020 + 0.050, rel=1e-3)
    # Ten decode steps after the first token, 11 tokens over 0.07 + 0.10 s.
    assert predicted.throughput == pytest.approx(11 / 0.17, rel=1e-3)


def test_point_takes_percentiles_and_tokens_over_the_span() -> None:
    measured = point(
        2.0, np.array([0.0, 1.0]), np.array([0.1, 0.3]), np.array([2.0, 4.0]), np.array([10, 30])
    )
    assert measured.ttft_p50 == pytest.approx(0.2)
    assert measured.throughput == pytest.approx(40 / 4.0)


def _p(rate: float, p99: float) -> Point:
    return Point(rate, p99 / 2, p99, 100.0)


def test_the_knee_is_interpolated_in_log_p99_between_the_rates_around_the_crossing() -> None:
    points = [_p(1, 0.1), _p(2, 0.2), _p(3, 0.8), _p(4, 5.0)]
    # 0.4 s lies halfway between 0.2 and 0.8 in log terms.
    assert knee(points, 0.4) == pytest.approx(2.5)
    assert knee(points, 10.0) is None
    assert knee(points, 0.05) == 1


def test_within_judges_only_the_rates_below_the_knee() -> None:
    close = Comparison(1.0, Point(1.0, 0.1, 0.2, 100), Point(1.0, 0.11, 0.22, 95))
    far_past_knee = Comparison(3.0, Point(3.0, 1.0, 4.0, 100), Point(3.0, 3.0, 9.0, 100))
    assert close.error("ttft_p50") == pytest.approx(0.10)
    assert close.error("throughput") == pytest.approx(-0.05)
    assert within([close, far_past_knee], below_rate=2.0, tolerance=0.15)
    assert not within([close, far_past_knee], below_rate=4.0, tolerance=0.15)
    assert not within([close], below_rate=2.0, tolerance=0.05)
    assert math.isinf(Comparison(1.0, Point(1.0, 0.0, 0.2, 100), close.predicted).error("ttft_p50"))


def test_the_best_of_two_passes_takes_each_figure_from_the_pass_less_slowed() -> None:
    stalled = Point(5.0, 0.240, 17.6, 150.0)  # the machine took the CPU away during this pass
    clean = Point(5.0, 0.200, 0.70, 270.0)
    assert best_of([stalled, clean]) == Point(5.0, 0.200, 0.70, 270.0)
    assert best_of([Point(5.0, 0.1, 0.9, 260.0), clean]) == Point(5.0, 0.1, 0.70, 270.0)
    with pytest.raises(ValueError, match="one rate"):
        best_of([clean, Point(6.0, 0.2, 0.7, 270.0)])


def test_a_busy_engines_prefill_rate_comes_from_the_mixed_passes_and_the_rest_of_an_alone_prompt_is_latency():
    """Prompts run alone take 4 ms + tokens / 8,000 to their first token, but in passes among decodes the
    engine spends tokens / 10,000 on them (4 ms + that + half the decodes' step): the CPU bench measured a
    256-token prompt alone at 28.8 ms, its pass among 4 decodes at 20.0 ms. The rate is the passes' and
    share 0.5; what the alone prompts took beyond their passes (the median of 0.4, 6.4, 12.8 and 25.6 ms)
    is latency outside the engine, added to each first token and never to the engine's time."""
    fitted = fit_mixed_engine(1 / 8_000, 0.5)
    assert fitted.prefill_tokens_per_second == pytest.approx(10_000, rel=1e-6)
    assert fitted.mixed_decode_share == pytest.approx(0.5, abs=1e-6)
    assert fitted.first_token_latency_seconds == pytest.approx(0.0096, rel=1e-6)
    alone = predict(fitted, 0.001, Requests(np.array([0.0]), np.array([500]), np.array([1])))
    assert alone.ttft_p50 == pytest.approx(0.004 + 500 / 10_000 + 0.0096, rel=1e-6)


def test_passes_over_different_draws_are_pooled_into_one_sample() -> None:
    """Two passes of 100 requests: the p99 of the pool rests on the two slowest of 200, the throughput on
    both passes' tokens over both spans. One pass's p99 (or the better of two) rests on one draw's tail."""
    arrival = np.arange(100) * 0.1
    calm = np.full(100, 0.020)
    clustered = np.full(100, 0.020)
    clustered[[40, 41, 42]] = [0.300, 0.250, 0.200]  # one cluster of arrivals, three slow first tokens
    output = np.full(100, 10)
    finish_calm, finish_clustered = arrival + 0.5, arrival + 1.0
    pool = pooled(5.0, [(arrival, calm, finish_calm, output), (arrival, clustered, finish_clustered, output)])
    union = np.concatenate([calm, clustered])
    assert pool.ttft_p99 == pytest.approx(float(np.percentile(union, 99)))
    assert pool.ttft_p50 == pytest.approx(0.020)
    spans = (finish_calm[-1] - arrival[0]) + (finish_clustered[-1] - arrival[0])
    assert pool.throughput == pytest.approx(2_000 / spans)
    alone = point(5.0, arrival, clustered, finish_clustered, output)
    assert (
        alone.ttft_p99
        > pool.ttft_p99
        > best_of([point(5.0, arrival, calm, finish_calm, output), alone]).ttft_p99
    )
    with pytest.raises(ValueError, match="at least one pass"):
        pooled(5.0, [])
