"""cfn-lint and cdk-nag over the synthesized default config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_s3 as s3

from cdk_constructs.nag import MIN_REASON_LENGTH
from tests.stacks.conftest import REPO

ACKNOWLEDGED = "aws:cdk:acknowledged-rules"


@pytest.fixture(params=["default", "switched", "cells"])
def assembly_app(request):
    """The default config, Prime Day with every network and operations switch the other way, and Prime Day
    as shipped (us-east-1 and us-west-2 in two cells each)."""
    return request.getfixturevalue({"default": "synthesized"}.get(request.param, request.param))


def test_cfn_lint_finds_nothing_in_any_template(assembly_app):
    _, assembly = assembly_app
    paths = [str(Path(assembly.directory) / stack.template_file) for stack in assembly.stacks]
    # Three regions and the global routing stack, and on Prime Day a second cell of us-east-1 and us-west-2.
    assert len(paths) == 4 + sum("cell2" in path for path in paths)
    assert len(paths) in (4, 6)
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "json", *paths],
        cwd=REPO,  # picks up .cfnlintrc.yaml
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(result.stdout or "[]")
    assert [f for f in findings if f["Level"] == "Error"] == []
    assert findings == [], [(f["Rule"]["Id"], f["Message"]) for f in findings]


def test_nag_reports_no_unacknowledged_findings(assembly_app):
    _, assembly = assembly_app
    report = json.loads((Path(assembly.directory) / "validation-report.json").read_text())
    violations = [v for plugin in report["pluginReports"] for v in plugin.get("violations", [])]
    assert violations == []


def _acknowledgments(app):
    """Ours: aws-cdk-lib itself acknowledges CloudFormation-Validate::W3010 on stacks with literal zones."""
    found = []
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == ACKNOWLEDGED:
                found.extend(
                    (construct.node.path, rule, reason)
                    for rule, reason in dict(entry.data).items()
                    if "AwsSolutions" in rule
                )
    return found


def test_every_acknowledgment_gives_a_reason(assembly_app):
    app, _ = assembly_app
    acknowledgments = _acknowledgments(app)
    assert acknowledgments
    for path, rule, reason in acknowledgments:
        assert len(str(reason).strip()) >= MIN_REASON_LENGTH, (path, rule)


def test_acknowledgments_sit_on_the_construct_they_cover_not_the_stack_or_app(assembly_app):
    app, _ = assembly_app
    for path, rule, _ in _acknowledgments(app):
        assert path.count("/") >= 2, f"{rule} acknowledged on {path}: too broad"


def test_nag_is_active_and_fails_an_unacknowledged_finding(tmp_path):
    """Negative control: the same plugin wiring rejects a plain bucket (no SSL enforcement, no logs)."""
    from stacks.serving_app import AwsSolutionsChecks, Validations  # the exact wiring build_app uses

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Plain", env=Environment(account="111111111111", region="us-east-1"))
    s3.Bucket(stack, "Bucket")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for plugin in report["pluginReports"] for v in plugin["violations"]}
    assert "AwsSolutions-S10" in rules
