"""The container health check: healthy while starting within the cold-start budget, unhealthy soon after
the server stops being ready.

ECS caps a health check's start period at 300 s and its retries at 10, so a plain readiness probe must
either fail hosts inside a long cold start or take minutes to notice a dead engine. This probe tells the
two apart: until the server has been ready once, a not-ready answer counts as starting (exit 0) for
COLD_START_BUDGET_SECONDS after the first probe; once it has been ready, any not-ready answer, refusal or
timeout is a failure (exit 1), so a few short retries take a dead host out within a minute.

    python3 -m entrypoint.healthcheck --port 8000 --cold-start-seconds 1800
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

STATE_DIR = Path("/tmp/serving-health")
FIRST_PROBE = "first-probe"  # holds the time of the first probe: the cold start is measured from it
READY_ONCE = "ready-once"  # exists once the server answered ready


def server_ready(port: int, timeout_s: float = 4.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=timeout_s) as reply:
            return reply.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def verdict(
    ready: bool, state_dir: Path, cold_start_s: float, now: Callable[[], float] = time.time
) -> tuple[int, str]:
    """(exit code, reason) for one probe, recording what the next probes need to know."""
    state_dir.mkdir(parents=True, exist_ok=True)
    first_probe = state_dir / FIRST_PROBE
    if not first_probe.exists():
        first_probe.write_text(str(now()))
    if ready:
        (state_dir / READY_ONCE).touch()
        return 0, "ready"
    if (state_dir / READY_ONCE).exists():
        return 1, "not ready after having been ready (engine dead or server stopping)"
    try:
        started = float(first_probe.read_text())
    except ValueError:
        started = now()
    waited = now() - started
    if waited < cold_start_s:
        return 0, f"starting ({waited:.0f} s of the {cold_start_s:.0f} s cold-start budget)"
    return 1, f"not ready {waited:.0f} s after the first probe (cold-start budget {cold_start_s:.0f} s)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="healthcheck", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--cold-start-seconds", type=float, required=True)
    parser.add_argument("--state-dir", type=Path, default=STATE_DIR)
    args = parser.parse_args(argv)
    code, reason = verdict(server_ready(args.port), args.state_dir, args.cold_start_seconds)
    print(reason)  # Docker keeps a health check's last output (docker inspect) for whoever looks
    return code


if __name__ == "__main__":
    sys.exit(main())
