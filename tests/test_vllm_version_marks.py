"""`make test` runs the serving tests marked `vllm_version` on the second vLLM version, and only those: each
serving test module that can reach what differs between the two environments must carry the mark, and no
other (tests/vllm_dependence.py decides which, from the sources)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.test_imports import IMPORT_ROOTS, ROOT
from tests.vllm_dependence import carries_mark, files_needing_the_mark

MARK = "vllm_version"
SERVING_TESTS = sorted((ROOT / "tests" / "container").rglob("test_*.py"))


@pytest.fixture(scope="module")
def needing() -> dict[Path, str]:
    return files_needing_the_mark(SERVING_TESTS, IMPORT_ROOTS)


def test_every_serving_test_that_can_depend_on_the_vllm_version_is_marked(needing: dict[Path, str]) -> None:
    missing = [
        f"{path.relative_to(ROOT)}: {why}" for path, why in needing.items() if not carries_mark(path, MARK)
    ]
    assert not missing, f"add `pytestmark = pytest.mark.{MARK}` to:\n" + "\n".join(missing)


def test_no_serving_test_runs_twice_for_nothing(needing: dict[Path, str]) -> None:
    extra = [
        str(path.relative_to(ROOT))
        for path in SERVING_TESTS
        if carries_mark(path, MARK) and path not in needing
    ]
    assert not extra, f"marked {MARK} but reach neither vLLM, torch, transformers nor a server: {extra}"


def test_the_walk_sees_both_kinds_and_leaves_pure_tests_out(needing: dict[Path, str]) -> None:
    tests = ROOT / "tests" / "container"
    assert tests / "serving" / "test_models_on_triton.py" in needing  # a real server
    assert tests / "serving" / "test_engine_settings.py" in needing  # imports vllm itself
    assert (
        tests / "assistant" / "test_catalog.py" not in needing
    )  # the catalog: numpy and the standard library
    assert 0 < len(needing) < len(SERVING_TESTS)


def _needing(tmp_path: Path, files: Mapping[str, str]) -> set[str]:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    tests = sorted((tmp_path / "tests").rglob("test_*.py"))
    needing = files_needing_the_mark(tests, (tmp_path, tmp_path / "container"))
    return {path.name for path in needing}


PACKAGE = {"tests/__init__.py": "", "container/app/__init__.py": ""}


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {
                "container/app/engine.py": "def run():\n    import vllm\n",
                "container/app/front.py": "from app.engine import run\n",
                "tests/test_front.py": "from app.front import run\n",
                "tests/test_pure.py": "import json\n",
            },
            {"test_front.py"},
            id="a-late-import-two-modules-away",
        ),
        pytest.param(
            {
                "container/app/tool.py": "from transformers import AutoTokenizer\n",
                "tests/test_subprocess.py": "ARGS = ['python', '-m', 'app.tool']\n",
            },
            {"test_subprocess.py"},
            id="a-module-run-with-python-m",
        ),
        pytest.param(
            {
                "container/local/__init__.py": "",
                "container/local/triton_server.py": "import subprocess\n",
                "tests/conftest.py": "from local.triton_server import TritonServer\n",
                "tests/test_helper_only.py": "from tests.conftest import TritonServer as _\n",
                "tests/test_fixture.py": "def test_x(triton):\n    assert triton\n",
            },
            {"test_fixture.py"},
            id="a-server-through-its-fixture-not-through-conftest",
        ),
    ],
)
def test_what_reaches_a_versioned_package_or_a_server(
    tmp_path: Path, files: Mapping[str, str], expected: set[str]
) -> None:
    assert _needing(tmp_path, {**PACKAGE, **files}) == expected


def test_the_mark_is_read_alone_or_in_a_list(tmp_path: Path) -> None:
    alone = tmp_path / "alone.py"
    alone.write_text("import pytest\npytestmark = pytest.mark.vllm_version\n")
    listed = tmp_path / "listed.py"
    listed.write_text("import pytest\npytestmark = [pytest.mark.serving, pytest.mark.vllm_version]\n")
    other = tmp_path / "other.py"
    other.write_text("import pytest\npytestmark = pytest.mark.serving\n")
    assert carries_mark(alone, MARK) and carries_mark(listed, MARK) and not carries_mark(other, MARK)
