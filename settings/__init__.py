"""Config files -> one validated Settings object, the only thing the CDK app reads."""

from settings.instances import INSTANCES, InstanceFacts, NeuronFamily
from settings.loader import ConfigError, load_settings
from settings.schema import FleetConfig, RegionConfig, Settings

__all__ = [
    "INSTANCES",
    "ConfigError",
    "FleetConfig",
    "InstanceFacts",
    "NeuronFamily",
    "RegionConfig",
    "Settings",
    "load_settings",
]
