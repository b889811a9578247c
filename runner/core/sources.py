"""Reading user files (YAML and JSON) while remembering where every key came from.

Validation errors must name the file, the line and the key path. PyYAML's composed
node tree carries line marks; we walk it once to build ``{key path: line}`` beside
the plain Python data, so pydantic's error locations can be mapped back to lines.
``.json`` files are parsed as JSON (YAML 1.1 mangles some of it, e.g. escaped
surrogate pairs) and composed as YAML only for their line numbers.

Every file is hostile until read: it must be a regular file within the size cap
(``runner.core.safety``), its nesting at most ``_MAX_DEPTH`` levels (deeper input
crashes the C composer) and its aliases may add at most ``_MAX_ALIAS_NODES`` nodes
(an alias "billion laughs" otherwise expands exponentially in every walk of the
data). YAML 1.1 surprises are errors: a duplicate key (naming both lines), an
octal-looking or sexagesimal integer (``010`` is 8, ``1:30`` is 90), and a
boolean-looking value (``true``, ``yes``, ``on``) where a number is expected.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from runner.core.errors import UserError
from runner.core.safety import decode_utf8, read_capped

try:  # the C loader is ~10x faster; fall back where libyaml is absent
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader

KeyTuple = tuple[Any, ...]

#: deepest nesting of mappings and lists a user file may have
_MAX_DEPTH = 64
#: how many nodes alias references may add to a file beyond the nodes written in it
_MAX_ALIAS_NODES = 100_000
#: problems ``validate`` collects before it stops (the CLI's ``validate`` prints them all)
_MAX_PROBLEMS = 20


class Problems(UserError):
    """Several located problems at once; ``str()`` is the first with a count of the rest. ``every_line``: a
    command that prints only the first of a sweep's problems prints each of these (they are few and each says
    what to do about a different model)."""

    def __init__(self, problems: list[UserError], *, every_line: bool = False) -> None:
        self.problems = problems
        self.every_line = every_line
        first = problems[0]
        rest = len(problems) - 1
        more = (f"+{rest} more problem{'s' if rest > 1 else ''}; `trialgrid validate` lists them all")
        super().__init__(first.message, file=first.file, line=first.line, hint=more if rest else first.hint)
        self.key_path = first.key_path


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


_INT_TAG = "tag:yaml.org,2002:int"
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_OCTAL = re.compile(r"[-+]?(0[0-9_]+|0o[0-7_]+)")
_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+")


def _walk(node: yaml.Node, path: KeyTuple, lines: dict[KeyTuple, int], file: Path) -> None:
    """Record the line of every key path; refuse duplicate keys and YAML 1.1 integers."""
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag not in (_STR_TAG, _MERGE_TAG):
                # every key trialgrid reads is a name: a number, boolean, null or structure as a key is a typo (and
                # would reach the validators as something no error message can name)
                shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else f"a {key_node.id}"
                raise UserError(f"the key {str(shown)[:60]!r} is not a string (YAML reads it as "
                                f"{key_node.tag.rsplit(':', 1)[-1]})", file=file, line=line, key_path=path or None,
                                hint="keys are names: quote it, as in 'yes': or '1':")
            key = key_node.value
            if isinstance(key, str) and key in seen and key_node.tag != _MERGE_TAG:
                raise UserError(f"duplicate key {key!r} (first on line {seen[key]}, again on line {line}); "
                                "YAML would silently keep the last one", file=file, line=line, key_path=(*path, key),
                                hint="remove or rename one of them")
            if isinstance(key, str):
                seen[key] = line
            lines[(*path, key)] = line
            _walk(value_node, (*path, key), lines, file)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines, file)
    elif node.tag == _INT_TAG and not node.style:  # plain (the C loader says "", the Python one None)
        text = str(node.value)
        if _OCTAL.fullmatch(text) or _SEXAGESIMAL.fullmatch(text):
            what = "an octal number" if _OCTAL.fullmatch(text) else "a base-60 number"
            raise UserError(f"{text} reads as {what} in YAML 1.1, not as it looks", file=file,
                            line=node.start_mark.line + 1, key_path=path or None,
                            hint=f"write the number without leading zeros or colons, or quote it ('{text}') if it is a label")


def _prescan(text: str, file: Path, what: str) -> None:
    """Refuse nesting deeper than ``_MAX_DEPTH`` before the (recursive, C) composer sees it."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > _MAX_DEPTH:
                    raise UserError(f"{what} nests deeper than {_MAX_DEPTH} levels", file=file,
                                    line=event.start_mark.line + 1, hint="flatten it; no trialgrid file needs this")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError as exc:
        # PyYAML >= 6.0.4 has a nesting limit of its own: say it the same way whichever limit is hit first
        if "nesting depth" in str(exc):
            mark = getattr(exc, "problem_mark", None)
            raise UserError(f"{what} nests deeper than {_MAX_DEPTH} levels", file=file,
                            line=mark.line + 1 if mark is not None else None,
                            hint="flatten it; no trialgrid file needs this") from None
        return  # the composer reports it, with its line


