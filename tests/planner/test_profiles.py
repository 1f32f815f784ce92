"""Performance profiles: the shipped estimates, the format `make bench-serving` writes, interpolation."""

from __future__ import annotations

import pytest
import yaml

from planner.profiles import SHIPPED, Citation, Profile, fit_published, load_profiles, profile_for
from settings.instances import INSTANCES
from settings.loader import ConfigError

MEASURED = """\
instance_type: trn1.32xlarge
source: "make bench-serving 2027-06-01 ip-10-0-1-23"
tensor_parallel: 8
max_num_seqs: 16
prefill_tokens_per_second: 12000.0
decode_step_ms: {"1": 6.0, "16": 9.0}
"""


def test_shipped_profiles_are_per_chip_and_say_so() -> None:
    """Inferentia2 and Trainium chips have the same NeuronCore-v2 compute and memory: a replica on 4 chips
    of either runs at one speed; the hosts differ by how many replicas they hold."""
    profiles = load_profiles()
    inf2, trn1 = profiles[("inf2.48xlarge", 8)], profiles[("trn1.32xlarge", 8)]
    assert all(profile.source for profile in profiles.values())
    assert inf2.prefill_tokens_per_second == trn1.prefill_tokens_per_second
    assert inf2.decode_step_ms == trn1.decode_step_ms
    assert (inf2.engine_replicas, trn1.engine_replicas) == (3, 4)
    for path in SHIPPED.glob("*.yaml"):
        text = path.read_text()
        assert "Per chip" in text and "NeuronCore-v2" in text, path.name
        assert "make bench-serving PROFILE_OUT=" in text, path.name


def test_every_shipped_profile_cites_where_its_speed_comes_from() -> None:
    """Published: the document, its URL, SDK version, instance, TP, batch sizes, sequence lengths and the
    figures taken. Estimate: why nothing published fits, how the figures were obtained."""
    profiles = load_profiles()
    for profile in profiles.values():
        cited = profile.citation
        assert cited is not None, profile.instance_type
        assert cited.url.startswith("https://") and cited.derivation
        if cited.kind == "published":
            assert cited.instance_type == profile.instance_type
            assert cited.tensor_parallel == profile.tensor_parallel
            assert cited.sdk_version and cited.batch_sizes and cited.input_tokens and cited.output_tokens
            assert profile.speed_source.startswith("published:") and cited.url in profile.speed_source
        else:
            # One sentence in the report's line, however `why` ends.
            assert profile.speed_source == f"estimate: {cited.why.rstrip('.')}"
    assert profiles[("inf2.48xlarge", 8)].citation.kind == "published"
    assert profiles[("trn1.32xlarge", 8)].citation.kind == "estimate"


@pytest.mark.parametrize("path", sorted(SHIPPED.glob("*.yaml")), ids=lambda path: path.name)
def test_a_shipped_profile_is_the_fit_of_the_figures_it_cites(path) -> None:
    """The engine figures re-derived from the cited published figures (an estimate: from the published
    profile it is based on) agree with the file within 2%: a profile cannot drift from its source."""
    profile = load_profiles(directory=SHIPPED)[_key(path)]
    cited = profile.citation
    if cited.kind == "estimate":
        base = yaml.safe_load((SHIPPED / cited.based_on).read_text())
        cited = Citation.model_validate(base["citation"])
        assert cited.kind == "published"
        assert profile.decode_context_tokens == base["decode_context_tokens"]
    prefill, decode = fit_published(cited)
    assert profile.prefill_tokens_per_second == pytest.approx(prefill, rel=0.02)
    assert sorted(profile.decode_step_ms) == sorted(decode)
    for batch, step in decode.items():
        assert profile.decode_step_ms[batch] == pytest.approx(step, rel=0.02), batch
    # The published run decoded with no buckets: every step attended over the whole compiled sequence.
    assert profile.decode_context_tokens == cited.sequence_length


