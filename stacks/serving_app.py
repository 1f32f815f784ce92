"""Settings -> a CDK App with one RegionalServing stack per region, one GlobalRouting stack and the cdk-nag
checks registered."""

from __future__ import annotations

from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from settings.schema import Settings
from stacks.feature_flags import feature_flags
from stacks.global_routing import GlobalRouting
from stacks.props import global_stack_name, stack_name
from stacks.regional_serving import RegionalServing


def app_context(settings: Settings) -> dict[str, Any]:
    """Availability zones per region, seeded so synth never asks AWS, plus the feature flags (among them
    removeDefaultDesiredCount: a service without a desired count in its template is never reset by a
    redeploy)."""
    context: dict[str, Any] = feature_flags()
    for region in settings.regions:
        context[f"availability-zones:account={settings.account}:region={region}"] = (
            settings.availability_zones(region)
        )
    return context


def build_app(
    settings: Settings, *, outdir: str | None = None, nag: bool = True, first_create: bool = False
) -> App:
    """`first_create`: the assembly `make deploy` creates new stacks from, their load balancers without
    deletion protection, which a second deploy of the normal assembly turns on (ops/deploy_waves.py): a first
    creation that fails after its ALB exists then rolls back instead of ending in ROLLBACK_FAILED."""
    app = App(context=app_context(settings), outdir=outdir)
    # A stack per cell: each cell deploys (and fails) on its own.
    for cell in settings.all_cells:
        RegionalServing(
            app,
            stack_name(settings, cell.region, cell.index),
            settings=settings,
            region=cell.region,
            cell=cell.index,
            first_create=first_create,
        )
    GlobalRouting(app, global_stack_name(settings), settings=settings)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app
