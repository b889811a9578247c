"""Tool calls a model wrote in its reply's text, for servers without a tool parser (opt-in per model).

Many open models served without their tool template (llama.cpp, vLLM or Ollama
without a tool parser) write a call as text instead of sending ``tool_calls``; the
wire decoders read only the native field, so such a call scores as "no call". A
model entry's ``tool_call_parser`` names the format its text calls take:

- ``json``: a JSON object ``{"name": ..., "arguments": {...}}`` (also ``parameters``,
  or ``tool``/``args``; or a list of them), bare or in a ````` ```json ````` fence;
- ``hermes``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one or more;
- ``functions-prefix``: ``functions.NAME:{...}`` (functionary style), one or more.

Off by default, so native tool-calling measurements never change. A call found in
the text is kept as written: arguments that do not parse give a ``ToolCall`` with
``parse_error`` set (a malformed call is a finding, never dropped or repaired). The
response records how many of its calls came from text (``calls_from_text``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from runner.core.types import ToolCall, parse_tool_arguments

ToolCallParser = Literal["json", "hermes", "functions-prefix"]
_PARSERS: tuple[str, ...] = ("json", "hermes", "functions-prefix")

_DECODER = json.JSONDecoder()
_HERMES_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_PREFIX_RE = re.compile(r"functions\.([A-Za-z_][\w.-]*)\s*:\s*")
_NAME_RE = re.compile(r'"(?:name|tool|function)"\s*:\s*"([^"]+)"')


def _call_of(obj: Any, index: int) -> ToolCall | None:
    """A ``{"name", "arguments"}``-shaped object as a call; None when it is not one."""
    if not isinstance(obj, Mapping):
        return None
    inner = obj.get("function")
    fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else obj
    name = fn.get("name", fn.get("tool"))
    if not isinstance(name, str) or not name:
        return None
    args: Any = next((fn[k] for k in ("arguments", "parameters", "args", "input") if k in fn), {})
    raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    parsed, error = parse_tool_arguments(raw)
    return ToolCall(name=name, raw_arguments=raw, arguments=parsed, id=f"text_call_{index}", parse_error=error)


def _objects(text: str) -> list[Any]:
    """Every top-level JSON value that starts with ``{`` or ``[`` in ``text``, in order."""
    out: list[Any] = []
    pos = 0
    while True:
        starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0]
        if not starts:
            return out
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        out.append(value)
        pos = end


def _parse_json(text: str) -> tuple[ToolCall, ...]:
    calls: list[ToolCall] = []
    for value in _objects(text):
        for item in value if isinstance(value, list) else [value]:
            call = _call_of(item, len(calls))
            if call is not None:
                calls.append(call)
    return tuple(calls)


def _parse_hermes(text: str) -> tuple[ToolCall, ...]:
    calls: list[ToolCall] = []
    for m in _HERMES_RE.finditer(text):
        body = m.group(1)
        try:
            value = json.loads(body)
        except ValueError as exc:
            name = _NAME_RE.search(body)
            calls.append(ToolCall(name=name.group(1) if name else "", raw_arguments=body, arguments=None,
                                  id=f"text_call_{len(calls)}", parse_error=f"<tool_call> body is not JSON: {exc}"))
            continue
        call = _call_of(value, len(calls))
        if call is None:
            calls.append(ToolCall(name="", raw_arguments=body, arguments=None, id=f"text_call_{len(calls)}",
                                  parse_error="<tool_call> body has no \"name\""))
        else:
            calls.append(call)
    return tuple(calls)


def _parse_functions_prefix(text: str) -> tuple[ToolCall, ...]:
    calls: list[ToolCall] = []
    for m in _PREFIX_RE.finditer(text):
        rest = text[m.end():]
        try:
            _, end = _DECODER.raw_decode(rest)
            raw = rest[:end]
        except ValueError:
            raw = rest.split("\n", 1)[0].strip()
        parsed, error = parse_tool_arguments(raw)
        calls.append(ToolCall(name=m.group(1), raw_arguments=raw, arguments=parsed, id=f"text_call_{len(calls)}",
                              parse_error=error))
    return tuple(calls)


_BY_NAME: dict[str, Callable[[str], tuple[ToolCall, ...]]] = {
    "json": _parse_json, "hermes": _parse_hermes, "functions-prefix": _parse_functions_prefix,
}


def parse_text_calls(parser: str, text: str) -> tuple[ToolCall, ...]:
    """The calls ``parser`` finds in ``text`` (empty when it finds none)."""
    try:
        fn = _BY_NAME[parser]
    except KeyError:
        raise ValueError(f"unknown tool_call_parser {parser!r}: expected one of {', '.join(_PARSERS)}") from None
    return fn(text) if text else ()
