"""Settings -> a CDK App with one RegionalServing stack per region and the cdk-nag checks registered."""

from __future__ import annotations

from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from settings.schema import Settings
from stacks.props import stack_name
from stacks.regional_serving import RegionalServing

# Feature flags the stacks rely on, set in code so `cdk synth` and the tests build the same templates.
FEATURE_FLAGS: dict[str, Any] = {
    # An ECS service without an explicit desired count leaves it out of the template, so a redeploy does
    # not reset what service auto scaling chose.
    "@aws-cdk/aws-ecs:removeDefaultDesiredCount": True,
}


def app_context(settings: Settings) -> dict[str, Any]:
    """Availability zones per region, seeded so synth never asks AWS, plus the feature flags."""
    context: dict[str, Any] = dict(FEATURE_FLAGS)
    for region in settings.regions:
        context[f"availability-zones:account={settings.account}:region={region}"] = (
            settings.availability_zones(region)
        )
    return context


def build_app(settings: Settings, *, outdir: str | None = None, nag: bool = True) -> App:
    app = App(context=app_context(settings), outdir=outdir)
    for region in settings.regions:
        RegionalServing(app, stack_name(settings, region), settings=settings, region=region)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app
