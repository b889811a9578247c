"""JSON-schema checks with the error messages real APIs return.

Tool simulators validate every call's arguments before executing it, the way a real
API does: a wrong type, a value out of range, a missing required field or an unknown
field is refused with a 400/422 and a message naming the field. The interceptor
uses the same checks on tool *results* against each tool's declared output schema.
Only the subset of JSON schema the simulators use is supported (type, enum,
minimum/maximum, pattern, required, properties, items, additionalProperties).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "object": (dict,), "array": (list,), "null": (type(None),),
}


def type_name(value: Any) -> str:
    """The JSON type of a Python value, as an API error would name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object"


def _is_type(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False  # JSON booleans are not numbers, whatever Python thinks
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, (object,)))


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def problems(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """Every way ``value`` breaks ``schema``, each a sentence naming the field; empty if valid."""
    where = f"'{path}'" if path else "the request body"
    kind = schema.get("type")
    if kind is not None and not _is_type(value, kind):
        return [f"{where} must be of type {kind}, got {type_name(value)} {_shown(value)}"]
    out: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where} must be one of {', '.join(map(str, schema['enum']))}; got {_shown(value)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{where} must be >= {schema['minimum']}; got {_shown(value)}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{where} must be <= {schema['maximum']}; got {_shown(value)}")
    if isinstance(value, str) and "pattern" in schema and not re.fullmatch(schema["pattern"], value):
        hint = schema.get("format_hint", schema["pattern"])
        out.append(f"{where} must look like {hint}; got {_shown(value)}")
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value or value[name] is None:
                out.append(f"missing required field '{path + '.' if path else ''}{name}'")
        for name, sub in value.items():
            child = f"{path}.{name}" if path else name
            if name in props:
                out.extend(problems(props[name], sub, child))
            elif schema.get("additionalProperties") is False:
                out.append(f"unknown field '{child}' (expected: {', '.join(props)})")
    if isinstance(value, list) and "items" in schema:
        for i, sub in enumerate(value):
            out.extend(problems(schema["items"], sub, f"{path}[{i}]"))
    return out
