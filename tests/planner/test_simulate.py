"""The simulation of a region: token draws, batching, balancing, and the invariants any run keeps."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.profiles import load_profiles
from planner.simulate import (
    Z99,
    Balancer,
    Batching,
    Engine,
    HostGroup,
    LogNormal,
    Requests,
    Scheduler,
    draw_requests,
    simulate,
)

PROFILES = load_profiles()
INF2 = PROFILES[("inf2.48xlarge", 8)]
TRN1 = PROFILES[("trn1.32xlarge", 8)]
PROMPT = LogNormal.fit(900, 3000)
OUTPUT = LogNormal.fit(250, 900)


def one_engine(max_num_seqs: int = 32) -> list[HostGroup]:
    return [HostGroup("trn1.32xlarge", TRN1.engine(max_num_seqs), 1, 1)]


def mixed(inf2_hosts: int, trn1_hosts: int, max_num_seqs: int = 32) -> list[HostGroup]:
    return [
        HostGroup("inf2.48xlarge", INF2.engine(max_num_seqs), INF2.engine_replicas, inf2_hosts),
        HostGroup("trn1.32xlarge", TRN1.engine(max_num_seqs), TRN1.engine_replicas, trn1_hosts),
    ]


@given(mean=st.floats(1, 5000), ratio=st.floats(1, LogNormal.MAX_P99_OVER_MEAN))
def test_lognormal_fit_has_the_forecasts_mean_and_p99(mean: float, ratio: float) -> None:
    fit = LogNormal.fit(mean, mean * ratio)
    assert math.exp(fit.mu + fit.sigma**2 / 2) == pytest.approx(mean, rel=1e-9)
    assert math.exp(fit.mu + Z99 * fit.sigma) == pytest.approx(mean * ratio, rel=1e-9)


def test_drawn_tokens_follow_the_fit() -> None:
    tokens = PROMPT.draw(np.random.default_rng(1), 400_000, cap=1 << 20)
    assert tokens.mean() == pytest.approx(900, rel=0.02)
    assert np.percentile(tokens, 99) == pytest.approx(3000, rel=0.03)


def test_a_tail_no_lognormal_has_is_refused() -> None:
    with pytest.raises(ValueError, match="no lognormal fits"):
        LogNormal.fit(10, 200)


def test_arrivals_come_at_the_rate_and_a_lower_rate_stretches_the_same_process() -> None:
    fast = draw_requests(200, 600, PROMPT, OUTPUT, seed=3)
    slow = draw_requests(100, 600, PROMPT, OUTPUT, seed=3)
    assert len(fast) == pytest.approx(120_000, rel=0.02)
    assert np.all(np.diff(fast.arrival) >= 0)
    # Common random numbers: request i has the same tokens at both rates and arrives twice as late.
    assert np.array_equal(slow.prompt, fast.prompt[: len(slow)])
    assert np.allclose(slow.arrival, fast.arrival[: len(slow)] * 2)


def requests(*rows: tuple[float, int, int]) -> Requests:
    arrival, prompt, output = zip(*rows, strict=True)
    return Requests(np.array(arrival), np.array(prompt), np.array(output))


def test_a_new_request_joins_the_running_batch_at_the_next_decode_step() -> None:
    engine = Engine(1000.0, (0.0, 0.010, 0.012))  # 1 ms per prompt token, 10 ms steps alone
    first_prefill = 0.100
    outcome = simulate(
        [HostGroup("x", engine, 1, 1)],
        requests((0.0, 100, 50), (0.2055, 20, 5)),
        batching=Batching.CONTINUOUS,
    )
    boundary = first_prefill + math.ceil((0.2055 - first_prefill) / 0.010) * 0.010  # 0.21 s
    assert outcome.ttft[0] == pytest.approx(first_prefill)
    assert outcome.ttft[1] == pytest.approx(boundary + 0.020 - 0.2055)


def test_a_mixed_step_runs_the_decodes_and_a_prompt_chunk_in_one_pass() -> None:
    """vLLM's V1 scheduler (chunked prefill): a pass holds the running decodes, then waiting prompt tokens
    up to the budget; it costs the decode step, the prefill tokens and the decodes' contexts; a prompt's
    first token comes with the pass that ran its last chunk. Worked by hand, 1 ms a prompt token, a
    100-token budget, 0.1 ms per token of context:
      0      A alone: a prefill-only pass, 2 ms + 50 ms                     -> A's first token at 0.052
      0.052  A decodes (context 51) + B's first 99 tokens: 10 + 99 + 5.1 ms -> 0.1661
      0.1661 A decodes (context 52) + B's last 51 tokens: 10 + 51 + 5.2 ms  -> A ends, B's first at 0.2323
      0.2323 B decodes (context 151): 10 + 15.1 ms                          -> B ends at 0.2574"""
    engine = Engine(
        1000.0,
        (0.002, 0.010, 0.012),
        scheduler=Scheduler.MIXED,
        max_num_batched_tokens=100,
        decode_seconds_per_context_token=0.0001,
    )
    outcome = simulate([HostGroup("x", engine, 1, 1)], requests((0.0, 50, 3), (0.020, 150, 2)))
    assert outcome.ttft.tolist() == pytest.approx([0.052, 0.2323 - 0.020])
    assert outcome.finish.tolist() == pytest.approx([0.2323, 0.2574])


@pytest.mark.parametrize(
    ("share", "pass_seconds"), [(1.0, 0.052 + 0.008), (0.5, 0.052 + 0.004), (0.0, 0.052)]
)
def test_a_mixed_pass_pays_its_share_of_the_decodes_step(share: float, pass_seconds: float) -> None:
    # A decodes alone until B arrives; A's third token and B's prefill then share a pass: the prefill
    # (2 ms fixed + 50 ms) and the share of A's step past the fixed cost (10 - 2 ms).
    engine = Engine(
        1000.0,
        (0.002, 0.010, 0.010),
        scheduler=Scheduler.MIXED,
        max_num_batched_tokens=512,
        mixed_decode_share=share,
    )
    outcome = simulate([HostGroup("x", engine, 1, 1)], requests((0.0, 50, 3), (0.060, 50, 1)))
    assert outcome.finish[0] == pytest.approx(0.062 + pass_seconds)
    assert outcome.ttft[1] == pytest.approx(0.062 + pass_seconds - 0.060)


def test_a_mixed_engine_admits_no_prompt_past_max_num_seqs() -> None:
    # One slot: B waits for A's last token, then its prefill-only pass (5 ms + 100 ms) starts.
    engine = Engine(1000.0, (0.005, 0.010), scheduler=Scheduler.MIXED, max_num_batched_tokens=4096)
    outcome = simulate([HostGroup("x", engine, 1, 1)], requests((0.0, 100, 3), (0.001, 100, 1)))
    a_ends = 0.105 + 2 * 0.010
    assert outcome.finish[0] == pytest.approx(a_ends)
    assert outcome.ttft[1] == pytest.approx(a_ends + 0.105 - 0.001)


def test_the_scheduler_modes_refuse_what_they_do_not_model() -> None:
    with pytest.raises(ValueError, match="unpadded"):
        Engine(1000.0, (0.0, 0.01), (512,), scheduler=Scheduler.MIXED, max_num_batched_tokens=512)
    with pytest.raises(ValueError, match="token budget"):
        Engine(1000.0, (0.0, 0.01), scheduler=Scheduler.MIXED)
    with pytest.raises(ValueError, match="decode buckets"):
        Engine(1000.0, (0.0, 0.01), decode_seconds_per_context_token=1e-6)
    separate = Engine(1000.0, (0.0, 0.01))
    mixed_engine = Engine(1000.0, (0.0, 0.01), scheduler=Scheduler.MIXED, max_num_batched_tokens=512)
    with pytest.raises(ValueError, match="one scheduler"):
        simulate([HostGroup("a", separate, 1, 1), HostGroup("b", mixed_engine, 1, 1)], requests((0.0, 10, 2)))
    with pytest.raises(ValueError, match="queue-wait budget"):
        simulate([HostGroup("b", mixed_engine, 1, 1)], requests((0.0, 10, 2)), queue_wait_s=0.8)


def test_a_replica_holding_its_slots_and_a_full_queue_refuses_the_next_request_at_once() -> None:
    """The container's admission bound: one slot (max_num_seqs 1), one request let wait; a third arriving
    while both are held is shed (no first token), and a fourth after the first finished is served."""
    engine = Engine(1000.0, (0.0, 0.010))  # max_num_seqs 1
    load = requests((0.0, 100, 50), (0.01, 100, 50), (0.02, 100, 50), (2.0, 100, 5))
    outcome = simulate([HostGroup("x", engine, 1, 1)], load, max_queued=1)
    assert outcome.shed.tolist() == [False, False, True, False]
    assert math.isnan(outcome.ttft[2]) and outcome.ttft[3] == pytest.approx(0.100)
    # Without the bound every request waits its turn.
    unbounded = simulate([HostGroup("x", engine, 1, 1)], load)
    assert unbounded.shed is None and unbounded.admitted.all() and unbounded.ttft[2] > 0.5


def test_a_queued_request_that_cannot_start_within_the_queue_wait_budget_is_shed() -> None:
    """One slot (prefill 100 tokens: 0.1 s, 10 ms steps): the first request holds it until 0.59 s. The
    second queues at 0.01 and would get its first token at 0.69 s, 0.68 s after it came: past a 0.5 s budget
    it is shed, within a 0.7 s one it is served. The third finds the queue's place taken at 0.02 (bound 1)
    unless the budget already freed it; the fourth, at 0.55, finds the queue's head past its deadline,
    which frees the place for it."""
    engine = Engine(1000.0, (0.0, 0.010))  # max_num_seqs 1
    load = requests((0.0, 100, 50), (0.01, 100, 50), (0.02, 100, 5), (0.55, 100, 5))
    group = [HostGroup("x", engine, 1, 1)]
    within = simulate(group, load, max_queued=1, queue_wait_s=0.7)
    assert within.shed.tolist() == [False, False, True, True]
    assert within.ttft[1] == pytest.approx(0.69 - 0.01)
    tight = simulate(group, load, max_queued=1, queue_wait_s=0.5)
    # At 0.55 the second (came 0.01) can start no sooner than 0.55 + 0.1 - 0.01 = 0.64 s after it came:
    # shed there, and the fourth takes its place; it starts at 0.59, its first token at 0.69 (0.14 s).
    assert tight.shed.tolist() == [False, True, True, False]
    assert math.isnan(tight.ttft[1]) and tight.ttft[3] == pytest.approx(0.69 - 0.55)
    # Every request served got its first token within the budget.
    assert (tight.ttft[tight.admitted] <= 0.5).all()
    # The budget alone (no queue bound) sheds too, and without either nothing is shed.
    assert simulate(group, load, queue_wait_s=0.5).shed[1]
    assert simulate(group, load).shed is None


def test_a_static_batch_makes_a_newcomer_wait_for_its_longest_sequence() -> None:
    engine = Engine(1000.0, (0.0, 0.010, 0.012))
    outcome = simulate(
        [HostGroup("x", engine, 1, 1)], requests((0.0, 100, 50), (0.2055, 20, 5)), batching=Batching.STATIC
    )
    batch_end = 0.100 + 49 * 0.010
    assert outcome.ttft[1] == pytest.approx(batch_end + 0.020 - 0.2055)


def test_static_batching_ttft_grows_with_batch_size_while_continuous_stays_flat() -> None:
    """Each batch size is offered half the traffic a full continuous batch of that size finishes: the
    load a bigger batch is meant to carry."""
    medians: dict[Batching, list[float]] = {batching: [] for batching in Batching}
    for batch_size in (2, 8, 32):
        engine = TRN1.engine(batch_size)
        load = draw_requests(0.5 * engine.requests_per_second(900, 250), 900, PROMPT, OUTPUT, seed=3)
        for batching in Batching:
            outcome = simulate([HostGroup("trn1", engine, 1, 1)], load, batching=batching)
            medians[batching].append(float(np.median(outcome.ttft)))
    static, continuous = medians[Batching.STATIC], medians[Batching.CONTINUOUS]
    assert static == sorted(static) and static[-1] > 10 * static[0], static
    assert max(continuous) < 1.5 * min(continuous), continuous
    assert static[-1] > 50 * continuous[-1]


def highest_rate_within(slo_ms: float, groups: list[HostGroup], balancer: Balancer) -> float:
    low, high = 0.0, nominal_capacity(groups)  # no fleet keeps up past its full-batch throughput
    for _ in range(9):
        middle = (low + high) / 2
        load = draw_requests(middle, 300, PROMPT, OUTPUT, seed=5, max_output=1024)
        if simulate(groups, load, balancer).p99_ttft_ms() <= slo_ms:
            low = middle
        else:
            high = middle
    return low


def nominal_capacity(groups: list[HostGroup]) -> float:
    return sum(g.count * g.replicas * g.engine.requests_per_second(900, 250) for g in groups)


def test_least_outstanding_requests_serves_more_than_round_robin_on_a_mixed_fleet() -> None:
    groups = mixed(4, 2)
    lor = highest_rate_within(1000, groups, Balancer.LEAST_OUTSTANDING)
    round_robin = highest_rate_within(1000, groups, Balancer.ROUND_ROBIN)
    assert lor > 1.1 * round_robin, (lor, round_robin)


def test_round_robin_gives_every_host_the_same_count_and_lor_favours_the_faster_hosts() -> None:
    groups = mixed(2, 2)
    load = draw_requests(50, 600, PROMPT, OUTPUT, seed=2)
    even = np.bincount(simulate(groups, load, Balancer.ROUND_ROBIN).host, minlength=4)
    assert even.max() - even.min() <= 1
    lor = np.bincount(simulate(groups, load, Balancer.LEAST_OUTSTANDING).host, minlength=4)
    # The trn1 hosts hold 4 replicas to inf2's 3 (the same speed per chip): under load they take more.
    assert lor[2:].sum() > 1.1 * lor[:2].sum()


fleets = st.tuples(st.integers(0, 3), st.integers(0, 3)).filter(lambda counts: sum(counts) > 0)


@settings(max_examples=40, deadline=None)
@given(
    counts=fleets,
    rate=st.floats(1, 120),
    seed=st.integers(0, 10_000),
    balancer=st.sampled_from(Balancer),
    batching=st.sampled_from(Batching),
    max_num_seqs=st.integers(1, 16),
)
def test_every_request_is_served_once_after_its_own_prefill_within_the_slots(
    counts: tuple[int, int], rate: float, seed: int, balancer: Balancer, batching: Batching, max_num_seqs: int
) -> None:
    groups = mixed(*counts, max_num_seqs=max_num_seqs)
    load = draw_requests(rate, 30, LogNormal.fit(300, 1500), LogNormal.fit(60, 300), seed)
    outcome = simulate(groups, load, balancer, batching)
    fastest_prefill = max(g.engine.prefill_tokens_per_second for g in groups)
    assert len(outcome.ttft) == len(outcome.finish) == len(load)
    assert np.all(outcome.ttft >= load.prompt / fastest_prefill - 1e-9)
    assert np.all(outcome.finish >= load.arrival + outcome.ttft - 1e-9)
    host_slots = [g.replicas * max_num_seqs for g in groups for _ in range(g.count)]
    for host, slots in enumerate(host_slots):
        mine = outcome.host == host
        starts, ends = (load.arrival + outcome.ttft)[mine], outcome.finish[mine]
        # Sequences streaming at once: +1 at a first token, -1 at a last one (ends first on ties).
        moments = np.concatenate([starts, ends])
        steps = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
        order = np.lexsort((steps, moments))
        assert np.cumsum(steps[order]).max(initial=0) <= slots


@settings(max_examples=30, deadline=None)
@given(
    hosts=st.integers(1, 4),
    rate=st.floats(1, 100),
    seed=st.integers(0, 10_000),
    balancer=st.sampled_from(Balancer),
)
def test_one_more_host_never_makes_p99_materially_worse(
    hosts: int, rate: float, seed: int, balancer: Balancer
) -> None:
    """Pathwise, another host reshuffles which prompts share a prefill, so the p99 of one seed can move by
    a few percent either way at light load; what must never happen is a real loss."""
    load = draw_requests(rate, 60, LogNormal.fit(300, 1500), LogNormal.fit(60, 300), seed)
    engine = TRN1.engine(8)
    fewer = simulate([HostGroup("trn1", engine, 4, hosts)], load, balancer).p99_ttft_ms()
    more = simulate([HostGroup("trn1", engine, 4, hosts + 1)], load, balancer).p99_ttft_ms()
    assert more <= fewer * 1.1 + 5


def test_the_same_inputs_give_the_same_outcome() -> None:
    load = draw_requests(40, 120, PROMPT, OUTPUT, seed=9)
    first, second = simulate(mixed(2, 1), load), simulate(mixed(2, 1), load)
    assert np.array_equal(first.ttft, second.ttft) and np.array_equal(first.host, second.host)


def test_a_fleet_without_hosts_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one host"):
        simulate(mixed(0, 0), draw_requests(1, 10, PROMPT, OUTPUT, seed=1))


BUCKETS = (512, 1024, 2048, 4096, 8192)


def test_a_prompt_is_prefilled_at_the_length_of_its_bucket() -> None:
    engine = Engine(1000.0, (0.0, 0.010), BUCKETS)  # 1 ms per prefilled token
    outcome = simulate(
        [HostGroup("x", engine, 1, 1)], requests((0.0, 600, 1), (10.0, 1024, 1), (20.0, 9000, 1))
    )
    # 600 tokens run the 1,024 bucket; a bucket's own length is not padded; past the largest, as is.
    assert list(outcome.ttft) == pytest.approx([1.024, 1.024, 9.0])


def test_bucket_padding_makes_the_mean_prefill_about_145_percent_of_the_prompt() -> None:
    """The forecast's prompts (mean 900, p99 3,000) in the container's buckets: x1.45 the work."""
    padded = PROMPT.padded_mean(BUCKETS, 8191)
    drawn = Engine(1.0, (0.0, 1.0), BUCKETS).padded(PROMPT.draw(np.random.default_rng(3), 400_000, 8191))
    assert padded == pytest.approx(drawn.mean(), rel=0.01)
    assert padded / 900 == pytest.approx(1.45, abs=0.02)
    assert PROMPT.padded_mean((), 8191) == pytest.approx(900, rel=0.01)  # no buckets: the mean itself


def test_buckets_lower_a_replicas_throughput() -> None:
    plain = TRN1.engine(32)
    bucketed = TRN1.engine(32, prefill_buckets=BUCKETS)
    load = draw_requests(
        0.9 * plain.requests_per_second(900, 250), 600, PROMPT, OUTPUT, seed=4, max_prompt=8191
    )
    fast = simulate([HostGroup("trn1", plain, 1, 1)], load).p99_ttft_ms()
    slow = simulate([HostGroup("trn1", bucketed, 1, 1)], load).p99_ttft_ms()
    assert slow > 2 * fast


def test_a_decode_step_runs_at_the_bucket_of_the_batchs_longest_sequence() -> None:
    """Hand-worked: buckets 16 and 32; steps of 10 / 12 ms (batch 1 / 2) at 16 tokens, 20 / 24 ms at 32.
    A (10-token prompt, 4 tokens out) and B (14 in, 8 out) arrive at once; prefill at 1 ms per token gives
    first tokens at 10 and 24 ms. Decoding starts at 24 ms: B's context after a step is 15, then 16, so
    two steps run at bucket 16 (12 ms each, to 48 ms); then B needs bucket 32 and A, still short, runs
    there with it: A's last step takes 24 ms (ends at 72 ms). B then runs alone at 32: four more steps
    of 20 ms end at 152 ms. Without decode buckets A would end at 60 ms and B at 100 ms."""
    steps = (0.0, 0.010, 0.012)
    engine = Engine(
        1000.0, steps, decode_buckets=(16, 32), decode_step_by_bucket=(steps, (0.0, 0.020, 0.024))
    )
    load = requests((0.0, 10, 4), (0.0, 14, 8))
    outcome = simulate([HostGroup("x", engine, 1, 1)], load)
    assert list(outcome.ttft) == pytest.approx([0.010, 0.024])
    assert list(outcome.finish) == pytest.approx([0.072, 0.152])
    plain = simulate([HostGroup("x", Engine(1000.0, steps), 1, 1)], load)
    assert list(plain.finish) == pytest.approx([0.060, 0.100])
    # Static batching: A starts alone (B arrives as its batch begins): 3 steps of 10 ms at bucket 16,
    # done at 40 ms; B then prefills (to 54 ms) and steps at 15, 16 tokens (10 ms), then 5 at 32 (20 ms).
    static = simulate([HostGroup("x", engine, 1, 1)], load, batching=Batching.STATIC)
    assert list(static.finish) == pytest.approx([0.040, 0.054 + 2 * 0.010 + 5 * 0.020])


def test_a_newcomer_joining_mid_bucket_keeps_the_step_boundaries() -> None:
    """One request decodes alone at bucket 16 (10 ms steps); a second, longer one joins at the next step
    boundary, and from then on the pair steps at bucket 32 (its context 20 > 16): 24 ms a step."""
    steps = (0.0, 0.010, 0.012)
    engine = Engine(
        1000.0, steps, decode_buckets=(16, 32), decode_step_by_bucket=(steps, (0.0, 0.020, 0.024))
    )
    outcome = simulate([HostGroup("x", engine, 1, 1)], requests((0.0, 4, 10), (0.0155, 19, 3)))
    # A: first token at 4 ms, steps at 14, 24 ms; B joins at the 24 ms boundary, prefilled by 43 ms.
    assert outcome.ttft[1] == pytest.approx(0.024 + 0.019 - 0.0155)
    # Then A (7 of its 9 steps left) and B (2) run two 24 ms steps; A ends alone at bucket 16 (10 ms).
    assert outcome.finish[1] == pytest.approx(0.043 + 2 * 0.024)
    assert outcome.finish[0] == pytest.approx(0.043 + 2 * 0.024 + 5 * 0.010)


def test_an_engine_needs_a_step_table_per_decode_bucket() -> None:
    with pytest.raises(ValueError, match="one step table per decode bucket"):
        Engine(1000.0, (0.0, 0.01), decode_buckets=(16, 32), decode_step_by_bucket=((0.0, 0.01),))


def test_output_capped_at_the_engines_limit_has_the_clipped_mean() -> None:
    """A mean of 1,500 output tokens against a 1,024 cap: the tokens generated are the clipped mean."""
    fit = LogNormal.fit(1500, 4000)
    drawn = fit.draw(np.random.default_rng(2), 400_000, cap=1024)
    assert fit.capped_mean(1024) == pytest.approx(drawn.mean(), rel=0.005)
    assert fit.capped_mean(1024) < 0.75 * 1500
    assert fit.capped_mean(1e12) == pytest.approx(1500)


def test_drawing_requests_loads_no_compiler() -> None:
    """The fidelity bench's engine process draws its requests here; vLLM's CPU platform fails to start in a
    process that has loaded Numba's llvmlite (bench/planner_fidelity.py), so only simulating may load it."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from planner.simulate import LogNormal, draw_requests\n"
        "import planner.fidelity\n"
        "draw_requests(2.0, 5.0, LogNormal.fit(256, 768), LogNormal.fit(48, 160), seed=1)\n"
        "loaded = sorted(name for name in ('numba', 'llvmlite') if name in sys.modules)\n"
        "sys.exit(f'loaded {loaded}' if loaded else 0)\n"
    )
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=repo
    )
    assert done.returncode == 0, done.stderr or done.stdout
