"""Tool catalogues as users write them: OpenAI, Anthropic, MCP or plain form.

All four forms become tuples of neutral ``ToolSpec``. The form is detected per
entry, so a user can paste tool definitions straight from either vendor's docs or
an MCP server's ``tools/list`` answer:

- OpenAI: ``{"type": "function", "function": {"name", "description", "parameters"}}``
- Anthropic: ``{"name", "description", "input_schema"}``
- MCP: ``{"name", "description", "inputSchema"}`` (other MCP keys such as ``annotations`` are ignored)
- plain: ``{"name", "description", "parameters"}``

The file is a list of entries, or a mapping with a ``tools`` list. Each entry is checked as
it is read: a key its form does not have but spelt like one (``"paramters"``) is an error
with a did-you-mean, since a misspelt schema would send every tool with no arguments (other
unknown keys are the vendors' extensions, left alone); the argument schema must be
a valid JSON Schema (checked against the meta-schema by ``jsonschema``: a misspelt type, an
invalid ``pattern``, a ``required`` that is not a list), whose every ``$ref`` points inside it
(vendors resolve no other) at something that is not a ``$ref`` loop; a description longer
than ``MAX_DESCRIPTION`` is a file pasted by mistake. A tool with no argument schema at all
is a warning (``parameters: {}`` says it takes none on purpose).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from runner.core.errors import UserError, warn
from runner.core.sources import Source, load_source
from runner.core.types import ToolSpec

#: the keys each form of an entry may have (the vendors' documented ones; what trialgrid does not read is allowed)
_OPENAI_OUTER = frozenset({"type", "function"})
_OPENAI_FUNCTION = frozenset({"name", "description", "parameters", "strict"})
_ANTHROPIC = frozenset({"name", "description", "input_schema", "cache_control", "type"})
_MCP = frozenset({"name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons", "_meta"})
_PLAIN = frozenset({"name", "description", "parameters", "strict"})


#: characters a tool's description may have: a paragraph is a few hundred; a megabyte is a file pasted in
MAX_DESCRIPTION = 65_536

_EVERY_KEY = sorted(_OPENAI_OUTER | _OPENAI_FUNCTION | _ANTHROPIC | _MCP | _PLAIN)


def _unknown_keys(body: dict[str, Any], known: frozenset[str], fail: Any, sub: tuple) -> None:
    """A key of ``body`` its form does not have, spelt like one a form has, is a typo: an error. Other keys are
    the vendors' own extensions (new ones appear), which trialgrid does not read."""
    for key in body:
        if key in known or key in _EVERY_KEY:  # another form's key: harmless here
            continue
        close = difflib.get_close_matches(str(key), _EVERY_KEY, n=1, cutoff=0.75)
        if close:
            raise fail(f"unknown key {key!r} in a tool (did you mean {close[0]!r}? valid keys here: "
                       f"{', '.join(sorted(known))})", sub + (key,))


def _check_schema(schema: dict[str, Any], fail: Any, at: tuple) -> None:
    """``schema`` against the JSON Schema meta-schema (the draft its ``$schema`` names, else 2020-12)."""
    from jsonschema import exceptions, validators

    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except exceptions.SchemaError as exc:
        where = tuple(exc.absolute_path)
        raise fail(f"not a valid JSON Schema: {exc.message[:200]}", at + where) from None


