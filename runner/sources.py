"""Reading user files (YAML and JSON) while remembering where every key came from.

Validation errors must name the file, the line and the key path. PyYAML's composed
node tree carries line marks; we walk it once to build ``{key path: line}`` beside
the plain Python data, so pydantic's error locations can be mapped back to lines.
JSON is parsed by the same loader (YAML 1.1 accepts it), so catalogues and case
files in JSON get line numbers too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml
from pydantic import BaseModel, ValidationError

from runner.errors import UserError

try:  # the C loader is ~10x faster; fall back where libyaml is absent
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


@dataclass
class Source:
    """Parsed data of one file plus the line of every key path in it."""

    path: Path
    data: Any
    lines: dict[tuple, int] = field(default_factory=dict)
    sha256: str = ""

    def line_of(self, key_path: Iterable[Any]) -> int | None:
        key = tuple(key_path)
        while key:  # fall back to the nearest enclosing key that has a line
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return self.lines.get((), None)


def _walk(node: yaml.Node, path: tuple, lines: dict[tuple, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(value_node, path + (key,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), lines)


def load_source(path: Path, *, what: str) -> Source:
    """Read and parse ``path``; every failure is a located ``UserError``."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{what} not found", file=path, hint="check the path; relative paths are resolved against the sweep file's folder") from None
    except OSError as exc:
        raise UserError(f"cannot read {what}: {exc.strerror}", file=path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} is not UTF-8 text (byte {exc.start})", file=path) from None
    try:
        node = yaml.compose(text, Loader=_Loader)
        data = yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise UserError(f"{what} does not parse: {exc.problem or exc.context}", file=path, line=line) from None
    except yaml.YAMLError as exc:
        raise UserError(f"{what} does not parse: {exc}", file=path) from None
    lines: dict[tuple, int] = {}
    if node is not None:
        _walk(node, (), lines)
    return Source(path=path, data=data, lines=lines, sha256=hashlib.sha256(raw).hexdigest())


def _describe(err: dict[str, Any]) -> str:
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    msg = err.get("msg", "invalid value")
    value = err.get("input")
    if kind not in ("model_type",) and isinstance(value, (str, int, float, bool)):
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return f"{msg}, got {shown}"
    return msg


def validate(model: type[BaseModel], data: Any, source: Source, *, prefix: tuple = (), context: dict | None = None) -> Any:
    """Validate ``data`` (found at ``prefix`` inside ``source``) into ``model``.

    The first error becomes a ``UserError`` with file, line and key path; further
    errors are counted in the message so the user knows there is more to fix.
    """
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        loc = prefix + tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        # pydantic puts the discriminator tag into loc for tagged unions; drop it
        loc = tuple(p for i, p in enumerate(loc) if not (i > 0 and isinstance(loc[i - 1], int) and isinstance(p, str) and p in _TAGS))
        more = f" (+{len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        raise UserError(_describe(first) + more, file=source.path, line=source.line_of(loc), key_path=loc) from None


_TAGS: set[str] = set()


def register_union_tags(tags: Iterable[str]) -> None:
    """Discriminator values that pydantic inserts into error locations."""
    _TAGS.update(tags)
