"""The server's side of the OpenAI Responses API (``POST /v1/responses``): request ↔ neutral types.

The mirror image of ``runner/providers/openai_responses_wire.py``, like ``codecs.py``
is of the other two wire formats: ``input`` items decode back into the same
messages, in the same order, that the in-process path builds, so a sweep with
``provider: openai-responses`` gets the same answers over HTTP as in-process. Errors,
keys and parameter rules are written as OpenAI writes them (the Responses API uses
the Chat Completions error shape).

Seed: the Responses API has no seed field; the trial seed comes in the
``x-trialgrid-seed`` header, or (in a batch, which has no per-request headers) in
``metadata.trialgrid_seed``.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from typing import Any

from runner.core.types import ChatRequest, ChatResponse, Message, ToolSpec
from runner.providers.seed_channel import SEED_HEADER, SEED_METADATA_KEY
from runner.sim.serve.codecs import BadRequest, OpenAICodec, request_seed, served_tool_choice, tool_call

_ROLES = ("system", "developer", "user", "assistant")


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text"))
    raise BadRequest(f"Invalid type for 'input[].content': expected a string or an array, got {type(content).__name__}")


class ResponsesCodec(OpenAICodec):
    """Keys, errors and rules as OpenAI; requests and answers in the Responses shapes."""

    api = "responses"
    wire = "responses"

    @staticmethod
    def decode(body: Any, headers: Mapping[str, str]) -> ChatRequest:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        model, items = body.get("model"), body.get("input")
        if not isinstance(model, str) or not model:
            raise BadRequest("Missing required parameter: 'model'.")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        if not isinstance(items, list) or not items:
            raise BadRequest("Missing required parameter: 'input'.")
        messages: list[Message] = []
        if body.get("instructions"):
            messages.append(Message("system", _content_text(body["instructions"])))
        names: dict[str, str] = {}
        for n, item in enumerate(items):
            if not isinstance(item, dict):
                raise BadRequest(f"Invalid type for 'input[{n}]': expected an object")
            kind = item.get("type", "message")
            if kind == "message":
                role = item.get("role")
                if role not in _ROLES:
                    raise BadRequest(f"Invalid value for 'input[{n}].role': {role!r}")
                messages.append(Message("system" if role == "developer" else role, _content_text(item.get("content"))))
            elif kind == "function_call":
                raw = item.get("arguments", "")
                try:
                    args = json.loads(raw)
                except (TypeError, ValueError):
                    args = None
                call = tool_call(item.get("call_id", ""), item["name"], raw, args)
                names[call.id] = call.name
                last = messages[-1] if messages else None
                if last is not None and last.role == "assistant" and not any(m.role == "tool" for m in messages[-1:]):
                    messages[-1] = Message("assistant", last.content, (*last.tool_calls, call))
                else:
                    messages.append(Message("assistant", "", (call,)))
            elif kind == "function_call_output":
                call_id = item.get("call_id", "")
                output = item.get("output")
                messages.append(Message("tool", output if isinstance(output, str) else _content_text(output),
                                        tool_call_id=call_id, name=names.get(call_id)))
            else:
                raise BadRequest(f"Invalid value for 'input[{n}].type': {kind!r} is not supported by this server")
        tools = []
        for t in body.get("tools") or ():
            if t.get("type") != "function" or not t.get("name"):
                raise BadRequest("every tool needs type 'function' and a name (tools[].name)")
            tools.append(ToolSpec(t["name"], t.get("description") or "",
                                  t.get("parameters") or {"type": "object", "properties": {}}))
        choice = served_tool_choice(body.get("tool_choice"), tools)
        seed_headers = dict(headers)
        meta = body.get("metadata") or {}
        if SEED_HEADER not in seed_headers and isinstance(meta, dict) and meta.get(SEED_METADATA_KEY) is not None:
            seed_headers[SEED_HEADER] = str(meta[SEED_METADATA_KEY])
        return ChatRequest(model, tuple(messages), tuple(tools), {}, request_seed({}, seed_headers), choice)

    @staticmethod
    def choices(body: Mapping[str, Any]) -> int:
        return 1

    @staticmethod
    def encode(response: ChatResponse, model: str, more: tuple[ChatResponse, ...] = (),
               body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return response_object(response, model, body or {}, "completed")


def _output_items(response: ChatResponse) -> list[dict[str, Any]]:
    """The ``output`` items of an answer: its text as a message, then one item per tool call."""
    items: list[dict[str, Any]] = []
    if response.text or not response.tool_calls:
        items.append({"id": "msg_" + secrets.token_hex(12), "type": "message", "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": response.text, "annotations": [], "logprobs": []}]})
    for c in response.tool_calls:
        items.append({"id": "fc_" + secrets.token_hex(12), "type": "function_call", "status": "completed",
                      "call_id": c.id, "name": c.name, "arguments": c.raw_arguments})
    return items


def response_object(response: ChatResponse, model: str, body: Mapping[str, Any], status: str,
                    output: list[dict[str, Any]] | None = None, response_id: str | None = None,
                    created: int | None = None) -> dict[str, Any]:
    """The Response resource; ``status`` ``in_progress`` (stream start, no output, no usage) or ``completed``."""
    done = status == "completed"
    usage = response.usage
    tools = [{"type": "function", "name": t.get("name"), "description": t.get("description"),
              "parameters": t.get("parameters"), "strict": bool(t.get("strict"))}
             for t in body.get("tools") or () if isinstance(t, dict)]
    return {
        "id": response_id or "resp_" + secrets.token_hex(16), "object": "response",
        "created_at": created or int(time.time()), "status": status, "background": False, "error": None,
        "incomplete_details": None, "instructions": body.get("instructions"), "max_output_tokens":
        body.get("max_output_tokens"), "model": body.get("model") or model,
        "output": (output if output is not None else _output_items(response)) if done else [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True), "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None}, "store": False,
        "temperature": body.get("temperature", 1.0), "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"), "tools": tools, "top_p": body.get("top_p", 1.0),
        "truncation": "disabled", "metadata": body.get("metadata") or {},
        "usage": {"input_tokens": usage.input_tokens, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": usage.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": (usage.input_tokens or 0) + (usage.output_tokens or 0)} if done else None,
    }
