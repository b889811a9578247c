"""Values as BFCL's Java and JavaScript categories want them sent: source text (``new ArrayList<>(…)``, ``5n``).

BFCL asks a model to pass Java and JavaScript arguments as code, and its checker parses that code back
(``bfcl_checker.convert``). This is the other direction, for whoever must *write* such an answer: the oracle
persona answering an imported case (``runner/sim/oracle.py``) and the tests that build ground-truth answers.
"""

from __future__ import annotations

import json
from typing import Any


def _java_scalar(value: Any, kind: str | None) -> str:
    if kind == "long":
        return f"{value}L"
    if kind == "float":
        return f"{value}f"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _java_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def java_text(value: Any, spec: dict[str, Any]) -> str:
    kind = spec["type"]
    item = (spec.get("items") or {}).get("type")
    if isinstance(value, str):
        return value  # a string, or a variable's name
    if kind == "ArrayList":
        if not value:
            return "new ArrayList<>()"
        parts = [f'"{v}"' if item in ("String", "char") else _java_scalar(v, item) for v in value]
        return f"new ArrayList<>(Arrays.asList({', '.join(parts)}))"
    if kind == "Array":
        return "new Object[]{" + ", ".join(_java_scalar(v, item) if item else _java_literal(v) for v in value) + "}"
    if kind == "HashMap":
        puts = " ".join(f'put("{k}", {_java_literal(v)});' for k, v in value.items())
        return "new HashMap<String, Object>() {{ " + puts + " }}"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return _java_scalar(value, kind)


def _js_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_js_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_js_literal(v)}" for k, v in value.items()) + "}"
    return str(value)


def js_text(value: Any, spec: dict[str, Any]) -> str:
    kind = spec["type"]
    if isinstance(value, str):
        return value
    if kind == "Bigint":
        return f"{value}n"
    if kind in ("array", "dict"):
        return _js_literal(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


__all__ = ["java_text", "js_text"]
