"""The AWS rules moto does not model (settings/aws_rules.py), checked on each region's template."""

from __future__ import annotations

from settings.aws_rules import ROUTE53_ALARM_HEALTH_CHECKS, alarm_health_checks, health_check_problems


def test_every_alarm_health_check_follows_an_alarm_route53_supports(templates):
    for region, template in templates.items():
        assert alarm_health_checks(template), region  # the rule has something to check
        problems = health_check_problems(template)
        assert problems == [], f"{region}: {problems} ({ROUTE53_ALARM_HEALTH_CHECKS.source})"
