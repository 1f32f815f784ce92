"""Default zones and zone warnings from the offerings table."""

from hypothesis import given
from hypothesis import strategies as st

from settings.instances import INSTANCES
from settings.zone_offerings import REGION_ZONES
from settings.zones import default_zones, fleet_zones, zones_missing, zones_offering

BOTH = ["inf2.48xlarge", "trn1.32xlarge"]


def test_default_zones_offer_every_fleet_type_up_to_three() -> None:
    assert default_zones("us-east-1", BOTH) == ["us-east-1b", "us-east-1c", "us-east-1f"]
    assert default_zones("us-west-2", BOTH) == ["us-west-2b", "us-west-2d"]


def test_default_zones_are_padded_to_two_with_zones_offering_most_types() -> None:
    # Only us-east-2c offers trn1.32xlarge; us-east-2a offers inf2, so the inf2 fleet gets two zones.
    assert default_zones("us-east-2", BOTH) == ["us-east-2a", "us-east-2c"]


def test_zones_that_do_not_exist_for_accounts_are_not_defaults() -> None:
    """ap-northeast-1b does not exist in every account (the capturing account has none): never a default."""
    assert "ap-northeast-1b" not in REGION_ZONES["ap-northeast-1"]
    assert default_zones("ap-northeast-1", ["inf2.48xlarge"]) == ["ap-northeast-1a", "ap-northeast-1c"]


def test_regions_without_data_fall_back_to_a_b_c() -> None:
    assert zones_offering("mx-central-1", "inf2.48xlarge") is None
    assert default_zones("mx-central-1", BOTH) == ["mx-central-1a", "mx-central-1b", "mx-central-1c"]


def test_configured_zones_missing_a_type_are_named() -> None:
    assert zones_missing("us-east-2", "trn1.32xlarge", ["us-east-2a", "us-east-2b", "us-east-2c"]) == [
        "us-east-2a",
        "us-east-2b",
    ]
    assert zones_missing("mx-central-1", "trn1.32xlarge", ["mx-central-1a"]) == []


def test_fleet_keeps_to_its_zones_or_all_when_none_offer_it() -> None:
    assert fleet_zones("us-east-2", "trn1.32xlarge", ["us-east-2a", "us-east-2c"]) == ["us-east-2c"]
    assert fleet_zones("eu-west-1", "trn1.32xlarge", ["eu-west-1a", "eu-west-1b"]) == [
        "eu-west-1a",
        "eu-west-1b",
    ]


@given(
    region=st.sampled_from(sorted(REGION_ZONES)),
    types=st.lists(st.sampled_from(sorted(INSTANCES)), min_size=1, max_size=3, unique=True),
)
def test_defaults_are_two_or_three_known_zones_of_the_region(region: str, types: list[str]) -> None:
    zones = default_zones(region, types)
    if len(REGION_ZONES[region]) >= 2:
        assert 2 <= len(zones) <= 3
    assert zones == sorted(set(zones))
    assert all(zone in REGION_ZONES[region] for zone in zones)
    everywhere = [z for z in REGION_ZONES[region] if not any(zones_missing(region, t, [z]) for t in types)]
    if len(everywhere) >= 2:  # enough zones offer every type: only those are chosen
        assert set(zones) <= set(everywhere)
