"""Performance profiles: the shipped estimates, the format `make bench-serving` writes, interpolation."""

from __future__ import annotations

import pytest

from planner.profiles import load_profiles
from settings.loader import ConfigError

MEASURED = """\
instance_type: trn1.32xlarge
source: "make bench-serving 2027-06-01 ip-10-0-1-23"
tensor_parallel: 8
max_num_seqs: 16
prefill_tokens_per_second: 12000.0
decode_step_ms: {"1": 6.0, "16": 9.0}
"""


def test_shipped_profiles_cite_a_source_and_trn1_is_about_20_percent_faster() -> None:
    profiles = load_profiles()
    inf2, trn1 = profiles[("inf2.48xlarge", 8)], profiles[("trn1.32xlarge", 8)]
    assert all(profile.source for profile in profiles.values())
    assert trn1.prefill_tokens_per_second / inf2.prefill_tokens_per_second == pytest.approx(1.2, abs=0.01)
    for batch in (1, 8, 32):
        assert inf2.step_ms(batch) / trn1.step_ms(batch) == pytest.approx(1.2, abs=0.01)
    assert (inf2.engine_replicas, trn1.engine_replicas) == (3, 4)


def test_decode_step_is_linear_between_points_and_continues_past_the_last() -> None:
    trn1 = load_profiles()[("trn1.32xlarge", 8)]  # {1: 7.0, 8: 8.5, 32: 12.0}
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
