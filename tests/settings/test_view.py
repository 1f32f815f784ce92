"""Rules spanning sections read a config through settings.view.WholeConfig: Settings must offer it all."""

from __future__ import annotations

import inspect

from settings.schema import Settings
from settings.view import WholeConfig


def protocol_members() -> dict[str, object]:
    return {
        name: member
        for name, member in vars(WholeConfig).items()
        if not name.startswith("_") and (callable(member) or isinstance(member, property))
    }


def test_settings_offers_every_member_of_the_view() -> None:
    members = protocol_members()
    assert {"regions", "events", "peak_hosts", "availability_zones"} <= set(members)
    for name, member in members.items():
        if isinstance(member, property):
            assert name in Settings.model_fields, f"Settings has no field {name}"
            continue
        assert callable(getattr(Settings, name, None)), f"Settings has no method {name}"
        expected = list(inspect.signature(member).parameters)
        assert list(inspect.signature(getattr(Settings, name)).parameters) == expected, name
