"""`python -m planner` (what `make plan` runs): a table and an overlay, or a clear error and no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from planner.__main__ import main
from settings.loader import load_settings

from .conftest import REPO, SMALL_FORECAST


def test_plan_prints_the_fleets_and_writes_the_overlay(write, tmp_path: Path, capsys) -> None:
    out = tmp_path / "spring-sale.yaml"
    code = main(
        [str(write(SMALL_FORECAST)), "--config", str(REPO / "config" / "default.yaml"), "--out", str(out)]
    )
    printed = capsys.readouterr().out
    assert code == 0
    for fragment in (
        "us-east-1",
        "us-west-2",
        "inf2.48xlarge",
        "trn1.32xlarge",
        "headroom",
        "USD/hour",
        "total",
    ):
        assert fragment in printed
    assert "config/default.yaml" in out.read_text()
    regions = load_settings(out).events[0].regions
    assert set(regions) == {"us-east-1", "us-west-2"}
    assert regions["us-east-1"]["inf2.48xlarge"].min >= 2  # never below the config's own minimum


def test_a_bad_forecast_exits_non_zero_with_the_message_and_no_traceback(write) -> None:
    bad = write(SMALL_FORECAST.replace("second: 40", "second: -40"))
    result = subprocess.run(
        [sys.executable, "-m", "planner", str(bad), "--config", "config/default.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "planner input error:" in result.stderr and "cannot be negative" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_forecast_is_named(capsys) -> None:
    assert main(["nope.yaml"]) == 1
    assert "nope.yaml: config file not found" in capsys.readouterr().err


def test_the_overlay_never_overwrites_its_own_base(write, capsys) -> None:
    config = REPO / "config" / "default.yaml"
    assert main([str(write(SMALL_FORECAST)), "--config", str(config), "--out", str(config), "--dry-run"]) == 1
    assert "would overwrite the config" in capsys.readouterr().err


def test_a_missing_profile_is_named(write, capsys) -> None:
    assert main([str(write(SMALL_FORECAST)), "--profile", "measured.yaml", "--dry-run"]) == 1
    assert "planner input error:\nmeasured.yaml: config file not found" in capsys.readouterr().err
