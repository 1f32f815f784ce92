"""The AWS calls in the kit's code, found by reading it (AST), named as boto3 names them: "service:operation".

A call is an attribute call whose name is an operation of a service the code makes clients of (botocore's
own service models, installed with boto3, say which names are operations), `client.get_paginator("op")`
counting as "op". The services are those named as the first argument of a call to something called
`client` (`session.client("ecs", ...)`, `client("ssm", region)`). An operation more than one such service
has is told apart by the receiver's name (`ecs.get_paginator("list_services")` is ECS, not Service Quotas);
`get_paginator(variable)` counts the operation names the enclosing function spells out. A call the scan
cannot name is a problem to fix in the code (name the client after its service), never skipped silently."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Call:
    call: str  # "service:operation", e.g. "cloudwatch:describe_alarms"
    path: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@functools.cache
def _operations(service: str) -> frozenset[str]:
    import botocore.session
    from botocore import xform_name

    model = botocore.session.get_session().get_service_model(service)
    return frozenset(xform_name(name) for name in model.operation_names)


@functools.cache
def _services() -> frozenset[str]:
    import botocore.session

    return frozenset(botocore.session.get_session().get_available_services())


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def client_services(trees: Iterable[ast.AST]) -> set[str]:
    """Every service the code makes a client of, by a literal name."""
    found = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _callee(node).endswith("client") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and first.value in _services():
                    found.add(first.value)
    return found


def _receiver(node: ast.Call) -> str:
    """The name the client goes by: `ecs` in ecs.run_task, `dynamodb` in self.dynamodb.put_item."""
    value = node.func.value if isinstance(node.func, ast.Attribute) else None
    while isinstance(value, ast.Subscript | ast.Call):
        value = value.value if isinstance(value, ast.Subscript) else value.func
    if isinstance(value, ast.Attribute):
        return value.attr
    return value.id if isinstance(value, ast.Name) else ""


def _by_receiver(services: Iterable[str], receiver: str) -> list[str]:
    words = f"_{receiver.lower()}_"
    return [s for s in services if f"_{s.replace('-', '_')}_" in words]


def _functions(tree: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
    """(node, the outermost function holding it, or the module) for every node."""

    def walk(node: ast.AST, scope: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            inner = (
                child
                if scope is tree and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                else scope
            )
            yield child, inner
            yield from walk(child, inner)

    yield from walk(tree, tree)


def _strings(scope: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(scope) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def scan(files: Iterable[Path], root: Path) -> tuple[list[Call], list[str]]:
    """The AWS calls in `files` and the problems (calls the scan cannot name), each with file:line."""
    parsed = {path: ast.parse(path.read_text(), str(path)) for path in sorted(files)}
    services = client_services(parsed.values())
    calls: list[Call] = []
    problems: list[str] = []
    for path, tree in parsed.items():
        relative = path.relative_to(root).as_posix()
        for node, scope in _functions(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            where = f"{relative}:{node.lineno}"
            name = node.func.attr
            if name == "get_paginator":
                argument = node.args[0] if node.args else None
                if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                    names = [argument.value]
                else:
                    # An operation chosen at run time: those its function spells out, for its client.
                    candidates = _by_receiver(services, _receiver(node)) or sorted(services)
                    names = sorted({s for s in _strings(scope) for c in candidates if s in _operations(c)})
                    if not names:
                        problems.append(f"{where}: get_paginator of an operation the scan cannot read")
                        continue
            else:
                names = [name]
            for operation in names:
                owners = sorted(s for s in services if operation in _operations(s))
                if len(owners) > 1:
                    owners = _by_receiver(owners, _receiver(node))
                    if len(owners) != 1:
                        problems.append(
                            f"{where}: {operation} could be a call of several services; name its client "
                            "after its service (ecs, service_quotas, ...)"
                        )
                        continue
                if owners:
                    calls.append(Call(f"{owners[0]}:{operation}", relative, node.lineno))
    return calls, problems


def code_files(root: Path, folders: Iterable[str] = ("ops", "orchestrator")) -> list[Path]:
    return sorted(path for folder in folders for path in (root / folder).rglob("*.py"))
