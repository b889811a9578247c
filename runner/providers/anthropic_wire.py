"""Provider ``anthropic``: the Messages wire format.

Encoding: system messages joined into the top-level ``system``; user and assistant
turns as ``messages`` (an assistant's tool calls as ``tool_use`` blocks, tool results
as ``tool_result`` blocks in a user turn; consecutive turns of one role merged, as
the API requires alternation); tools as ``{name, description, input_schema}``;
``tool_choice`` auto / none / required (→ ``any``) / a tool name; ``max_tokens``
(required by the API) from the params or 1024; the version header. The Messages
API has no seed field, so to ``trialgrid serve`` the trial seed travels in the
``x-trialgrid-seed`` header only (never to a vendor unasked: ``seed_channel.py``).

Decoding: text blocks joined; each ``tool_use`` block is a tool call whose
``input`` is already an object — its raw string is the compact JSON of it, the same
bytes the in-process simulated agent produces. Anthropic itself always sends an
object (it buffers and validates tool input; only a fine-grained *stream* may carry
text that does not parse, and trialgrid does not stream), so over the real API a
call is never unparsable here. An ``input`` that arrives as a string — some
compatible servers and proxies pass the model's raw argument text through — is
that raw text, parsed or recorded as unparsable like an OpenAI ``arguments``
string.
"""

from __future__ import annotations

from typing import Any

from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, Usage, call_with_object
from runner.providers.http_base import HttpProvider
from runner.providers.secrets import Secret
from runner.providers.turns import alternating_turns

_API_VERSION = "2023-06-01"
_DEFAULT_MAX_TOKENS = 1024


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        return [{"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
    for call in m.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       # a call whose arguments did not parse is replayed as an empty object:
                       # the Messages API only accepts objects here
                       "input": dict(call.arguments) if call.arguments is not None else {}})
    return blocks


def encode_request(request: ChatRequest) -> dict[str, Any]:
    system = "\n\n".join(m.content for m in request.messages if m.role == "system")
    turns = alternating_turns(request.messages, _blocks)
    # a plain single-text user turn goes as a string, the form most examples use
    for turn in turns:
        content = turn["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            turn["content"] = content[0]["text"]
    body: dict[str, Any] = {"model": request.model, "max_tokens": _DEFAULT_MAX_TOKENS, "messages": turns}
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [{"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                         for t in request.tools]
    if request.tool_choice is not None and request.tools:
        body["tool_choice"] = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}.get(
            request.tool_choice, {"type": "tool", "name": request.tool_choice})
    for key, value in request.params.items():
        body[key] = value
    return body


def decode_response(data: Any) -> ChatResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in data["content"]:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text", ""))
        elif kind == "tool_use":  # (a string input is never sent by Anthropic itself)
            calls.append(call_with_object(block["name"], block.get("input"), block.get("id") or ""))
    return ChatResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage.from_wire(data.get("usage"), "input_tokens", "output_tokens"),
        finish_reason=data.get("stop_reason"),
    )


class AnthropicProvider(HttpProvider):
    """Messages over HTTP; one request per ``complete``."""

    name = "anthropic"
    path = "/messages"

    @classmethod
    def api_base(cls, base_url: str | None) -> str:
        """``base_url`` written either way — with ``/v1`` (trialgrid's default) or without it, as Anthropic's
        SDKs take it (``https://api.anthropic.com``); live and batch requests both hang from this root."""
        base = super().api_base(base_url)
        return base if base.endswith("/v1") else base + "/v1"

    @staticmethod
    def auth_headers(secret: Secret | None) -> dict[str, str]:
        headers = {"anthropic-version": _API_VERSION}
        if secret is not None:
            headers["x-api-key"] = secret.reveal()
        return headers

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        return encode_request(request)

    def decode(self, data: Any) -> ChatResponse:
        return decode_response(data)

    def error_fields(self, data: Any) -> tuple[str, str | None, str | None]:
        error = data["error"]
        return str(error.get("message") or ""), None, error.get("type")