def test_the_cited_figures_agree_with_the_throughput_published_beside_them() -> None:
    """The benchmark's third chart, generated tokens per second end to end, is batch x 256 tokens over the
    TTFT plus 256 inter-token latencies: the two figures the fit takes reproduce it within 3% (rounding of
    the chart labels), so they were read from the same run and the same column."""
    for profile in load_profiles().values():
        cited = profile.citation
        if cited.kind != "published" or cited.figures.generated_tokens_per_second is None:
            continue
        figures, tokens = cited.figures, cited.output_tokens
        for batch, published in figures.generated_tokens_per_second.items():
            seconds = (
                figures.time_to_first_token_s[batch] + tokens * figures.inter_token_latency_ms[batch] / 1000
            )
            assert batch * tokens / seconds == pytest.approx(published, rel=0.03), batch


def test_the_fit_of_the_inf2_figures_by_hand() -> None:
    """optimum-neuron's Llama-3.1-8B on inf2.48xlarge, TP 8, SDK 2.24: TTFT 0.3, 1.2, 2.3, 4.7 and 9.3 s at
    batch 1, 4, 8, 16 and 32 is 396.3 / 1,361 = 0.2912 s per 4,096-token padded prompt: 14,067 tokens/s."""
    cited = load_profiles()[("inf2.48xlarge", 8)].citation
    prefill, decode = fit_published(cited)
    assert prefill == pytest.approx(4096 / (396.3 / 1361))
    assert round(prefill) == 14067
    assert decode == {1: 11.0, 4: 12.0, 8: 16.0, 16: 21.0, 32: 33.0}


def _key(path) -> tuple[str, int]:
    document = yaml.safe_load(path.read_text())
    return document["instance_type"], document["tensor_parallel"]


PUBLISHED = {
    "kind": "published",
    "title": "A benchmark",
    "url": "https://example.org/benchmark",
    "derivation": "as fit_published",
    "publisher": "someone",
    "date": "2025-07-10",
    "software": "an engine",
    "sdk_version": "2.24.0",
    "instance_type": "inf2.48xlarge",
    "tensor_parallel": 8,
    "batch_sizes": [1, 32],
    "sequence_length": 4096,
    "input_tokens": 1024,
    "output_tokens": 256,
    "prefill_padded_tokens": 4096,
    "figures": {
        "time_to_first_token_s": {1: 0.3, 32: 9.3},
        "inter_token_latency_ms": {1: 11, 32: 33},
    },
}


def test_a_citation_is_checked_field_by_field() -> None:
    Citation.model_validate(PUBLISHED)
    with pytest.raises(ValueError, match="needs sdk_version"):
        Citation.model_validate({**PUBLISHED, "sdk_version": None})
    with pytest.raises(ValueError, match="must give each of batch_sizes"):
        Citation.model_validate({**PUBLISHED, "batch_sizes": [1, 8, 32]})
    with pytest.raises(ValueError, match="says why"):
        Citation.model_validate({**PUBLISHED, "kind": "estimate"})
    with pytest.raises(ValueError, match="https"):
        Citation.model_validate({**PUBLISHED, "url": "a file somewhere"})


def test_a_published_citation_must_be_for_the_profiles_own_type_and_tp() -> None:
    document = yaml.safe_load(MEASURED)
    Profile.model_validate({**document, "instance_type": "inf2.48xlarge", "citation": PUBLISHED})
    with pytest.raises(ValueError, match="cite it as an estimate"):
        Profile.model_validate({**document, "citation": PUBLISHED})  # trn1, figures of inf2


def test_shipped_profiles_carry_a_throughput_range() -> None:
    for profile in load_profiles().values():
        assert profile.throughput_range.low < 1 < profile.throughput_range.high
        slow = profile.engine(32, speed=profile.throughput_range.low)
        assert slow.prefill_tokens_per_second == pytest.approx(
            profile.prefill_tokens_per_second * profile.throughput_range.low
        )


