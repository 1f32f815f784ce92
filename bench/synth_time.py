"""Benchmark: wall time of `make synth` (default config) against an empty CDK app through the same
pinned CLI, in the same run, alternating rounds. Prints medians and the ratios.

`make synth` skips aws-cdk-lib's built-in CloudFormation validation (cfn-lint checks the templates in
`make lint` and the tests), so the empty app is timed both ways (the CLI's default, and without the
validation like-for-like), and the kit is also timed with the validation, to show what it costs.

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
# The smallest app the same CLI and cdk.json flags accept: the default-rules validation refuses a stack
# with no resources, so it holds one that does nothing.
EMPTY_APP = """\
import aws_cdk as cdk

app = cdk.App()
stack = cdk.Stack(app, "Empty")
cdk.CfnWaitConditionHandle(stack, "Nothing")
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
        config = os.environ.get("CONFIG", "config/default.yaml")
        commands = {
            "make synth": ["make", "--no-print-directory", "synth"],
            "empty app": empty,
            "empty app, no validation": [*empty, "--no-validation"],
            "kit with validation": [
                *empty[:6],
                "-c",
                f"config={config}",
                "-o",
                str(Path(scratch) / "kit.out"),
            ],
        }
        timed(commands["make synth"], env)  # warm-up: venv/node checks and file caches, not measured
        times: dict[str, list[float]] = {name: [] for name in commands}
        for round_number in range(1, args.rounds + 1):
            for name, command in commands.items():
                times[name].append(timed(command, env))
            print(f"round {round_number}: " + ", ".join(f"{name} {t[-1]:.2f} s" for name, t in times.items()))
    median = {name: statistics.median(values) for name, values in times.items()}
    stacks = len(list((REPO / "cdk.out").glob("*.template.json")))
    kit, empty_default, empty_bare = (
        median["make synth"],
        median["empty app"],
        median["empty app, no validation"],
    )
    rows = [
        (f"make synth ({config}, {stacks} stacks, no built-in validation)", f"{kit:.2f} s"),
        ("kit through the CLI with the built-in validation", f"{median['kit with validation']:.2f} s"),
        ("empty CDK app (one stack, one resource)", f"{empty_default:.2f} s"),
        ("empty CDK app without the built-in validation", f"{empty_bare:.2f} s"),
        ("ratio make synth / empty app", f"{kit / empty_default:.2f}x"),
        ("ratio like for like, both without the validation", f"{kit / empty_bare:.2f}x"),
        (
            "ratio like for like, both with the validation",
            f"{median['kit with validation'] / empty_default:.2f}x",
        ),
    ]
    print(f"median over {args.rounds} rounds:")
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"  {label + ':':<{width + 1}} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
