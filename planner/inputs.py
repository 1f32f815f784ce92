"""Forecast + config + profiles + prices -> what the sizing needs per region, checked across files.

Each file is validated on its own by its loader; the rules that span files (a forecast region the config
lacks, a fleet with no profile or price, an SLO under the prefill floor, requests longer than the model's
context) are checked here and reported in the same 'file:line: key: problem' form."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from planner.buckets import MODEL_JSON, decode_buckets, prefill_buckets
from planner.demand import Demand
from planner.forecast import Forecast, load_forecast
from planner.prices import SHIPPED as SHIPPED_PRICES
from planner.prices import Prices, load_prices
from planner.profiles import Profile, load_profiles, profile_for
from planner.simulate import HostGroup
from settings.instances import INSTANCES
from settings.loader import ConfigError, load_documents, load_settings, locate
from settings.schema import FleetConfig, Settings
from settings.zones import zones_offering

# Where EC2 offers each type, zone by zone (settings/generate_zone_offerings.py writes it).
ZONE_TABLE = "settings/zone_offerings.py"


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
    # The same fleets at the low and high end of their profiles' throughput range, and without
    # speculative decoding (equal to templates when no profile has it).
    templates_low: tuple[HostGroup, ...] = ()
    templates_high: tuple[HostGroup, ...] = ()
    templates_plain: tuple[HostGroup, ...] = ()
    derived: tuple[bool, ...] = ()  # per fleet: its profile was derived per chip, not measured
    decode_speedups: tuple[float, ...] = ()  # per fleet, from speculative decoding, at its full batch
    decode_speedups_single: tuple[float, ...] = ()  # ... at batch 1
    profiles: tuple[Profile, ...] = ()


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
    engine_settings: Path = MODEL_JSON,
) -> PlanInputs:
    """Raises ConfigError naming every problem, each with its file and key."""
    forecast, document = load_forecast(forecast_path)
    settings = load_settings(config_path)
    profiles = load_profiles(profile_paths)
    prices = load_prices(prices_path)
    buckets = prefill_buckets(engine_settings)
    generation_buckets = decode_buckets(engine_settings)
    max_num_seqs = settings.model.max_num_seqs
    max_model_len = settings.model.max_model_len
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
        max_output = settings.model.max_output_tokens
        # Answers past max_output_tokens are an error below or cut there (clip_output_to_max).
        output_p99 = min(expected.output_tokens.p99, max_output)
        longest_request = expected.prompt_tokens.p99 + output_p99
        if longest_request > max_model_len:
            problems.append(
                locate(
                    document,
                    ("regions", name, "prompt_tokens", "p99"),
                    f"a p99 prompt of {expected.prompt_tokens.p99:g} tokens plus a p99 output of "
                    f"{output_p99:g} is {longest_request:g} tokens, above the model's "
                    f"max_model_len of {max_model_len} in {config_path}: the engine refuses such requests",
                )
            )
        for key in ("mean", "p99"):
            value = getattr(expected.output_tokens, key)
            if value > max_output and not forecast.clip_output_to_max:
                problems.append(
                    locate(
                        document,
                        ("regions", name, "output_tokens", key),
                        f"{value:g} tokens is above the model's max_output_tokens of {max_output} in "
                        f"{config_path}: the engine stops every answer there, so neither the simulation "
                        "nor the cost per million tokens would see these tokens; lower it, raise "
                        "max_output_tokens, or set `clip_output_to_max: true` in the forecast to plan "
                        f"answers cut at {max_output} tokens",
                    )
                )
        templates, prefill_rates, hourly = [], [], []
        lows, highs, plains, derived, speedups, singles, used = [], [], [], [], [], [], []
        for index, fleet in enumerate(region.fleets):
            where = _fleet_line(config_path, name, index)
            if not _offered(name, fleet.instance_type):
                listed = sorted(_listed_types(name))
                problems.append(
                    f"{where}: EC2 does not offer {fleet.instance_type} in {name} (the zone table "
                    f"{ZONE_TABLE} lists no zone of {name} for it"
                    + (f"; it lists {', '.join(listed)} there" if listed else "")
                    + "): no host of this fleet can be ordered there; plan a type the region offers"
                )
                continue
            price = prices.hourly(name, fleet.instance_type)
            profile = profile_for(profiles, fleet.instance_type, fleet.tensor_parallel)
            try:
                engine = profile.engine(
                    max_num_seqs, max_model_len, buckets, decode_buckets=generation_buckets
                )
            except ValueError as error:
                problems.append(
                    f"{where}: no performance profile for {fleet.instance_type} at tensor_parallel "
                    f"{fleet.tensor_parallel} ({error}); measure one with `make bench-serving "
                    "PROFILE_OUT=file` on such a host and pass it with `make plan PROFILE=file`"
                )
                engine = None
            if price is None:
                why = prices.why_unpriced(name, fleet.instance_type)
                problems.append(
                    f"{where}: {prices_path}: per_hour.{name}.{fleet.instance_type}: no price for this "
                    f"fleet{f' ({why})' if why else ''}; give your own with "
                    '`make plan PLAN_ARGS="--prices FILE"`'
                )
            if engine is None or price is None:
                continue
            replicas = fleet.engine_replicas
            templates.append(HostGroup(fleet.instance_type, engine, replicas, 0))
            for speed, into in ((profile.throughput_range.low, lows), (profile.throughput_range.high, highs)):
                into.append(
                    HostGroup(
                        fleet.instance_type,
                        profile.engine(
                            max_num_seqs, max_model_len, buckets, speed, decode_buckets=generation_buckets
                        ),
                        replicas,
                        0,
                    )
                )
            plains.append(
                HostGroup(
                    fleet.instance_type,
                    profile.engine(
                        max_num_seqs,
                        max_model_len,
                        buckets,
                        speculative=False,
                        decode_buckets=generation_buckets,
                    ),
                    replicas,
                    0,
                )
            )
            derived.append(profile.derived)
            speedups.append(profile.decode_speedup(engine.max_num_seqs))
            singles.append(profile.decode_speedup(1))
            used.append(profile)
            prefill_rates.append(profile.prefill_tokens_per_second)
            hourly.append(price)
        longest = min(expected.prompt_tokens.p99, max_model_len - 1)
        padded = min((bucket for bucket in buckets if bucket >= longest), default=longest)
        if prefill_rates:
            floor_ms = padded / max(prefill_rates) * 1000
            if forecast.slo.ttft_p99_ms < floor_ms:
                problems.append(
                    locate(
                        document,
                        ("slo", "ttft_p99_ms"),
                        f"{forecast.slo.ttft_p99_ms:g} ms is below the prefill floor in {name}: its p99 "
                        f"prompt of {longest:g} tokens (prefilled as {padded:g}, its bucket) alone takes "
                        f"{floor_ms:.0f} ms on the fastest engine ({max(prefill_rates):g} tokens/s)",
                    )
                )
        if len(templates) != len(region.fleets):
            continue
        output = expected.output_tokens.distribution()
        demand = Demand(
            prompt=expected.prompt_tokens.distribution(),
            output=output,
            prompt_mean=expected.prompt_tokens.mean,
            # The tokens the engine generates: answers stop at max_output_tokens (a share of the tail
            # only, unless the forecast clips on purpose), and the cost per million tokens counts these.
            output_mean=output.capped_mean(settings.model.max_output_tokens),
            max_prompt=settings.model.max_model_len - 1,
            max_output=settings.model.max_output_tokens,
        )
        regions.append(
            RegionInputs(
                name=name,
                peak=expected.requests_per_second,
                weight=region.weight,
                demand=demand,
                fleets=tuple(region.fleets),
                templates=tuple(templates),
                mix=tuple(float(fleet.max) for fleet in region.fleets),
                hourly_prices=tuple(hourly),
                templates_low=tuple(lows),
                templates_high=tuple(highs),
                templates_plain=tuple(plains) if any(s != 1.0 for s in speedups) else tuple(templates),
                derived=tuple(derived),
                decode_speedups=tuple(speedups),
                decode_speedups_single=tuple(singles),
                profiles=tuple(used),
            )
        )
    if problems:
        raise ConfigError("\n".join(problems))
    return PlanInputs(forecast, settings, Path(config_path), prices, tuple(regions))


def _offered(region: str, instance_type: str) -> bool:
    """Whether EC2 offers the type in the region: by the zone table, or by the instance catalog where the
    table has no data for the region."""
    zones = zones_offering(region, instance_type)
    return bool(zones) if zones is not None else INSTANCES[instance_type].offered_in(region)


def _listed_types(region: str) -> set[str]:
    return {name for name in INSTANCES if zones_offering(region, name)}


def _fleet_line(config_path: str | Path, region: str, index: int) -> str:
    """'file:line: regions.R.fleets[instance_type=T]' for a fleet of a config, from whichever file of its
    base chain sets that fleet."""
    documents = load_documents(Path(config_path))
    for document in documents:
        fleets = (
            document.data.get("regions", {}).get(region, {}).get("fleets")
            if isinstance(document.data, dict)
            else None
        )
        if isinstance(fleets, list) and index < len(fleets):
            line = document.lines.get(("regions", region, "fleets", index))
            kind = fleets[index].get("instance_type") if isinstance(fleets[index], dict) else None
            where = f"{document.path}:{line}" if line else str(document.path)
            return f"{where}: regions.{region}.fleets[instance_type={kind}]"
    return f"{config_path}: regions.{region}.fleets[{index}]"
