"""Sidecar entry point: run neuron-monitor and print one EMF line per report on stdout, where the awslogs
driver ships it to CloudWatch Logs and CloudWatch extracts the metrics. neuron-monitor is our child: it
stops when we stop, however we stop.

    python3 -m monitoring.neuron_exporter
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

from monitoring.neuron_metrics import MONITOR_CONFIG, emf_line

NEURON_MONITOR = "neuron-monitor"
DEFAULT_NAMESPACE = "LLMServing"
STOP_GRACE_SECONDS = 5


# ECS sets this in every container of a task on container agent 1.39.0 or later; GET <it>/task answers the
# task's metadata, with "Revision" its task definition revision (ECS developer guide, "Amazon ECS task
# metadata endpoint version 4" and its "JSON response").
METADATA_VARIABLE = "ECS_CONTAINER_METADATA_URI_V4"
METADATA_TIMEOUT_SECONDS = 2


def task_revision(environ: Mapping[str, str], opener=urllib.request.urlopen) -> str | None:
    """The task definition revision this task runs, or None where the endpoint cannot tell (outside ECS,
    an agent without it): the metrics then go out under {InstanceType} alone, and the deploy's alarm on the
    new revision sees no data, which it treats as no errors; the circuit breaker still judges the deploy."""
    base = environ.get(METADATA_VARIABLE, "").strip()
    if not base:
        return None
    try:
        with opener(f"{base}/task", timeout=METADATA_TIMEOUT_SECONDS) as response:
            revision = json.loads(response.read()).get("Revision")
    except (OSError, ValueError, AttributeError) as error:
        print(f"neuron exporter: no task revision from the metadata endpoint: {error}", file=sys.stderr)
        return None
    return str(revision) if revision not in (None, "") else None


def _stop(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


def main() -> int:
    namespace = os.environ.get("AWS_EMF_NAMESPACE", "").strip() or DEFAULT_NAMESPACE
    instance_type = os.environ.get("INSTANCE_TYPE", "").strip()
    if not instance_type:
        print("neuron exporter: INSTANCE_TYPE is not set (the task definition sets it)", file=sys.stderr)
        return 1
    binary = shutil.which(NEURON_MONITOR)
    if binary is None:
        print(f"neuron exporter: {NEURON_MONITOR} not found on PATH (aws-neuronx-tools)", file=sys.stderr)
        return 1
    revision = task_revision(os.environ)
    signal.signal(signal.SIGTERM, _stop)
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "monitor.json"
        config.write_text(json.dumps(MONITOR_CONFIG), encoding="utf-8")
        monitor = subprocess.Popen([binary, "-c", str(config)], stdout=subprocess.PIPE, text=True)
        try:
            assert monitor.stdout is not None
            for line in monitor.stdout:
                if not line.strip():
                    continue
                try:
                    print(
                        emf_line(
                            line,
                            namespace=namespace,
                            instance_type=instance_type,
                            timestamp_ms=int(time.time() * 1000),
                            revision=revision,
                        ),
                        flush=True,
                    )
                except ValueError as error:
                    print(f"neuron exporter: skipped a report: {error}", file=sys.stderr, flush=True)
            return monitor.wait()
        finally:
            if monitor.poll() is None:
                monitor.terminate()
                try:
                    monitor.wait(timeout=STOP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    monitor.kill()
                    monitor.wait()


if __name__ == "__main__":
    sys.exit(main())
