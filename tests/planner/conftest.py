from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# A small forecast the planner sizes in a few seconds.
SMALL_FORECAST = """\
event: {name: spring-sale, start: "2027-03-01T00:00:00Z", end: "2027-03-02T00:00:00Z"}
slo: {ttft_p99_ms: 1000}
regions:
  us-east-1:
    peak_requests_per_second: 40
    prompt_tokens: {mean: 900, p99: 3000}
    output_tokens: {mean: 250, p99: 900}
  us-west-2:
    peak_requests_per_second: 20
    prompt_tokens: {mean: 900, p99: 3000}
    output_tokens: {mean: 250, p99: 900}
survive_region_loss: true
"""


@pytest.fixture
def write(tmp_path: Path):
    def _write(text: str, name: str = "forecast.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return _write
