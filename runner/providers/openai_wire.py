"""Provider ``openai``: the Chat Completions wire format, against any OpenAI-compatible base URL.

Encoding: system/user/assistant/tool messages as Chat Completions messages (an
assistant turn's tool calls carry their *raw* argument string back unchanged);
tools as ``{"type": "function", "function": {name, description, parameters}}``;
``tool_choice`` "auto" / "none" / "required" as is, any other value as a forced
function; the trial seed as the ``seed`` field (and, to ``trialgrid serve`` only, the
``x-trialgrid-seed`` header: ``seed_channel.py``); the model's params as top-level fields.

Decoding: ``choices[0].message``. A tool call's ``arguments`` is a JSON *string*; it
is parsed into an object when it is one, and otherwise kept as received with
``parse_error`` saying why — never dropped, never repaired.
"""

from __future__ import annotations

from typing import Any

from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, Usage, parse_tool_arguments
from runner.providers.http_base import HttpProvider
from runner.providers.secrets import Secret

_CHOICES = ("auto", "none", "required")


def _encode_message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        out["content"] = m.content or None
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments}}
                             for c in m.tool_calls]
    if m.name and m.role != "tool":
        out["name"] = m.name
    return out


def encode_request(request: ChatRequest) -> dict[str, Any]:
    body: dict[str, Any] = {"model": request.model, "messages": [_encode_message(m) for m in request.messages]}
    if request.tools:
        body["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                           "parameters": dict(t.parameters)}} for t in request.tools]
    if request.tool_choice is not None and request.tools:
        body["tool_choice"] = (request.tool_choice if request.tool_choice in _CHOICES
                               else {"type": "function", "function": {"name": request.tool_choice}})
    if request.seed is not None:
        body["seed"] = request.seed
    for key, value in request.params.items():
        body[key] = value
    return body


def decode_response(data: Any) -> ChatResponse:
    choice = data["choices"][0]
    message = choice["message"]
    calls = []
    for raw_call in message.get("tool_calls") or ():
        function = raw_call["function"]
        raw = function.get("arguments")
        if not isinstance(raw, str):  # some compatible servers send an object; keep it visible as such
            import json

            raw = json.dumps(raw, separators=(",", ":"))
        arguments, error = parse_tool_arguments(raw)
        calls.append(ToolCall(name=function["name"], raw_arguments=raw, arguments=arguments,
                              id=raw_call.get("id") or "", parse_error=error))
    return ChatResponse(
        text=message.get("content") or "",
        tool_calls=tuple(calls),
        usage=Usage.from_wire(data.get("usage"), "prompt_tokens", "completion_tokens"),
        finish_reason=choice.get("finish_reason"),
    )


class OpenAIProvider(HttpProvider):
    """Chat Completions over HTTP; one request per ``complete``."""

    name = "openai"
    path = "/chat/completions"

    @staticmethod
    def auth_headers(secret: Secret | None) -> dict[str, str]:
        return {"authorization": f"Bearer {secret.reveal()}"} if secret is not None else {}

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        return encode_request(request)

    def decode(self, data: Any) -> ChatResponse:
        return decode_response(data)

    def error_fields(self, data: Any) -> tuple[str, str | None, str | None]:
        error = data["error"]
        if isinstance(error, str):
            return error, None, None
        return str(error.get("message") or ""), error.get("param"), error.get("code") or error.get("type")
