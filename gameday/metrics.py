"""One region's minute as CloudWatch holds it: the containers' per-request 0/1 metrics as one-minute
statistic sets (their Average is a share), and the periodic gauges as one sample per gauge interval per
host (the deployed ORCHESTRATOR_CONFIG's `gauge_interval_seconds`: 6 a minute at 10 s; a minute's
SampleCount counts hosts, its Sum adds each host's value that many times), as
orchestrator/routing/signals.py reads them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

GAUGE_SAMPLES = 6  # the containers' 10 s gauges, per host and minute (the default interval)


def _statistics(
    metric: str, dimensions: list[dict[str, str]], at: datetime, count: float, total: float, high: float
) -> dict[str, Any]:
    return {
        "MetricName": metric,
        "Dimensions": dimensions,
        "Timestamp": at,
        "StatisticValues": {"SampleCount": count, "Sum": total, "Minimum": 0.0, "Maximum": high},
    }


def datapoints(
    raw: Mapping[str, float | None], at: datetime, model: str, gauge_samples: int = GAUGE_SAMPLES
) -> list[dict[str, Any]]:
    """PutMetricData entries for one minute; a metric with no sample that minute is absent, as in
    CloudWatch (no request finished, or no host reported)."""
    dimensions = [{"Name": "Model", "Value": model}]
    requests = raw.get("requests") or 0.0
    served = raw.get("served_requests") or 0.0
    reporting = raw.get("reporting_hosts") or 0.0
    data = []
    if served >= 1:
        slow = served * (raw.get("slow_share") or 0.0)
        data.append(_statistics("SlowFirstToken", dimensions, at, served, slow, 1.0))
    if requests >= 1:
        failed = requests * (raw.get("error_share") or 0.0)
        data.append(_statistics("RequestFailed", dimensions, at, requests, failed, 1.0))
        for metric, key in (("ServingError", "serving_error_share"), ("Shed", "shed_share")):
            data.append(_statistics(metric, dimensions, at, requests, requests * (raw.get(key) or 0.0), 1.0))
    if reporting >= 1:
        samples = reporting * gauge_samples
        in_flight = raw.get("in_flight") or 0.0
        slots = raw.get("slots") or 0.0
        data.append(
            _statistics(
                "RequestsInFlight", dimensions, at, samples, in_flight * gauge_samples, in_flight / reporting
            )
        )
        data.append(
            _statistics("ServingSlots", dimensions, at, samples, slots * gauge_samples, slots / reporting)
        )
    return data
