"""Settings -> what routing needs to know about every region, from config alone: names of parameters and
alarms, the policy's parameters and the orchestrator's whole config. No CDK import here, so the operator
command and the rehearsal use the same functions as the stacks."""

from __future__ import annotations

from orchestrator.routing.config import OrchestratorConfig, RegionTarget
from orchestrator.routing.policy import PolicyParams
from settings.cells import Cell, split_hosts
from settings.schema import Settings

# Powertools for AWS Lambda on the orchestrator: the public layer of the version the tests run
# (requirements-dev.txt pins the same), found at deploy time through the SSM parameter Powertools publishes
# per runtime and version in every region (Powertools docs, "Lambda Layer", SSM parameter).
POWERTOOLS_VERSION = "3.37.0"
POWERTOOLS_RUNTIME = "python3.14"
# AWS's public SSM tree of ECS-optimized AL2023 Neuron AMIs: one parameter per released AMI name beside
# `recommended` (ECS developer guide, "Retrieving Amazon ECS-optimized Linux AMI metadata").
NEURON_AMI_SSM_PATH = "/aws/service/ecs/optimized-ami/amazon-linux-2023/neuron"


def neuron_ami_parameter(release: str) -> str:
    """The SSM parameter holding the AMI id of one named release, or of AWS's latest for "recommended"."""
    return f"{NEURON_AMI_SSM_PATH}/{release}/image_id"


def stack_name(settings: Settings, region: str, cell: int = 1) -> str:
    """A cell's serving stack (and its template in the cloud assembly, <name>.template.json). A region's
    first cell keeps the region's name, so a region grown to more cells adds stacks and replaces none."""
    return f"{settings.project}-{region}{settings.cell(region, cell).suffix}"


def powertools_layer_parameter(version: str = POWERTOOLS_VERSION) -> str:
    """The public SSM parameter that holds the Powertools layer's ARN in the orchestrator's region."""
    return f"/aws/service/powertools/python/x86_64/{POWERTOOLS_RUNTIME}/{version}"


def degraded_alarm_name(settings: Settings, region: str, cell: int = 1) -> str:
    """Every alarm of the region, for paging (one host's fault included): not what routing drains on."""
    return f"{settings.project}-{settings.cell(region, cell).slug}-region-degraded"


def unfit_alarm_name(settings: Settings, region: str, cell: int = 1) -> str:
    """The region-wide serving signals only: what the orchestrator drains a region on, and what a wave
    deploy watches with the degraded one. Known from config alone, so routing can name it without a
    cross-region reference."""
    return f"{settings.project}-{settings.cell(region, cell).slug}-region-unfit"


def _cell_path(settings: Settings, region: str, cell: int) -> str:
    this = settings.cell(region, cell)
    return f"/{settings.project}/{region}" + ("" if this.count == 1 else f"/cell{cell}")


def endpoint_parameter(settings: Settings, region: str, cell: int = 1) -> str:
    """The ALB a cell serves from, as JSON, written by that cell's stack (in its region)."""
    return f"{_cell_path(settings, region, cell)}/serving-endpoint"


def health_check_parameter(settings: Settings, region: str, cell: int = 1) -> str:
    """The id of the cell's calculated Route 53 health check, written by that cell's stack."""
    return f"{_cell_path(settings, region, cell)}/routing-health-check"


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
        # One target (one weighted record) per cell; a one-cell region is one target named for the region.
        regions=tuple(
            RegionTarget(
                name=cell.name,
                initial_weight=cell_weights(settings.regions[cell.region].weight, cell.count)[cell.index - 1],
                min_hosts=settings.min_healthy_hosts(cell.region, cell.index),
                endpoint_parameter=endpoint_parameter(settings, cell.region, cell.index),
                health_check_parameter=health_check_parameter(settings, cell.region, cell.index),
                # The field keeps its name; it holds the alarm the orchestrator drains on: region-unfit.
                degraded_alarm=unfit_alarm_name(settings, cell.region, cell.index),
                **_cell_fields(settings, cell),
            )
            for cell in settings.all_cells
        ),
        remove_after_runs=settings.routing.remove_after_runs,
    )


def _cell_fields(settings: Settings, cell: Cell) -> dict[str, str]:
    """What a target of a region of several cells adds: its AWS region and its metrics namespace."""
    if cell.count == 1:
        return {}
    return {"aws_region": cell.region, "metrics_namespace": settings.cell_metrics_namespace(cell)}


def cell_weights(region_weight: int, cells: int) -> tuple[int, ...]:
    """A region's configured weight over its cells' records at first: as evenly as whole weights allow
    (the orchestrator then splits it by spare slots)."""
    return split_hosts(region_weight, cells)


def routing_targets(settings: Settings) -> dict[str, int]:
    """Every weighted record's set identifier -> its initial weight: a region, or each cell of a region of
    several (`us-east-1/2`). What pins and rehearsal scenarios may name."""
    return {target.name: target.initial_weight for target in orchestrator_config(settings).regions}
