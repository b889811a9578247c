"""Reading user files (YAML and JSON) while remembering where every key came from.

Validation errors must name the file, the line and the key path. PyYAML's composed
node tree carries line marks; we walk it once to build ``{key path: line}`` beside
the plain Python data, so pydantic's error locations can be mapped back to lines.
JSON is parsed by the same loader (YAML 1.1 accepts it), so catalogues and case
files in JSON get line numbers too.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from runner.core.errors import UserError

try:  # the C loader is ~10x faster; fall back where libyaml is absent
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


@dataclass
class Source:
    """Parsed data of one file plus the line of every key path in it."""

    path: Path
    data: Any
    lines: dict[tuple[Any, ...], int] = field(default_factory=dict)
    sha256: str = ""

    def line_of(self, key_path: Iterable[Any]) -> int | None:
        key = tuple(key_path)
        while key:  # fall back to the nearest enclosing key that has a line
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return self.lines.get((), None)


def _walk(node: yaml.Node, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(value_node, path + (key,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), lines)


def read_text(path: Path, *, what: str) -> tuple[str, bytes]:
    """The file's text and raw bytes; a missing, unreadable or non-UTF-8 file is a located ``UserError``."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{what} not found", file=path, hint="check the path; relative paths are resolved against the sweep file's folder") from None
    except OSError as exc:
        raise UserError(f"cannot read {what}: {exc.strerror}", file=path) from None
    try:
        return raw.decode("utf-8"), raw
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} is not UTF-8 text (byte {exc.start})", file=path) from None


def load_source(path: Path, *, what: str) -> Source:
    """Read and parse ``path``; every failure is a located ``UserError``."""
    text, raw = read_text(path, what=what)
    try:
        node = yaml.compose(text, Loader=_Loader)
        data = yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise UserError(f"{what} does not parse: {exc.problem or exc.context}", file=path, line=line) from None
    except yaml.YAMLError as exc:
        raise UserError(f"{what} does not parse: {exc}", file=path) from None
    lines: dict[tuple[Any, ...], int] = {}
    if node is not None:
        _walk(node, (), lines)
    return Source(path=path, data=data, lines=lines, sha256=hashlib.sha256(raw).hexdigest())


def _model_at(model: Any, loc: tuple[Any, ...], data: Any) -> type[BaseModel] | None:
    """The pydantic model that validates the mapping at ``loc`` (to list its valid keys)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            data = data[part] if isinstance(data, list) and part < len(data) else None
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            return None
        current = current.model_fields[part].annotation
        data = data.get(part) if isinstance(data, dict) else None
        current = _unwrap(current, data)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any, data: Any) -> Any:
    """Strip Optional / list / Annotated / tagged unions down to the model that applies to ``data``."""
    for _ in range(6):
        args = get_args(annotation)
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = args[0]
        elif origin in (list, tuple):
            annotation = args[0] if args else Any
            data = data[0] if isinstance(data, list) and data else None
        elif origin in (Union, UnionType):
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            kind = data.get("kind") if isinstance(data, dict) else None
            match = [m for m in models if "kind" in m.model_fields and kind in get_args(m.model_fields["kind"].annotation)]
            annotation = (match or models)[0] if match or models else type(None)
        else:
            break
    return annotation


def _describe(err: Mapping[str, Any], model: Any = None, data: Any = None) -> str:
    kind = err.get("type", "")
    if kind == "union_tag_invalid":
        ctx = err.get("ctx", {})
        return f"unknown {ctx.get('discriminator', 'kind').strip(chr(39))} {ctx.get('tag')!r} (expected one of: {ctx.get('expected_tags')})"
    if kind == "extra_forbidden":
        loc = _strip_tags(tuple(err["loc"]))
        owner = _model_at(model, loc[:-1], data) if model is not None else None
        if owner is None:
            return "unknown key"
        valid = list(owner.model_fields)
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"unknown key ({hint}valid keys: {', '.join(valid)})"
    if kind == "missing":
        return "required key is missing"
    msg = err.get("msg", "invalid value")
    value = err.get("input")
    if kind not in ("model_type",) and isinstance(value, (str, int, float, bool)):
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return f"{msg}, got {shown}"
    return str(msg)


def validate(model: type[BaseModel], data: Any, source: Source, *, prefix: tuple[Any, ...] = (),
             context: dict[str, Any] | None = None) -> Any:
    """Validate ``data`` (found at ``prefix`` inside ``source``) into ``model``.

    The first error becomes a ``UserError`` with file, line and key path; further
    errors are counted in the message so the user knows there is more to fix.
    """
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        loc = prefix + _strip_tags(tuple(first["loc"]))
        more = f" (+{len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        raise UserError(_describe(first, model, data) + more, file=source.path, line=source.line_of(loc), key_path=loc) from None


_TAGS: set[str] = set()


def _strip_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop what pydantic inserts into error locations: tagged-union tags and validator names."""
    loc = tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))
    return tuple(p for i, p in enumerate(loc)
                 if not (i > 0 and isinstance(loc[i - 1], int) and isinstance(p, str) and p in _TAGS))


def register_union_tags(tags: Iterable[str]) -> None:
    """Discriminator values that pydantic inserts into error locations."""
    _TAGS.update(tags)
