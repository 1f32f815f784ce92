"""Which serving test modules can pass on one vLLM version and fail on the other.

`make test` runs the serving suite whole on one vLLM version and, on the other, only the modules marked
`vllm_version`: a test whose code never reaches what differs between the two serving environments runs the
same code on the same packages in both, so running it twice proves nothing. This module decides, from the
sources alone (ast), which modules must carry the mark; tests/test_vllm_version_marks.py holds each module's
mark to it, so a new test that reaches vLLM cannot miss the second version.

What differs between the two environments (`pip list` of .venv-serve and .venv-serve-0.13, compared): vLLM
and the packages it pins, of which the serving code imports torch, transformers and tokenizers
(huggingface_hub comes with transformers). Everything else it imports (numpy, tritonclient, tantivy,
pydantic, aiohttp, grpcio, boto3, moto, pytest, hypothesis) is pinned the same in both environments.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.test_imports import _imported_modules, project_modules

# Top-level import names whose distribution differs between the two serving environments.
VERSIONED_IMPORTS = frozenset({"vllm", "torch", "transformers", "tokenizers", "huggingface_hub"})
# A real Triton server loads the vLLM backend: every test that starts one depends on the version.
SERVER_MODULES = frozenset({"local.triton_server"})
# Session fixtures (tests/container/conftest.py) that start Triton with vLLM or build the tiny model with
# transformers and torch.
VERSIONED_FIXTURES = frozenset({"triton", "demo_assets", "shop_index"})
# `python -m assistant.retrieve` run by a test is that module's code too.
_MODULE_NAME = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+$")


def _imports_versioned(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        if any(name.split(".")[0] in VERSIONED_IMPORTS for name in names):
            return True
    return False


def _named_modules(tree: ast.Module, known: Mapping[str, Path]) -> set[str]:
    """Project modules a string constant names (the module of a `python -m` subprocess)."""
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _MODULE_NAME.match(node.value)
        and node.value in known
    }


def _requested_fixtures(tree: ast.Module) -> set[str]:
    """Parameter names of every function: the fixtures its tests and fixtures ask for."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.update(arg.arg for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs])
    return names


class _Walk:
    """Why each project module's code can behave differently on the two vLLM versions (None: it cannot),
    from the module itself or the modules it imports or runs, parsed only as far as the walk reaches them.
    Every import counts, those inside functions too: a late import still runs when the test calls it."""

    def __init__(self, modules: Mapping[str, Path]) -> None:
        self.modules = modules
        self.trees: dict[str, ast.Module] = {}
        self.reasons: dict[str, str | None] = {}

    def tree(self, name: str) -> ast.Module:
        if name not in self.trees:
            path = self.modules[name]
            self.trees[name] = ast.parse(path.read_text(), filename=str(path))
        return self.trees[name]

    def reason(self, name: str) -> str | None:
        if name in self.reasons:
            return self.reasons[name]
        self.reasons[name] = None  # the project has no import circle (tests/test_imports.py)
        tree = self.tree(name)
        if name in SERVER_MODULES:
            found = f"{name} starts a Triton server with the vLLM backend"
        elif _imports_versioned(tree):
            found = f"{name} imports vllm, torch, transformers or tokenizers"
        elif name.rpartition(".")[2] == "conftest":
            # What a conftest starts or builds, its fixtures do, and those are checked by name.
            found = None
        else:
            targets = _imported_modules(tree, name, self.modules[name].name == "__init__.py", self.modules)
            targets |= _named_modules(tree, self.modules)
            found = next(
                (f"{name} -> {why}" for why in map(self.reason, sorted(targets)) if why is not None), None
            )
        self.reasons[name] = found
        return found


def files_needing_the_mark(test_files: Iterable[Path], roots: tuple[Path, ...]) -> dict[Path, str]:
    """Each test file whose outcome can depend on the vLLM version -> why."""
    modules = project_modules(roots)
    walk = _Walk(modules)
    by_path = {path.resolve(): name for name, path in modules.items()}
    needing: dict[Path, str] = {}
    for path in test_files:
        name = by_path[path.resolve()]
        fixtures = sorted(_requested_fixtures(walk.tree(name)) & VERSIONED_FIXTURES)
        why = walk.reason(name)
        if why is not None:
            needing[path] = why
        elif fixtures:
            needing[path] = f"{name} asks for the fixture {fixtures[0]} (tests/container/conftest.py)"
    return needing


def carries_mark(path: Path, mark: str) -> bool:
    """Whether the module sets `pytestmark` to the mark, alone or in a list."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets
        ):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            if any(ast.unparse(value) == f"pytest.mark.{mark}" for value in values):
                return True
    return False
