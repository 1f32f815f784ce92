"""cdk.json carries the pinned aws-cdk-lib's recommended feature flags, as a `cdk init` app would."""

from __future__ import annotations

import json
import tarfile
from importlib.metadata import version
from pathlib import Path

import aws_cdk._jsii as jsii_bundle

from stacks.feature_flags import LEFT_OFF, feature_flags
from stacks.serving_app import app_context


def _recommended_flags() -> dict[str, object]:
    """The list aws-cdk-lib ships for `cdk init` of this exact version (inside its jsii bundle)."""
    bundle = Path(jsii_bundle.__file__).parent / f"aws-cdk-lib@{version('aws-cdk-lib')}.jsii.tgz"
    with tarfile.open(bundle) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        return json.load(member)


def test_every_recommended_flag_is_set_as_recommended_unless_left_off_with_a_reason():
    recommended = _recommended_flags()
    flags = feature_flags()
    assert {key: flags.get(key) for key in recommended if key not in LEFT_OFF} == {
        key: value for key, value in recommended.items() if key not in LEFT_OFF
    }
    for key, reason in LEFT_OFF.items():
        assert key in recommended and key not in flags
        assert len(reason) > 40


def test_the_app_builds_with_the_same_flags_as_the_cli(settings):
    context = app_context(settings)
    assert all(context[key] == value for key, value in feature_flags().items())
    # A redeploy must not reset the desired count that service auto scaling chose.
    assert context["@aws-cdk/aws-ecs:removeDefaultDesiredCount"] is True
    assert context["@aws-cdk/aws-ec2:restrictDefaultSecurityGroup"] is True