def _check_expansion(root: yaml.Node, file: Path, what: str) -> None:
    """Refuse a node graph whose aliases add more than ``_MAX_ALIAS_NODES`` nodes (or refer to themselves)."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            children = _children(node)
            size[key] = 1 + sum(size[id(c)] for c in children)
            open_.discard(key)
            continue
        if key in size:
            continue
        if key in open_:
            raise UserError(f"{what} has an alias that refers to itself", file=file, line=node.start_mark.line + 1)
        open_.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_:
                raise UserError(f"{what} has an alias that refers to itself", file=file,
                                line=child.start_mark.line + 1)
            if id(child) not in size:
                stack.append((child, False))
    expanded = size[id(root)]
    if expanded > len(size) + _MAX_ALIAS_NODES:
        raise UserError(f"{what}'s aliases expand it to {expanded:,} nodes from {len(size):,} written "
                        f"(at most {_MAX_ALIAS_NODES:,} more are allowed)", file=file,
                        hint="write the repeated parts out, or use fewer nested aliases")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def read_text(path: Path, *, what: str) -> tuple[str, bytes]:
    """The file's text and raw bytes: a regular file within the size cap, UTF-8; else a located ``UserError``."""
    raw = read_capped(path, what=what)
    return decode_utf8(raw, path, what=what), raw


def _parse_error(exc: yaml.YAMLError, path: Path, what: str) -> UserError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        return UserError(f"{what} does not parse: {exc.problem or exc.context}", file=path, line=line)
    return UserError(f"{what} does not parse: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=path)


def _load_yaml(text: str, path: Path, what: str) -> tuple[Any, dict[KeyTuple, int]]:
    _prescan(text, path, what)
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None, {}
            _check_expansion(node, path, what)
            lines: dict[KeyTuple, int] = {}
            _walk(node, (), lines, path)
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise _parse_error(exc, path, what) from None
    except (RecursionError, ValueError, OverflowError) as exc:  # e.g. a float or date out of range
        raise UserError(f"{what} does not parse: {type(exc).__name__}: {str(exc)[:120]}", file=path) from None
    return data, lines


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(ValueError):
    pass


def _json_depth_ok(data: Any) -> bool:
    stack = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > _MAX_DEPTH:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return True


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _load_json(text: str, path: Path, what: str) -> tuple[Any, dict[KeyTuple, int]]:
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise UserError(f"duplicate key {exc.args[0]!r}; JSON readers disagree on which one counts",
                        file=path, hint="remove or rename one of them") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} is not valid JSON: {exc.msg} (column {exc.colno})", file=path, line=exc.lineno) from None
    except RecursionError:
        raise UserError(f"{what} nests deeper than {_MAX_DEPTH} levels", file=path) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise UserError(f"{what} does not parse: {str(exc).split(';')[0]}", file=path) from None
    if not _json_depth_ok(data):
        raise UserError(f"{what} nests deeper than {_MAX_DEPTH} levels", file=path,
                        hint="flatten it; no trialgrid file needs this")
    lines: dict[KeyTuple, int] = {}
    try:  # line numbers only: YAML's flow syntax reads most JSON; escaped surrogates become spaces
        loader = _Loader(_SURROGATE_ESCAPE.sub(r"\\u0020", text))
        try:
            node = loader.get_single_node()
            if node is not None:
                _walk(node, (), lines, path)
        finally:
            loader.dispose()
    except (yaml.YAMLError, UserError, RecursionError):
        lines = {(): 1}
    return data, lines


def load_source(path: Path, *, what: str) -> Source:
    """Read and parse ``path``; every failure is a located ``UserError``."""
    text, raw = read_text(path, what=what)
    if path.suffix.lower() == ".json":
        data, lines = _load_json(text, path, what)
    else:
        data, lines = _load_yaml(text, path, what)
    return Source(path=path, data=data, lines=lines, sha256=hashlib.sha256(raw).hexdigest())


def _model_at(model: Any, loc: tuple[Any, ...], data: Any) -> type[BaseModel] | None:
    """The pydantic model that validates the mapping at ``loc`` (to list its valid keys)."""
    current: Any = model
    for i, part in enumerate(loc):
        if isinstance(part, int):
            continue  # taken with the list field before it
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            return None
        current = current.model_fields[part].annotation
        data = data.get(part) if isinstance(data, dict) else None
        index = loc[i + 1] if i + 1 < len(loc) else None
        if isinstance(index, int) and isinstance(data, list):
            # the list item the location names, not the first one: probes[1]'s keys are its own kind's
            data = [data[index]] if index < len(data) else None
            current = _unwrap(current, data)
            data = data[0] if data else None
        else:
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