def _refs(node: Any, at: tuple) -> Iterator[tuple[str, tuple]]:
    """Every ``$ref`` string in ``node`` and where it is (the ``$ref`` key's path)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value, at + (key,)
            else:
                yield from _refs(value, at + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _refs(value, at + (i,))


def _pointed(root: dict[str, Any], ref: str) -> tuple[bool, Any]:
    """(found, the node) a local ``$ref`` (``#``, ``#/$defs/a``: a JSON pointer, percent-encoded) points at."""
    node: Any = root
    for token in unquote(ref[1:]).split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isascii() and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False, None
    return True, node


def _check_refs(schema: dict[str, Any], fail: Any, at: tuple) -> None:
    """Every ``$ref`` local and resolving, and no chain of ``$ref``s that only points at itself (a recursive
    schema, a tree whose ``children`` refer back to ``#``, is fine: it describes something)."""
    for ref, where in _refs(schema, ()):
        if not ref.startswith("#"):
            raise fail(f"$ref {ref!r} points outside this schema, which no provider resolves: copy what it names "
                       "under '$defs' and refer to '#/$defs/…'", at + where)
        seen = [ref]
        while True:
            found, node = _pointed(schema, seen[-1])
            if not found:
                raise fail(f"$ref {ref!r} points at nothing in this schema", at + where)
            target = node.get("$ref") if isinstance(node, dict) else None
            if not isinstance(target, str) or not target.startswith("#"):
                break
            if target in seen:
                raise fail(f"$ref {ref!r} is a loop ({' → '.join([*seen, target])}) that describes no value",
                           at + where)
            seen.append(target)


def _entry(item: Any, source: Source, path: tuple) -> ToolSpec:
    def fail(msg: str, sub: tuple = ()) -> UserError:
        return UserError(msg, file=source.path, line=source.line_of(path + sub), key_path=path + sub)

    if not isinstance(item, dict):
        raise fail(f"a tool must be a mapping, got {type(item).__name__}")
    sub: tuple[str, ...]
    if "function" in item:
        if item.get("type", "function") != "function":
            raise fail(f"unsupported tool type {item.get('type')!r} (only 'function')", ("type",))
        _unknown_keys(item, _OPENAI_OUTER, fail, ())
        fn = item["function"]
        if not isinstance(fn, dict):
            raise fail("'function' must be a mapping", ("function",))
        body, sub, schema_key = fn, ("function",), "parameters"
        _unknown_keys(fn, _OPENAI_FUNCTION, fail, sub)
    elif "input_schema" in item:
        body, sub, schema_key = item, (), "input_schema"
        _unknown_keys(item, _ANTHROPIC, fail, sub)
    elif "inputSchema" in item:
        body, sub, schema_key = item, (), "inputSchema"
        _unknown_keys(item, _MCP, fail, sub)
    else:
        body, sub, schema_key = item, (), "parameters"
        _unknown_keys(item, _PLAIN, fail, sub)
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail("tool needs a non-empty string 'name'", sub + ("name",))
    description = body.get("description")
    if description is None:  # MCP's description is optional and may be null
        description = ""
    if not isinstance(description, str):
        raise fail("'description' must be a string", sub + ("description",))
    if len(description) > MAX_DESCRIPTION:
        raise fail(f"'description' is {len(description):,} characters, over the {MAX_DESCRIPTION:,} a tool's "
                   "description may have here: was a file pasted in?", sub + ("description",))
    if schema_key not in body:
        line = source.line_of(path)
        warn(f"{source.path}{f':{line}' if line else ''}: tool {name!r} has no {schema_key!r}: it is offered with no "
             f"arguments (write {schema_key}: {{}} to say so)")
    schema = body.get(schema_key, {"type": "object", "properties": {}})
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise fail("the argument schema must be a JSON-schema object ({'type': 'object', ...})", sub + (schema_key,))
    _check_schema(schema, fail, sub + (schema_key,))
    _check_refs(schema, fail, sub + (schema_key,))
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise fail("'properties' must be a mapping", sub + (schema_key, "properties"))
    required = schema.get("required", [])
    if not isinstance(required, list) or any(r not in props for r in required):
        raise fail("'required' must list names defined in 'properties'", sub + (schema_key, "required"))
    return ToolSpec(name=name, description=description, parameters=schema)


def parse_catalogue(data: Any, source: Source, prefix: tuple = ()) -> tuple[ToolSpec, ...]:
    items = data
    path = prefix
    if isinstance(data, dict) and "tools" in data:
        items, path = data["tools"], prefix + ("tools",)
    if not isinstance(items, list):
        raise UserError("a tool catalogue must be a list of tools (or a mapping with a 'tools' list)",
                        file=source.path, line=source.line_of(path), key_path=path or None)
    if not items:
        raise UserError("the tool catalogue is empty", file=source.path, line=source.line_of(path), key_path=path or None)
    tools = tuple(_entry(item, source, path + (i,)) for i, item in enumerate(items))
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if tool.name in seen:
            raise UserError(f"duplicate tool name {tool.name!r}", file=source.path,
                            line=source.line_of(path + (i,)), key_path=path + (i,))
        seen.add(tool.name)
    return tools


def load_catalogue(path: Path) -> tuple[tuple[ToolSpec, ...], str]:
    """Tools in the file, and the file's sha256 (part of the sweep's identity)."""
    source = load_source(path, what="tool catalogue")
    return parse_catalogue(source.data, source), source.sha256
