"""Config file -> Settings. Reads YAML (refusing duplicate keys), applies overlay files onto their base,
validates, and turns every failure into a ConfigError that names the file, line, key path and problem."""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from settings.quotas import default_quota_warnings
from settings.schema import Settings

KeyPath = tuple[str | int, ...]
Model = TypeVar("Model", bound=BaseModel)

# An overlay names the file it changes; lists of fleets merge by instance type so an overlay can
# raise one fleet's limits without restating the others, and events merge by name, so an overlay adds
# or changes one event and keeps the base's others.
BASE_KEY = "base"
LIST_MERGE_KEYS = ("instance_type", "name")


class ConfigError(Exception):
    """A user mistake in a config file; str() is the whole message, one problem per line."""


@dataclass
class Document:
    path: Path
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)


def format_path(path: KeyPath) -> str:
    text = ""
    for part in path:
        if part == "[key]":  # pydantic's marker for a dict key that failed validation
            continue
        if isinstance(part, int) or "=" in part:
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or "(top level)"


def _walk_node(
    node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], problems: list[str], source: Path
) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in seen:
                problems.append(
                    f"{source}:{line}: {format_path((*path, key))}: duplicate key (first set on line "
                    f"{seen[key]}); YAML would silently keep only the last one"
                )
            seen[key] = line
            lines[(*path, key)] = line
            _walk_node(value_node, (*path, key), lines, problems, source)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk_node(item, (*path, index), lines, problems, source)


def read_document(path: Path) -> Document:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read config file: {error}") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ConfigError(f"{path}: config file is empty")
        lines: dict[KeyPath, int] = {}
        problems: list[str] = []
        _walk_node(node, (), lines, problems, path)
        if problems:
            raise ConfigError("\n".join(problems))
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: not valid YAML: {error.problem or error.context}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, got {type(data).__name__}")
    return Document(path, data, lines)


def _merge_lists(base: list[Any], overlay: list[Any]) -> list[Any]:
    for key in LIST_MERGE_KEYS:
        if all(isinstance(item, dict) and key in item for item in [*base, *overlay]):
            merged = {item[key]: item for item in base}
            for item in overlay:
                merged[item[key]] = merge(merged[item[key]], item) if item[key] in merged else item
            return list(merged.values())
    return overlay


def merge(base: Any, overlay: Any) -> Any:
    """Overlay wins; mappings merge key by key, keyed lists item by item, other lists are replaced."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            merged[key] = merge(base[key], value) if key in base else value
        return merged
    if isinstance(base, list) and isinstance(overlay, list):
        return _merge_lists(base, overlay)
    return overlay


def load_documents(path: Path) -> list[Document]:
    """The file and the chain of bases it names, overlay first."""
    chain: list[Document] = []
    current: Path | None = path
    while current is not None:
        if any(doc.path.resolve() == current.resolve() for doc in chain):
            names = " -> ".join(str(doc.path) for doc in chain)
            raise ConfigError(f"{path}: base files form a loop: {names} -> {current}")
        document = read_document(current)
        chain.append(document)
        base = document.data.pop(BASE_KEY, None)
        if base is None:
            current = None
        elif not isinstance(base, str) or not base:
            line = document.lines.get((BASE_KEY,), 0)
            raise ConfigError(f"{current}:{line}: base: must be the path of another config file")
        else:
            current = (current.parent / base) if not Path(base).is_absolute() else Path(base)
            if not current.exists():
                line = document.lines.get((BASE_KEY,), 0)
                raise ConfigError(
                    f"{document.path}:{line}: base: file {base!r} not found next to {document.path.name}"
                )
    return chain


def _strip(annotation: Any) -> Any:
    """Annotated[X, ...] and X | None -> X."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        else:
            return annotation


