"""CloudWatch alarm evaluation, composite rules and Route 53 health checks, on the twin's metrics.

An alarm looks at its last `EvaluationPeriods` one-minute datapoints that CloudWatch has (the ingestion
delay hides the newest) and goes to ALARM when at least `DatapointsToAlarm` of them breach; missing
datapoints count as TreatMissingData says (notBreaching: good, breaching: bad, ignore/missing: the
state holds when every datapoint is missing). Source: "Evaluating an alarm" and "Configuring how
CloudWatch alarms treat missing data", CloudWatch User Guide. Periods longer than a minute are
evaluated on one-minute datapoints (a simplification: the only such alarms are the NAT port ones, which
have no data here). Route 53 CLOUDWATCH_METRIC checks follow the same data as their alarm; a
CALCULATED check is healthy while at least HealthThreshold children are (Route 53 Developer Guide,
"Values that you specify when you create or update health checks")."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence

from gameday.templates import Alarm, CompositeAlarm, HealthCheck

OK, ALARM, INSUFFICIENT = "OK", "ALARM", "INSUFFICIENT_DATA"

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanThreshold": lambda v, t: v > t,
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}


def evaluate(alarm: Alarm, datapoints: Sequence[float | None], previous: str) -> str:
    """`datapoints`: the alarm's series up to the newest minute CloudWatch has, oldest first."""
    window = list(datapoints[-alarm.evaluation_periods :])
    window = [None] * (alarm.evaluation_periods - len(window)) + window
    compare = _COMPARE[alarm.comparison]
    breaching = 0
    present = 0
    for value in window:
        if value is None:
            if alarm.treat_missing == "breaching":
                breaching += 1
                present += 1
            elif alarm.treat_missing == "notBreaching":
                present += 1
            continue
        present += 1
        breaching += compare(value, alarm.threshold)
    if present == 0:
        return previous if alarm.treat_missing == "ignore" else INSUFFICIENT
    return ALARM if breaching >= alarm.datapoints else OK


_TOKEN = re.compile(
    r'\s*(ALARM|OK|INSUFFICIENT_DATA)\(\s*"?([^")]+?)"?\s*\)|\s*(AND|OR|NOT|\(|\)|TRUE|FALSE)'
)


@functools.cache
def _tokens(rule: str) -> tuple[tuple[str, str], ...]:
    """A rule's tokens, read once per rule (a day evaluates each rule thousands of times)."""
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(rule.rstrip()):
        match = _TOKEN.match(rule, position)
        if not match:
            raise ValueError(f"composite rule not understood at {rule[position : position + 30]!r}")
        tokens.append((match.group(1), match.group(2)) if match.group(1) else (match.group(3), ""))
        position = match.end()
    return tuple(tokens)


def composite(rule: str, states: Mapping[str, str]) -> bool:
    """A composite alarm's rule (ALARM/OK/INSUFFICIENT_DATA of alarms, AND, OR, NOT, parentheses)."""
    tokens = _tokens(rule)
    index = 0

    def primary() -> bool:
        nonlocal index
        kind, name = tokens[index]
        index += 1
        if kind == "NOT":
            return not primary()
        if kind == "(":
            value = disjunction()
            index += 1  # ")"
            return value
        if kind in ("TRUE", "FALSE"):
            return kind == "TRUE"
        return states.get(name, INSUFFICIENT) == kind

    def conjunction() -> bool:
        nonlocal index
        value = primary()
        while index < len(tokens) and tokens[index][0] == "AND":
            index += 1
            value = primary() and value
        return value

    def disjunction() -> bool:
        nonlocal index
        value = conjunction()
        while index < len(tokens) and tokens[index][0] == "OR":
            index += 1
            value = conjunction() or value
        return value

    return disjunction()


def composite_states(composites: Sequence[CompositeAlarm], states: Mapping[str, str]) -> dict[str, str]:
    """Composite logical id -> ALARM | OK; composites may name each other, so settle in a few passes."""
    known = dict(states)
    for _ in range(3):
        for alarm in composites:
            known[alarm.logical_id] = ALARM if composite(alarm.rule, known) else OK
    return {alarm.logical_id: known[alarm.logical_id] for alarm in composites}


ENDPOINT_CHECKS = ("HTTP", "HTTPS", "HTTP_STR_MATCH", "HTTPS_STR_MATCH", "TCP")


def health(
    checks: Mapping[str, HealthCheck],
    states: Mapping[str, str],
    last: dict[str, bool],
    reachable: bool = True,
) -> dict[str, bool]:
    """Health check logical id -> healthy; `last` holds each check's previous status (LastKnownStatus).
    An endpoint check (HTTPS and kin, probing the stack's front door from Route 53's checkers outside the
    region) is healthy while clients can reach it and a target answers: `reachable`."""
    status: dict[str, bool] = {}
    for key, check in checks.items():
        if check.kind in ENDPOINT_CHECKS:
            status[key] = reachable
        elif check.kind == "CLOUDWATCH_METRIC":
            state = states.get(check.alarm or "", INSUFFICIENT)
            if state == INSUFFICIENT:
                if check.insufficient_data == "LastKnownStatus":
                    status[key] = last.get(key, True)
                else:
                    status[key] = check.insufficient_data == "Healthy"
            else:
                status[key] = state == OK
        elif check.kind != "CALCULATED":
            status[key] = True
    for key, check in checks.items():
        if check.kind == "CALCULATED":
            status[key] = sum(status.get(child, True) for child in check.children) >= check.threshold
    last.update(status)
    return status
