"""The AWS rules moto does not model (settings/aws_rules.py), checked on each region's template."""

from __future__ import annotations

from settings.aws_rules import ROUTE53_ALARM_HEALTH_CHECKS, alarm_health_checks, health_check_problems
from tests.stacks.conftest import cell_templates


def _assert_route53_can_follow_every_alarm(templates):
    for name, template in templates.items():
        assert alarm_health_checks(template), name  # the rule has something to check
        problems = health_check_problems(template)
        assert problems == [], f"{name}: {problems} ({ROUTE53_ALARM_HEALTH_CHECKS.source})"


def test_every_alarm_health_check_follows_an_alarm_route53_supports(templates):
    _assert_route53_can_follow_every_alarm(templates)


def test_every_cells_alarm_health_checks_follow_alarms_route53_supports(cells_settings, cells):
    """Prime Day's cells: each cell's stack holds its own health checks and the alarms they name."""
    _, assembly = cells
    _assert_route53_can_follow_every_alarm(cell_templates(cells_settings, assembly))