@pytest.mark.parametrize("instance_type", list(INSTANCES))
def test_every_catalog_type_gets_a_profile_at_every_tp_that_holds_the_model(instance_type: str) -> None:
    profiles = load_profiles()
    facts = INSTANCES[instance_type]
    usable = []
    for tp in facts.tensor_parallel_degrees():
        profile = profile_for(profiles, instance_type, tp)
        assert profile.instance_type == instance_type and profile.tensor_parallel == tp
        assert profile.derived == ((instance_type, tp) not in profiles)
        if profile.derived:
            assert "derived per chip" in profile.source and "PROFILE_OUT=" in profile.source
            assert profile.throughput_range.low < profiles[("trn1.32xlarge", 8)].throughput_range.low
        if profile.kv_cache_sequences(8192) >= 1:
            usable.append(tp)
    assert usable, instance_type


def test_a_derived_profile_scales_with_the_chips_of_a_replica() -> None:
    profiles = load_profiles()
    base = profiles[("inf2.48xlarge", 8)]  # 4 chips
    two_chips = profile_for(profiles, "inf2.24xlarge", 4)
    assert two_chips.prefill_tokens_per_second == pytest.approx(base.prefill_tokens_per_second / 2)
    assert two_chips.step_ms(32) == pytest.approx(base.step_ms(32) * 2)


def test_the_kv_cache_caps_the_batch_when_it_holds_fewer_sequences_than_max_num_seqs() -> None:
    profiles = load_profiles()
    one_chip = profile_for(profiles, "inf2.8xlarge", 2)  # 32 GiB: 15 GiB of weights, the rest for KV
    held = one_chip.kv_cache_sequences(8192)  # 1 GiB per 8,192-token sequence at 128 KiB per token
    assert held == int((32 * 0.9 - 15.0) * 2**30 // (131072 * 8192)) == 13
    assert one_chip.engine(32, max_model_len=8192).max_num_seqs == 13
    assert one_chip.engine(32, max_model_len=2048).max_num_seqs == 32  # four times as many fit: no cap
    assert profiles[("trn1.32xlarge", 8)].engine(32, max_model_len=8192).max_num_seqs == 32
    with pytest.raises(ValueError, match="no KV cache"):
        profile_for(profiles, "inf2.48xlarge", 1).engine(32, max_model_len=8192)


def test_speculative_decoding_speeds_decode_by_the_expected_accepted_tokens() -> None:
    text = MEASURED + "speculative: {draft_tokens: 4, acceptance: 0.7, draft_cost: 0.05}\n"
    profile = Profile.model_validate(yaml.safe_load(text))
    expected_tokens = (1 - 0.7**5) / (1 - 0.7)  # Leviathan et al. 2023, eq. 1
    # At batch 8 verifying 5 tokens a sequence (40 at 12,000 tokens/s: 3.3 ms) hides in the 7.4 ms step.
    assert profile.decode_speedup(8) == pytest.approx(expected_tokens / 1.2)
    faster, plain = profile.engine(16), profile.engine(16, speculative=False)
    assert faster.decode_step_seconds[8] == pytest.approx(
        plain.decode_step_seconds[8] / (expected_tokens / 1.2)
    )
    assert faster.prefill_tokens_per_second == plain.prefill_tokens_per_second


def test_decode_step_is_linear_between_points_and_continues_past_the_last() -> None:
    trn1 = _plain()  # {1: 7.0, 8: 8.5, 32: 12.0}
    assert trn1.step_ms(1) == 7.0
    assert trn1.step_ms(20) == pytest.approx(8.5 + 3.5 * 12 / 24)
    assert trn1.step_ms(56) == pytest.approx(15.5)
    engine = trn1.engine(4)
    assert engine.max_num_seqs == 4 and engine.decode_step_seconds[1] == pytest.approx(0.007)


def test_a_measured_profile_replaces_the_shipped_one(write) -> None:
    profiles = load_profiles([write(MEASURED, "measured.yaml")])
    measured = profiles[("trn1.32xlarge", 8)]
    assert measured.prefill_tokens_per_second == 12000
    assert measured.step_ms(8) == pytest.approx(6.0 + 3.0 * 7 / 15)
    assert ("inf2.48xlarge", 8) in profiles


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (("trn1.32xlarge", "trn9.32xlarge"), ["measured.yaml:1", "instance_type", "unknown instance type"]),
        (('"16": 9.0', '"16": 5.0'), ["decode_step_ms must not fall"]),
        (("tensor_parallel: 8", "tensor_parallel: 5"), ["does not divide the 32 NeuronCores"]),
        (("source:", "sauce:"), ["measured.yaml:2", "sauce", "did you mean 'source'"]),
    ],
)
def test_a_bad_profile_is_named_with_file_line_and_key(write, change, fragments) -> None:
    with pytest.raises(ConfigError) as raised:
        load_profiles([write(MEASURED.replace(*change), "measured.yaml")])
    for fragment in fragments:
        assert fragment in str(raised.value), str(raised.value)


