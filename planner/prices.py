"""Hourly prices per region and instance type, kept as data with their source and date."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from settings.instances import INSTANCES
from settings.loader import load_model
from settings.schema import RegionName

SHIPPED = Path(__file__).parent / "data" / "prices.yaml"


class Prices(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: Annotated[str, Field(min_length=1)]
    effective: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]
    currency: str = "USD"
    per_hour: dict[RegionName, dict[str, Annotated[float, Field(gt=0)]]]
    # Region -> type -> why there is no price (EC2 offers it, the price list has no On-Demand rate).
    unpriced: dict[RegionName, dict[str, str]] = {}

    @field_validator("per_hour", "unpriced")
    @classmethod
    def _known_instances(cls, per_hour: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for region, prices in per_hour.items():
            unknown = sorted(set(prices) - set(INSTANCES))
            if unknown:
                raise ValueError(f"{region}: unknown instance types {unknown}")
        return per_hour

    def hourly(self, region: str, instance_type: str) -> float | None:
        return self.per_hour.get(region, {}).get(instance_type)

    def why_unpriced(self, region: str, instance_type: str) -> str | None:
        return self.unpriced.get(region, {}).get(instance_type)


def load_prices(path: str | Path = SHIPPED) -> Prices:
    return load_model(path, Prices)[0]