_LIBRARY_PREFIXES = ("Value error, ", "Assertion failed, ")


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
    msg = str(err.get("msg", "invalid value"))
    for prefix in _LIBRARY_PREFIXES:
        msg = msg.removeprefix(prefix)
    value = err.get("input")
    if "credential" in msg:
        return msg  # a value refused as a credential is never repeated (a validator shows what is safe of it)
    if isinstance(value, str) and len(value) >= 3 and value in msg:
        return msg  # the message names the value already
    if kind not in ("model_type",) and isinstance(value, (str, int, float, bool)):
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return f"{msg}, got {shown}"
    return str(msg)


def _expects_number(annotation: Any) -> bool:
    """Is ``annotation`` an int or float (optionally Optional / Annotated), with no bool in it?"""
    for _ in range(4):
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
    else:
        members = [annotation]
    members = [get_args(a)[0] if get_origin(a) is Annotated else a for a in members]
    return bool(members) and all(a in (int, float) for a in members)


def _booleans_as_numbers(model: Any, data: Any, loc: KeyTuple, found: list[tuple[KeyTuple, bool]]) -> None:
    """Key paths where a number is expected but YAML read a boolean (``true``, ``yes``, ``on``): pydantic takes them as 1/0."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)) or not isinstance(data, dict):
        return
    for key, value in data.items():
        spec = model.model_fields.get(key) if isinstance(key, str) else None
        if spec is None:
            continue
        if isinstance(value, bool):
            if _expects_number(spec.annotation):
                found.append(((*loc, key), value))
        elif isinstance(value, dict):
            _booleans_as_numbers(_unwrap(spec.annotation, value), value, (*loc, key), found)
        elif isinstance(value, list):
            for i, item in enumerate(value[:1000]):
                _booleans_as_numbers(_unwrap(spec.annotation, [item]), item, (*loc, key, i), found)


def _missing_hint(loc: KeyTuple, errors: Sequence[Mapping[str, Any]], source: Source, prefix: KeyTuple) -> str:
    """For a missing key: the unknown sibling key that looks like a misspelling of it, if any."""
    for other in errors:
        if other.get("type") != "extra_forbidden":
            continue
        oloc = _strip_tags(tuple(other["loc"]))
        if oloc[:-1] == loc[:-1] and difflib.get_close_matches(str(loc[-1]), [str(oloc[-1])], n=1):
            line = source.line_of(prefix + oloc)
            return f" (is {oloc[-1]!r}{f' on line {line}' if line else ''} a misspelling of it?)"
    return ""


def validate(model: type[BaseModel], data: Any, source: Source, *, prefix: KeyTuple = (),
             context: dict[str, Any] | None = None) -> Any:
    """Validate ``data`` (found at ``prefix`` inside ``source``) into ``model``.

    Every problem (up to ``_MAX_PROBLEMS``) becomes a located ``UserError``; one is raised
    as is, several as ``Problems`` (its ``str()`` is the first with a count of the rest).
    """
    flagged: list[tuple[KeyTuple, bool]] = []
    _booleans_as_numbers(model, data, (), flagged)
    problems = [UserError(f"expected a number, got the boolean {str(value).lower()} (YAML reads true/yes/on as "
                          "booleans)", file=source.path, line=source.line_of(prefix + loc), key_path=prefix + loc)
                for loc, value in flagged]
    try:
        result = model.model_validate(data, context=context)
    except ValidationError as exc:
        errors = exc.errors()
        for err in errors:
            loc = _strip_tags(tuple(err["loc"]))
            message = _describe(err, model, data)
            if err.get("type") == "missing":
                message += _missing_hint(loc, errors, source, prefix)
            full = prefix + loc
            if any(p.key_path == UserError("", key_path=full).key_path for p in problems):
                continue
            problems.append(UserError(message, file=source.path, line=source.line_of(full), key_path=full))
    else:
        if not problems:
            return result
    problems = problems[:_MAX_PROBLEMS]
    if len(problems) == 1:
        raise problems[0]
    raise Problems(problems)


_TAGS: set[str] = set()


def _strip_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop what pydantic inserts into error locations: tagged-union tags and validator names."""
    loc = tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))
    return tuple(p for i, p in enumerate(loc)
                 if not (i > 0 and isinstance(loc[i - 1], int) and isinstance(p, str) and p in _TAGS))


def register_union_tags(tags: Iterable[str]) -> None:
    """Discriminator values that pydantic inserts into error locations."""
    _TAGS.update(tags)
