"""Tool catalogues as users write them: OpenAI, Anthropic, MCP or plain form.

All four forms become tuples of neutral ``ToolSpec``. The form is detected per
entry, so a user can paste tool definitions straight from either vendor's docs or
an MCP server's ``tools/list`` answer:

- OpenAI: ``{"type": "function", "function": {"name", "description", "parameters"}}``
- Anthropic: ``{"name", "description", "input_schema"}``
- MCP: ``{"name", "description", "inputSchema"}`` (other MCP keys such as ``annotations`` are ignored)
- plain: ``{"name", "description", "parameters"}``

The file is a list of entries, or a mapping with a ``tools`` list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.core.errors import UserError
from runner.core.sources import Source, load_source
from runner.core.types import ToolSpec


def _entry(item: Any, source: Source, path: tuple) -> ToolSpec:
    def fail(msg: str, sub: tuple = ()) -> UserError:
        return UserError(msg, file=source.path, line=source.line_of(path + sub), key_path=path + sub)

    if not isinstance(item, dict):
        raise fail(f"a tool must be a mapping, got {type(item).__name__}")
    sub: tuple[str, ...]
    if "function" in item:
        if item.get("type", "function") != "function":
            raise fail(f"unsupported tool type {item.get('type')!r} (only 'function')", ("type",))
        fn = item["function"]
        if not isinstance(fn, dict):
            raise fail("'function' must be a mapping", ("function",))
        body, sub, schema_key = fn, ("function",), "parameters"
    elif "input_schema" in item:
        body, sub, schema_key = item, (), "input_schema"
    elif "inputSchema" in item:
        body, sub, schema_key = item, (), "inputSchema"
    else:
        body, sub, schema_key = item, (), "parameters"
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail("tool needs a non-empty string 'name'", sub + ("name",))
    description = body.get("description")
    if description is None:  # MCP's description is optional and may be null
        description = ""
    if not isinstance(description, str):
        raise fail("'description' must be a string", sub + ("description",))
    schema = body.get(schema_key, {"type": "object", "properties": {}})
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise fail("the argument schema must be a JSON-schema object ({'type': 'object', ...})", sub + (schema_key,))
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
