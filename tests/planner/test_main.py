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
    forecast = write(SMALL_FORECAST)
    config = str(REPO / "config" / "default.yaml")
    code = main([str(forecast), "--config", config, "--out", str(out), "--seeds", "2"])
    printed = capsys.readouterr().out
    assert code == 0
    for fragment in (
        "us-east-1",
        "us-west-2",
        "inf2.48xlarge",
        "trn1.32xlarge",
        "headroom",  # table headers wrap: their words, and the columns themselves in test_report.py
        "SLO crossed",
        "region lost",
        "USD/hour",
        "USD/M",
        "seeds",
        "total",
        "Event cost over its 24-hour window",
        "Region-loss premium",
        "(the knee)",
        "make plan-plot",
    ):
        assert fragment in " ".join(printed.split()), fragment
    written = out.read_text()
    assert "config/default.yaml" in written
    # The header records what the overlay was made from.
    assert f"# forecast: {forecast}" in written
    assert f"# CONFIG: {REPO / 'config' / 'default.yaml'}" in written
    assert f"# output: {out}" in written
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


def test_without_out_it_says_before_writing_into_the_configs_folder_and_names_the_file(
    write, tmp_path: Path, capsys
) -> None:
    config = write(f"base: {REPO / 'config' / 'default.yaml'}\n", "mine.yaml")
    assert main([str(write(SMALL_FORECAST)), "--config", str(config), "--seeds", "1"]) == 0
    printed = capsys.readouterr().out
    expected = tmp_path / "spring-sale.yaml"
    before = printed.index(f"writing the overlay into the config's folder as {expected}")
    assert before < printed.index(f"wrote {expected}")
    assert expected.exists()


def test_a_published_case_study_reports_its_per_chip_rate_against_the_profiles(write, capsys) -> None:
    forecast = write(
        SMALL_FORECAST.replace("peak_requests_per_second: 40", "peak_tokens_per_minute: 2760000")
        + "published: {chips: 80000, source: a blog}\n"
    )
    assert main([str(forecast), "--dry-run", "--seeds", "1"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "Published case (a blog):" in printed
    assert "on 80,000 chips is" in printed and "tokens/s per chip" in printed
    assert "Why they differ" in printed
