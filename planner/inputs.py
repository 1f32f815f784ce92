"""Forecast + config + profiles + prices -> what the sizing needs per region, checked across files.

Each file is validated on its own by its loader; the rules that span files (a forecast region the config
lacks, a fleet with no profile or price, an SLO under the prefill floor) are checked here and reported in
the same 'file:line: key: problem' form."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from planner.forecast import Forecast, load_forecast
from planner.plan import Demand
from planner.prices import SHIPPED as SHIPPED_PRICES
from planner.prices import Prices, load_prices
from planner.profiles import load_profiles
from planner.simulate import HostGroup
from settings.loader import ConfigError, load_settings, locate
from settings.schema import FleetConfig, Settings


@dataclass(frozen=True)
class RegionInputs:
    name: str
    peak: float
    weight: int
    demand: Demand
    fleets: tuple[FleetConfig, ...]
    templates: tuple[HostGroup, ...]  # one per fleet, count 0: the sizing sets the counts
    mix: tuple[float, ...]  # the config's fleet max ratio, which the plan keeps
    hourly_prices: tuple[float, ...]


@dataclass(frozen=True)
class PlanInputs:
    forecast: Forecast
    settings: Settings
    config_path: Path
    prices: Prices
    regions: tuple[RegionInputs, ...]


def gather(
    forecast_path: str | Path,
    config_path: str | Path,
    profile_paths: Sequence[str | Path] = (),
    prices_path: str | Path = SHIPPED_PRICES,
) -> PlanInputs:
    """Raises ConfigError naming every problem, each with its file and key."""
    forecast, document = load_forecast(forecast_path)
    settings = load_settings(config_path)
    profiles = load_profiles(profile_paths)
    prices = load_prices(prices_path)
    max_num_seqs = settings.model.max_num_seqs
    problems: list[str] = []
    regions: list[RegionInputs] = []
    for name, expected in forecast.regions.items():
        region = settings.regions.get(name)
        if region is None:
            problems.append(
                locate(
                    document,
                    ("regions", name),
                    f"not a region of {config_path} ({', '.join(settings.regions)})",
                )
            )
            continue
        templates, prefill_rates, hourly = [], [], []
        for fleet in region.fleets:
            where = f"{config_path}: regions.{name}.fleets[instance_type={fleet.instance_type}]"
            profile = profiles.get((fleet.instance_type, fleet.tensor_parallel))
            price = prices.hourly(name, fleet.instance_type)
            if profile is None:
                have = ", ".join(f"{kind} TP{tp}" for kind, tp in sorted(profiles))
                problems.append(
                    f"{where}: no performance profile for {fleet.instance_type} at tensor_parallel "
                    f"{fleet.tensor_parallel} (have {have}); measure one with `make bench-serving` and "
                    "pass it with --profile"
                )
            if price is None:
                problems.append(
                    f"{prices_path}: per_hour.{name}.{fleet.instance_type}: no price for this fleet"
                )
            if profile is None or price is None:
                continue
            engine = profile.engine(max_num_seqs)
            templates.append(HostGroup(fleet.instance_type, engine, fleet.engine_replicas, 0))
            prefill_rates.append(profile.prefill_tokens_per_second)
            hourly.append(price)
        longest = min(expected.prompt_tokens.p99, settings.model.max_model_len)
        if prefill_rates:
            floor_ms = longest / max(prefill_rates) * 1000
            if forecast.slo.ttft_p99_ms < floor_ms:
                problems.append(
                    locate(
                        document,
                        ("slo", "ttft_p99_ms"),
                        f"{forecast.slo.ttft_p99_ms:g} ms is below the prefill floor in {name}: its p99 "
                        f"prompt of {longest:g} tokens alone takes {floor_ms:.0f} ms on the fastest engine "
                        f"({max(prefill_rates):g} tokens/s)",
                    )
                )
        if len(templates) != len(region.fleets):
            continue
        demand = Demand(
            prompt=expected.prompt_tokens.distribution(),
            output=expected.output_tokens.distribution(),
            prompt_mean=expected.prompt_tokens.mean,
            output_mean=expected.output_tokens.mean,
            max_prompt=settings.model.max_model_len - 1,
            max_output=settings.model.max_output_tokens,
        )
        regions.append(
            RegionInputs(
                name=name,
                peak=expected.peak_requests_per_second,
                weight=region.weight,
                demand=demand,
                fleets=tuple(region.fleets),
                templates=tuple(templates),
                mix=tuple(float(fleet.max) for fleet in region.fleets),
                hourly_prices=tuple(hourly),
            )
        )
    if problems:
        raise ConfigError("\n".join(problems))
    return PlanInputs(forecast, settings, Path(config_path), prices, tuple(regions))
