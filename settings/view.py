"""What the rules that span sections read of a whole config, as a Protocol that `Settings` satisfies.

The rules (cross_checks.py, deploy_warnings.py) run inside `Settings`' own validation, so schema.py imports
them; typed against this view instead of `Settings`, they need not import schema.py back, and the package
has no import circle (tests/test_imports.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from settings.cells import Cell
from settings.events import EventConfig
from settings.fleets import RegionConfig
from settings.instances import NeuronFamily
from settings.serving import ServingConfig


class WholeConfig(Protocol):
    @property
    def regions(self) -> Mapping[str, RegionConfig]: ...

    @property
    def events(self) -> Sequence[EventConfig]: ...

    @property
    def serving(self) -> ServingConfig: ...

    @property
    def cell_max_hosts(self) -> int: ...

    def availability_zones(self, region: str) -> list[str]: ...

    def cell(self, region: str, index: int) -> Cell: ...

    def image_uri(self, region: str, family: NeuronFamily) -> str | None: ...

    def nat_gateways(self, region: str) -> int: ...

    def peak_hosts(self, region: str, event: EventConfig | None = None, cell: int = 1) -> int: ...

    def region_max_hosts(self, region: str, event: EventConfig | None = None) -> list[int]: ...
