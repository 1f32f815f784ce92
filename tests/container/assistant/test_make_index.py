"""`make index` as a shop runs it: the bad-row limits are make variables, and the error names them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.container.conftest import ARTIFACTS_BUCKET

REPO_DIR = Path(__file__).resolve().parents[3]
GOOD_ROWS = 18
BAD_ROWS = 2


def _catalog(path: Path) -> Path:
    """20 rows, 2 of them bad (no title; a price that is not a number): 10%, above the 1% default."""
    rows = [f"SKU-{number},Tent model {number},{20 + number}\n" for number in range(GOOD_ROWS)]
    rows += ["SKU-90,,10\n", "SKU-91,Mystery box,ten dollars\n"]
    path.write_text("id,title,price\n" + "".join(rows), encoding="utf-8")
    return path


def _make_index(tmp_path: Path, *variables: str) -> subprocess.CompletedProcess[str]:
    # -o serve-env: the test already runs in the serving environment; make must not try to reinstall it.
    return subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-s",
            "-o",
            "serve-env",
            "index",
            f"CATALOG={_catalog(tmp_path / 'products.csv')}",
            f"INDEX_DIR={tmp_path / 'index'}",
            f"SERVE_VENV={Path(sys.executable).parent.parent}",
            *variables,
        ],
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_default_limit_refuses_and_names_the_make_variable(tmp_path: Path) -> None:
    result = _make_index(tmp_path)
    assert result.returncode != 0
    assert "2 of 20 rows are bad, above the 1.0% allowed" in result.stderr
    assert "make index MAX_BAD_FRACTION=" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("variables", "indexed"),
    [(("MAX_BAD_FRACTION=0.1",), True), (("MAX_BAD_FRACTION=0.1", "MAX_BAD_ROWS=1"), False)],
)
def test_the_limits_are_make_variables(tmp_path: Path, variables: tuple[str, ...], indexed: bool) -> None:
    result = _make_index(tmp_path, *variables)
    if indexed:
        assert result.returncode == 0, result.stderr
        assert f"indexed {GOOD_ROWS} products" in result.stdout
        assert f"skipped {BAD_ROWS} bad rows" in result.stdout
    else:
        assert result.returncode != 0
        assert "more than 1 bad rows" in result.stderr and "make index MAX_BAD_ROWS=" in result.stderr


def test_a_limit_out_of_range_names_the_make_variable(tmp_path: Path) -> None:
    result = _make_index(tmp_path, "MAX_BAD_FRACTION=5")
    assert result.returncode != 0
    assert "MAX_BAD_FRACTION=" in result.stderr and "between 0 and 1" in result.stderr


def test_upload_writes_a_new_build_then_the_pointer(tmp_path: Path, artifacts_bucket) -> None:
    """The command behind `make index UPLOAD=`, against moto's S3."""
    from assistant.retrieve import main
    from entrypoint.s3_fetch import S3Location, current_build

    catalog = _catalog(tmp_path / "products.csv")
    arguments = ["--catalog", str(catalog), "--index", str(tmp_path / "index"), "--no-progress"]
    arguments += ["--max-bad-fraction", "0.1", "--upload", f"s3://{ARTIFACTS_BUCKET}/catalog"]
    assert main(arguments) == 0
    build = current_build(artifacts_bucket, S3Location(ARTIFACTS_BUCKET, "catalog"))
    assert build is not None and build.location.prefix.startswith("catalog/builds/")
    keys = [item["Key"] for item in artifacts_bucket.list_objects_v2(Bucket=ARTIFACTS_BUCKET)["Contents"]]
    assert "catalog/current.json" in keys
    assert all(key.startswith(f"{build.location.prefix}/") for key in keys if key != "catalog/current.json")
