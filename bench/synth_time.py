"""Benchmark: wall time of `make synth` (default config) against an empty CDK app through the same
pinned CLI, in the same run, alternating rounds. Prints medians and the ratio.

    .venv/bin/python bench/synth_time.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EMPTY_APP = """\
import aws_cdk as cdk

app = cdk.App()
cdk.Stack(app, "Empty")
app.synth()
"""
OFFLINE = {
    "CDK_DISABLE_CLI_TELEMETRY": "1",
    "CDK_DISABLE_VERSION_CHECK": "1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
}


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, **OFFLINE}
    python = str(REPO / ".venv" / "bin" / "python")
    with tempfile.TemporaryDirectory() as scratch:
        empty_app = Path(scratch) / "empty_app.py"
        empty_app.write_text(EMPTY_APP)
        empty = [
            "npx",
            "--no-install",
            "cdk",
            "--no-notices",
            "synth",
            "--quiet",
            "--app",
            f"{python} {empty_app}",
            "-o",
            str(Path(scratch) / "cdk.out"),
        ]
        kit = ["make", "--no-print-directory", "synth"]
        timed(kit, env)  # warm-up: venv/node checks and file caches, not measured
        kit_times, empty_times = [], []
        for round_number in range(1, args.rounds + 1):
            kit_times.append(timed(kit, env))
            empty_times.append(timed(empty, env))
            print(
                f"round {round_number}: make synth {kit_times[-1]:.2f} s, empty app {empty_times[-1]:.2f} s"
            )
    kit_median, empty_median = statistics.median(kit_times), statistics.median(empty_times)
    print(f"median over {args.rounds} rounds:")
    config = os.environ.get("CONFIG", "config/default.yaml")
    stacks = len(list((REPO / "cdk.out").glob("*.template.json")))
    print(f"  make synth ({config}, {stacks} stacks): {kit_median:.2f} s")
    print(f"  empty CDK app (one empty stack):       {empty_median:.2f} s")
    print(f"  ratio make synth / empty app:          {kit_median / empty_median:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