def _known_keys(model: type[BaseModel], loc: KeyPath) -> list[str]:
    """Field names allowed where loc's last key sits, for 'did you mean' hints."""
    current: Any = model
    for part in loc[:-1]:
        current = _strip(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(str(part))
            current = info.annotation if info else None
        elif typing.get_origin(current) in (dict, list):
            current = typing.get_args(current)[-1]
        else:
            return []
    current = _strip(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _describe(error: dict[str, Any], known: list[str]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        key = str(error["loc"][-1])
        close = difflib.get_close_matches(key, known, n=1)
        hint = (
            f"; did you mean {close[0]!r}?" if close else (f"; allowed: {', '.join(known)}" if known else "")
        )
        return f"unknown key{hint}"
    if kind == "missing":
        return "required key is missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    # pydantic's own wording ("Input should be less than or equal to 1") in the config's plain words.
    message = message.replace("Input should be", "must be", 1)
    value = error.get("input")
    if kind.endswith("_type") or kind.endswith("_parsing"):
        message += f", got {value!r} ({type(value).__name__})"
        if kind == "string_type" and isinstance(value, int | float):
            message += "; put it in quotes"
    elif kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        message += f", got {value!r}"
    return message


def _semantic(path: KeyPath, data: Any) -> KeyPath:
    """Replace indexes of keyed list items by their key, so a merged list's item finds its own line in
    whichever file set it."""
    result: list[str | int] = []
    for part in path:
        if isinstance(part, int) and isinstance(data, list) and 0 <= part < len(data):
            data = data[part]
            keys = [k for k in LIST_MERGE_KEYS if isinstance(data, dict) and k in data]
            result.append(f"{keys[0]}={data[keys[0]]}" if keys else part)
        else:
            data = data.get(part) if isinstance(data, dict) else None
            result.append(part)
    return tuple(result)


def _line_of(loc: KeyPath, merged: Any, documents: list[Document]) -> tuple[Path, int | None]:
    wanted = _semantic(loc, merged)
    for end in range(len(wanted), -1, -1):
        for document in documents:
            lines = {_semantic(path, document.data): line for path, line in document.lines.items()}
            if wanted[:end] in lines:
                return document.path, lines[wanted[:end]]
    return documents[0].path, None


def _located(loc: KeyPath, message: str, merged: Any, documents: list[Document]) -> str:
    """'file:line: key.path: message', the one form of every error and warning."""
    source, line = _line_of(loc, merged, documents)
    where = f"{source}:{line}" if line else str(source)
    return f"{where}: {format_path(_semantic(loc, merged))}: {message}"


def validation_messages(
    error: ValidationError, merged: Any, documents: list[Document], model: type[BaseModel] = Settings
) -> list[str]:
    messages = []
    for item in error.errors():
        loc: KeyPath = tuple(item["loc"])
        described = _describe(dict(item), _known_keys(model, loc))
        messages.append(_located(loc, described, merged, documents))
    return messages


@dataclass(frozen=True)
class LoadedConfig:
    settings: Settings
    warnings: tuple[str, ...]  # "file:line: key.path: message", like errors, for what may fail at deploy
    # Same form: what the config needs above AWS's default account quotas (settings/quotas.py). Not turned
    # into errors by --strict: an account may have raised them, which the preflight reads.
    quota_warnings: tuple[str, ...] = ()
    # Same form: what a production deploy needs beyond a valid config (Settings.readiness_problems); warnings
    # like the others, errors under --strict, which `make deploy` uses.
    readiness: tuple[str, ...] = ()


def load_config(path: str | Path) -> LoadedConfig:
    """Read, merge and validate a config file; raises ConfigError naming every problem found."""
    documents = load_documents(Path(path))
    data: Any = {}
    for document in reversed(documents):
        data = merge(data, document.data)
    try:
        settings = Settings.model_validate(data)
    except ValidationError as error:
        raise ConfigError("\n".join(validation_messages(error, data, documents))) from None
    warnings = tuple(_located(loc, message, data, documents) for loc, message in settings.warnings())
    quota_warnings = tuple(
        _located(loc, message, data, documents) for loc, message in default_quota_warnings(settings)
    )
    readiness = tuple(
        _located(loc, message, data, documents) for loc, message in settings.readiness_problems()
    )
    return LoadedConfig(settings, warnings, quota_warnings, readiness)


def load_model(path: str | Path, model: type[Model]) -> tuple[Model, Document]:
    """One YAML file of another kind (a forecast, a performance profile), no base, validated into `model`
    with the same file:line: key-path errors as a config."""
    document = read_document(Path(path))
    try:
        return model.model_validate(document.data), document
    except ValidationError as error:
        messages = validation_messages(error, document.data, [document], model)
        raise ConfigError("\n".join(messages)) from None


def locate(document: Document, loc: KeyPath, message: str) -> str:
    """'file:line: key.path: message' for a problem found after validation (a rule across files)."""
    return _located(loc, message, document.data, [document])


def load_settings(path: str | Path) -> Settings:
    return load_config(path).settings
