"""The checked-in zone table agrees with the EC2 offerings data it was generated from (moto's copy), the way
test_instances.py keeps the catalog's regions in step with the price list."""

from settings import zone_offerings
from settings.generate_zone_offerings import collect
from settings.instances import INSTANCES


def test_table_matches_the_offerings_data() -> None:
    names, ids, zones = collect()
    assert names == zone_offerings.ZONE_NAMES
    assert ids == zone_offerings.ZONE_IDS
    assert zones == zone_offerings.REGION_ZONES


def test_table_holds_the_documented_us_east_1_facts() -> None:
    assert zone_offerings.ZONE_NAMES["us-east-1"]["trn1.32xlarge"] == (
        "us-east-1b",
        "us-east-1c",
        "us-east-1f",
    )
    assert zone_offerings.ZONE_NAMES["us-east-1"]["inf2.48xlarge"] == (
        "us-east-1a",
        "us-east-1b",
        "us-east-1c",
        "us-east-1f",
    )


def test_names_and_ids_agree_on_how_many_zones_offer_each_type() -> None:
    """Names and ids come from different views of the same zones: the counts must match."""
    for region, by_type in zone_offerings.ZONE_IDS.items():
        for instance_type, zone_ids in by_type.items():
            assert len(zone_offerings.ZONE_NAMES[region][instance_type]) == len(zone_ids), (
                region,
                instance_type,
            )


def test_table_holds_only_catalog_types_and_zones_of_their_region() -> None:
    for region, by_type in zone_offerings.ZONE_NAMES.items():
        assert set(by_type) <= set(INSTANCES)
        for zones in by_type.values():
            assert all(zone.startswith(region) for zone in zones)
            assert set(zones) <= set(zone_offerings.REGION_ZONES[region])
