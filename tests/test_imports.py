"""No import circle anywhere in the project: every module's imports, read from its source (ast), resolved to
the project's own modules, must form a graph without a cycle.

Two import roots: the repository (app.py, settings/, stacks/, planner/, ...) and container/ (the image's
`assistant`, `serving`, `entrypoint`, ...: the container puts container/ on its path). Every import counts,
those under `if TYPE_CHECKING:` and inside functions too: a circle that only type checking or a late
import keeps from failing is still two modules that each need the other, and the next edit trips it."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMPORT_ROOTS = (ROOT, ROOT / "container")
# Not the project's code: environments, generated output, the CDK CLI.
SKIPPED = {".venv", "node_modules", "cdk.out", "build", ".git", ".pytest_cache", ".ruff_cache", ".hypothesis"}


def project_modules(roots: tuple[Path, ...] = IMPORT_ROOTS) -> dict[str, Path]:
    """Dotted module name -> file, for every Python file under each import root (a nested root's files
    belong to it alone: container/serving/models.py is `serving.models`, not `container.serving.models`)."""
    modules: dict[str, Path] = {}
    for root in roots:
        nested = [other for other in roots if other != root and other.is_relative_to(root)]
        for path in sorted(root.rglob("*.py")):
            relative = path.relative_to(root)
            if any(part in SKIPPED or part.startswith(".venv") for part in relative.parts):
                continue
            if any(path.is_relative_to(other) for other in nested):
                continue
            parts = list(relative.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            assert name not in modules, f"{name} is both {modules[name]} and {path}"
            modules[name] = path
    return modules


def _imported_modules(tree: ast.Module, module: str, is_package: bool, known: Mapping[str, Path]) -> set[str]:
    """The project modules an import statement anywhere in the file names, absolute or relative: `from a
    import b` means the module a.b when there is one, else the name b from the module a."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}" if base else alias.name
                found.add(submodule if submodule in known else base)
    return {name for name in found if name in known and name != module}


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    return {
        name: _imported_modules(
            ast.parse(path.read_text(), filename=str(path)), name, path.name == "__init__.py", modules
        )
        for name, path in modules.items()
    }


def import_groups(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others (strongly connected
    components of more than one module; Tarjan's algorithm, iterative: import chains are deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle per group of modules that import each other, as the path that closes it."""
    return [_cycle_through(group, graph) for group in import_groups(graph)]


def _cycle_through(group: list[str], graph: Mapping[str, set[str]]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group (breadth first)."""
    members = set(group)
    start = group[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {group}")


def test_the_project_has_no_import_circle() -> None:
    graph = import_graph(project_modules())
    circles = [
        f"{' -> '.join(_cycle_through(group, graph))} (modules in this circle: {', '.join(group)})"
        for group in import_groups(graph)
    ]
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_every_part_of_the_project_is_walked() -> None:
    modules = project_modules()
    for expected in (
        "app",
        "planner.plan",
        "planner.inputs",
        "orchestrator.routing.policy",
        "serving.models",
    ):
        assert expected in modules
    assert not any(name.startswith(("container.", ".venv", "node_modules")) for name in modules)
    # The walk resolves imports, or an empty graph would pass: plan imports the simulator, for one.
    assert "planner.simulate" in import_graph(modules)["planner.plan"]


def _tree(tmp_path: Path, files: Mapping[str, str]) -> dict[str, set[str]]:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return import_graph(project_modules((tmp_path, tmp_path / "container")))


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {"pkg/__init__.py": "", "pkg/a.py": "from pkg.b import X\n", "pkg/b.py": "from pkg.a import Y\n"},
            ["pkg.a", "pkg.b", "pkg.a"],
            id="absolute",
        ),
        pytest.param(
            {
                "pkg/__init__.py": "",
                "pkg/a.py": "from .b import X\n",
                "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import Y\n",
            },
            ["pkg.a", "pkg.b", "pkg.a"],
            id="relative-and-type-checking",
        ),
        pytest.param(
            {
                "pkg/__init__.py": "",
                "pkg/a.py": "import pkg.b\n",
                "pkg/b.py": "from pkg import c\n",
                "pkg/c.py": "def late():\n    from pkg import a\n",
            },
            ["pkg.a", "pkg.b", "pkg.c", "pkg.a"],
            id="three-long-through-a-late-import",
        ),
        pytest.param(
            {
                "container/srv/__init__.py": "",
                "container/srv/x.py": "import srv.y\n",
                "container/srv/y.py": "import srv.x\n",
            },
            ["srv.x", "srv.y", "srv.x"],
            id="container-root",
        ),
    ],
)
def test_a_circle_is_found_and_named(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    assert import_cycles(_tree(tmp_path, files)) == [expected]


def test_imports_that_only_share_a_package_are_no_circle(tmp_path: Path) -> None:
    graph = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\n",
            "pkg/a.py": "A = 1\n",
            "pkg/b.py": "from pkg import a\nfrom pkg.a import A\n",
            "other.py": "import pkg.b\nimport json\n",
        },
    )
    assert graph["pkg.b"] == {"pkg.a"}
    assert graph["other"] == {"pkg.b"}
    assert import_cycles(graph) == []