def _plain() -> Profile:
    """A profile of its own figures, not a shipped one's (those follow their published source)."""
    text = SPECULATIVE.replace("speculative: {draft_tokens: 4, acceptance: 0.7, draft_cost: 0.05}\n", "")
    return Profile.model_validate(yaml.safe_load(text))


SPECULATIVE = (
    "instance_type: trn1.32xlarge\nsource: test\ntensor_parallel: 8\nmax_num_seqs: 32\n"
    "prefill_tokens_per_second: 8200.0\ndecode_step_ms: {1: 7.0, 8: 8.5, 32: 12.0}\n"
    "speculative: {draft_tokens: 4, acceptance: 0.7, draft_cost: 0.05}\n"
)


def test_speculative_decoding_gains_less_as_the_batch_grows() -> None:
    """Leviathan et al.'s speed-up, tokens per step / (1 + k c), holds while verifying k + 1 tokens per
    sequence costs one memory-bound step. At batch 1: 5 tokens take 0.6 ms of compute at 8,200 tokens/s,
    inside the 7 ms step: 2.773 x 7 / (7 + 4 x 0.05 x 7) = x2.31. At batch 32 the verification scores
    160 tokens, 19.5 ms of compute against a 12 ms step: 2.773 x 12 / (19.5 + 2.4) = x1.52."""
    profile = Profile.model_validate(yaml.safe_load(SPECULATIVE))
    tokens = (1 - 0.7**5) / (1 - 0.7)
    assert profile.decode_speedup(1) == pytest.approx(tokens * 7.0 / (7.0 + 1.4))
    assert profile.decode_speedup(1) == pytest.approx(2.31, abs=0.005)
    assert profile.decode_speedup(32) == pytest.approx(tokens * 12.0 / (160 / 8.2 + 2.4))
    assert profile.decode_speedup(32) == pytest.approx(1.52, abs=0.005)
    faster, plain = profile.engine(32), profile.engine(32, speculative=False)
    assert plain.decode_step_seconds[32] / faster.decode_step_seconds[32] == pytest.approx(
        profile.decode_speedup(32)
    )
    assert plain.decode_step_seconds[1] / faster.decode_step_seconds[1] == pytest.approx(2.31, abs=0.005)


def test_a_decode_bucket_adds_the_kv_reads_of_its_length() -> None:
    """The batch-1 step streams 15 GiB of weights in 7 ms; a token's 128 KiB of KV cache at that bandwidth
    takes 7 x 131072 / (15 x 2^30) ms. At bucket 4,096 each of 32 sequences reads 4,096 - 1,150 more
    tokens than the profile's basis."""
    trn1 = _plain()
    per_token = 7.0 * 131072 / (15 * 2**30)
    assert trn1.kv_ms_per_token() == pytest.approx(per_token)
    assert trn1.step_ms_at(32, 4096) == pytest.approx(12.0 + 32 * (4096 - 1150) * per_token)
    assert trn1.step_ms_at(1, 1150) == pytest.approx(7.0)
    engine = trn1.engine(32, 8192, decode_buckets=(1024, 2048, 4096, 8192))
    assert engine.decode_buckets == (1024, 2048, 4096, 8192)
    assert engine.decode_step_by_bucket[2][32] == pytest.approx(trn1.step_ms_at(32, 4096) / 1000)
    assert engine.decode_step(32, 3000) == engine.decode_step_by_bucket[2][32]
    assert engine.decode_step(32, 9000) == engine.decode_step_by_bucket[3][32]  # past the largest
