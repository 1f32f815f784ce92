"""Settings -> what routing needs to know about every region, from config alone: names of parameters and
alarms, the policy's parameters and the orchestrator's whole config. No CDK import here, so the operator
command and the rehearsal use the same functions as the stacks."""

from __future__ import annotations

from orchestrator.routing.config import OrchestratorConfig, RegionTarget
from orchestrator.routing.policy import PolicyParams
from settings.schema import Settings

# Powertools for AWS Lambda on the orchestrator: the public layer of the version the tests run
# (requirements-dev.txt pins the same), found at deploy time through the SSM parameter Powertools publishes
# per runtime and version in every region (Powertools docs, "Lambda Layer", SSM parameter).
POWERTOOLS_VERSION = "3.37.0"
POWERTOOLS_RUNTIME = "python3.14"


def stack_name(settings: Settings, region: str) -> str:
    """A region's serving stack (and its template in the cloud assembly, <name>.template.json)."""
    return f"{settings.project}-{region}"


def powertools_layer_parameter(version: str = POWERTOOLS_VERSION) -> str:
    """The public SSM parameter that holds the Powertools layer's ARN in the orchestrator's region."""
    return f"/aws/service/powertools/python/x86_64/{POWERTOOLS_RUNTIME}/{version}"


def degraded_alarm_name(settings: Settings, region: str) -> str:
    """Every alarm of the region, for paging (one host's fault included): not what routing drains on."""
    return f"{settings.project}-{region}-region-degraded"


def unfit_alarm_name(settings: Settings, region: str) -> str:
    """The region-wide serving signals only: what the orchestrator drains a region on. Known from config
    alone, so routing can name it without a cross-region reference."""
    return f"{settings.project}-{region}-region-unfit"


def endpoint_parameter(settings: Settings, region: str) -> str:
    """The ALB a region serves from, as JSON, written by that region's stack (in that region)."""
    return f"/{settings.project}/{region}/serving-endpoint"


def health_check_parameter(settings: Settings, region: str) -> str:
    """The id of the region's calculated Route 53 health check, written by that region's stack."""
    return f"/{settings.project}/{region}/routing-health-check"


def override_parameter(settings: Settings) -> str:
    """An operator's pin, written by `make traffic`, read by the orchestrator (orchestrator region)."""
    return f"/{settings.project}/routing/override"


def state_parameter(settings: Settings) -> str:
    """What one orchestrator run leaves for the next; only the orchestrator writes it."""
    return f"/{settings.project}/routing/state"


def routing_metrics_namespace(settings: Settings) -> str:
    return f"{settings.project}/Routing"


def policy_params(settings: Settings) -> PolicyParams:
    routing = settings.routing
    return PolicyParams(
        slow_first_token_share=routing.slow_first_token_share,
        error_share=routing.error_share,
        floor=routing.floor,
        gain_step=routing.gain_step,
        bad_runs_to_drain=routing.bad_runs_to_drain,
        drain_runs=routing.drain_runs,
        healthy_runs_to_recover=routing.healthy_runs_to_recover,
    )


def orchestrator_config(settings: Settings) -> OrchestratorConfig:
    return OrchestratorConfig(
        domain_name=settings.tls.domain_name,
        hosted_zone_id=settings.tls.hosted_zone_id,
        metrics_namespace=settings.observability.metrics_namespace,
        model_name=settings.model.name,
        state_parameter=state_parameter(settings),
        override_parameter=override_parameter(settings),
        policy=policy_params(settings),
        regions=tuple(
            RegionTarget(
                name=region,
                initial_weight=config.weight,
                min_hosts=settings.min_healthy_hosts(region),
                endpoint_parameter=endpoint_parameter(settings, region),
                health_check_parameter=health_check_parameter(settings, region),
                # The field keeps its name; it holds the alarm the orchestrator drains on: region-unfit.
                degraded_alarm=unfit_alarm_name(settings, region),
            )
            for region, config in settings.regions.items()
        ),
        remove_after_runs=settings.routing.remove_after_runs,
    )
