"""Provider ``openai-responses``: the OpenAI Responses API wire format (``POST /v1/responses``).

The same neutral request and response as the other wire formats, so every probe
runs unchanged; errors, limits, retries and remedies are those of every HTTP
provider (``http_base.py``, ``classify.py``, ``managed.py``): the Responses API
answers errors in the Chat Completions error shape.

Encoding: messages as ``input`` items in order — system, user and assistant turns
as ``{"role", "content"}`` messages; an assistant's tool calls as
``{"type": "function_call", "call_id", "name", "arguments"}`` items carrying their
raw argument string back unchanged; tool results as ``{"type":
"function_call_output", "call_id", "output"}``. Tools as flat ``{"type": "function",
name, description, parameters, "strict": false}`` (strict mode would rewrite the
schema the probe chose); ``tool_choice`` auto / none / required as is, a tool name
as ``{"type": "function", "name"}``; the model's params as top-level fields. The
API has no seed field: to ``trialgrid serve`` (``seed_channel.py``) the trial seed
travels in the ``x-trialgrid-seed`` header (and, in a batch, in ``metadata.trialgrid_seed``).

Decoding: ``output`` items in order — ``message`` items' ``output_text`` parts
joined as the text, ``function_call`` items as tool calls (``call_id`` is the id
the tool result must name; ``arguments`` kept as received, parsed when it is a
JSON object). ``finish_reason``: ``tool_calls`` / ``stop``, or the
``incomplete_details.reason`` of an incomplete response.
"""

from __future__ import annotations

from typing import Any

from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, Usage, parse_tool_arguments
from runner.providers.openai_wire import OpenAIProvider

_MODES = ("auto", "none", "required")


def _encode_items(m: Message) -> list[dict[str, Any]]:
    """One neutral message → its ``input`` items."""
    if m.role == "tool":
        return [{"type": "function_call_output", "call_id": m.tool_call_id or "", "output": m.content}]
    items: list[dict[str, Any]] = []
    if m.content or not m.tool_calls:
        items.append({"type": "message", "role": m.role, "content": m.content})
    for c in m.tool_calls:
        items.append({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.raw_arguments})
    return items


def encode_request(request: ChatRequest) -> dict[str, Any]:
    body: dict[str, Any] = {"model": request.model,
                            "input": [item for m in request.messages for item in _encode_items(m)]}
    if request.tools:
        body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                          "parameters": dict(t.parameters), "strict": False} for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = (request.tool_choice if request.tool_choice in _MODES
                                   else {"type": "function", "name": request.tool_choice})
    for key, value in request.params.items():
        body[key] = value
    return body


def decode_response(data: Any) -> ChatResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in data["output"]:
        kind = item.get("type")
        if kind == "message":
            texts.extend(part.get("text", "") for part in item.get("content") or ()
                         if part.get("type") == "output_text")
        elif kind == "function_call":
            raw = item.get("arguments")
            if not isinstance(raw, str):
                import json

                raw = json.dumps(raw, separators=(",", ":"))
            arguments, error = parse_tool_arguments(raw)
            calls.append(ToolCall(name=item["name"], raw_arguments=raw, arguments=arguments,
                                  id=item.get("call_id") or item.get("id") or "", parse_error=error))
    if data.get("status") == "incomplete":
        finish = (data.get("incomplete_details") or {}).get("reason") or "incomplete"
    else:
        finish = "tool_calls" if calls else "stop"
    return ChatResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage.from_wire(data.get("usage"), "input_tokens", "output_tokens"),
        finish_reason=finish,
    )


class OpenAIResponsesProvider(OpenAIProvider):
    """The Responses API over HTTP; one request per ``complete``. Auth and error bodies are Chat Completions'."""

    name = "openai-responses"
    path = "/responses"

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        return encode_request(request)

    def decode(self, data: Any) -> ChatResponse:
        return decode_response(data)
