"""Vendor request/response pairs, one per JSON line: OpenAI Chat Completions, OpenAI Responses, Anthropic Messages.

What a gateway or a logging proxy stores: ``{"request": <the request body>, "response": <the
response body>}`` (``input`` / ``output`` are accepted for the two keys, and a response wrapped
as the batch APIs write it, ``{"status_code", "body"}``, is unwrapped). The request's messages
are the context; each tool call of the response is one trace:

- ``openai-chat``: ``messages`` (tool results are ``role: tool`` with ``tool_call_id``), ``tools``;
  calls in ``choices[].message.tool_calls``;
- ``openai-responses``: ``instructions`` and ``input`` items (``function_call``,
  ``function_call_output``), ``tools``; calls are the ``function_call`` items of ``output``;
- ``anthropic``: ``system``, ``messages`` with ``tool_use`` / ``tool_result`` blocks, ``tools``
  (``input_schema``); calls are the ``tool_use`` blocks of the response's ``content``.

The response's ``id`` is kept as the span id. Pairs carry no conversation id unless the record has
``conversation_id`` (or ``metadata.conversation_id``); otherwise one is made from the system text and
first user turn, which every request of one conversation repeats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runner.importers.traces import _messages as wire
from runner.importers.traces._core import BadRecord, Call, Msg, Sink, Where, context_of, conversation_of, sid, tools_of


def _pair(value: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    if not isinstance(value, dict):
        raise BadRecord("not a request/response pair", f"a JSON {type(value).__name__}")
    req = value.get("request", value.get("input"))
    resp = value.get("response", value.get("output"))
    if isinstance(resp, dict) and isinstance(resp.get("body"), dict) and "status_code" in resp:
        resp = resp["body"]
    if not isinstance(req, dict) or not isinstance(resp, dict):
        raise BadRecord("not a request/response pair", "expected {\"request\": {...}, \"response\": {...}}")
    return value, req, resp


def _chat_calls(resp: dict[str, Any]) -> list[Call]:
    choices = resp.get("choices")
    if not isinstance(choices, list):
        raise BadRecord("response without choices", "a Chat Completions response has a choices array")
    return [c for ch in choices if isinstance(ch, dict) and isinstance(ch.get("message"), dict)
            for c in wire.openai_calls(ch["message"].get("tool_calls"))]


def _anthropic_calls(resp: dict[str, Any]) -> list[Call]:
    return [c for m in wire.anthropic_blocks("assistant", resp.get("content")) for c in m.calls]


_KINDS: dict[str, tuple[Callable[[dict[str, Any]], list[Msg]], Callable[[dict[str, Any]], list[Call]]]] = {
    "openai-chat": (lambda r: wire.openai_chat(r.get("messages")), _chat_calls),
    "openai-responses": (lambda r: wire.responses(r.get("instructions"), r.get("input")),
                         lambda r: wire.responses_calls(r.get("output"))),
    "anthropic": (lambda r: wire.anthropic(r.get("system"), r.get("messages")), _anthropic_calls),
}


def reader(fmt: str, sink: Sink) -> Callable[[Any, Where], None]:
    messages_of, calls_of = _KINDS[fmt]

    def record(value: Any, where: Where) -> None:
        rec, req, resp = _pair(value)
        msgs = messages_of(req)
        calls = calls_of(resp)
        if not calls:
            sink.note("model calls without a tool call")
            return
        meta: dict[str, Any] = rec["metadata"] if isinstance(rec.get("metadata"), dict) else {}
        conv = conversation_of(sid(rec.get("conversation_id") or meta.get("conversation_id"), "conversation_id"), msgs,
                               f"{where.file}:{where.record}")
        context = context_of(msgs)
        tools = tools_of(req.get("tools"))
        span = sid(resp.get("id"), "the response id")
        trace = sid(rec.get("trace_id") or meta.get("trace_id"), "trace_id")
        # a pair's place: its conversation, its response (ids repeat: a server may answer every request with the
        # same one), its turn, the call's position; the same pair logged twice is the same call
        turn = len(msgs)
        for i, call in enumerate(calls):
            key = (conv, span or f"{where.file}:{where.record}", turn, i, call.name, str(call.args)[:256])
            sink.emit(fmt, where, context, call, key=key, index=i, tools=tools, trace_id=trace, span_id=span,
                      conversation_id=conv)
    return record


def detect(value: Any) -> str | None:
    """Which pair format ``value`` is, or None."""
    if not isinstance(value, dict):
        return None
    req, resp = value.get("request", value.get("input")), value.get("response", value.get("output"))
    if isinstance(resp, dict) and isinstance(resp.get("body"), dict):
        resp = resp["body"]
    if not isinstance(req, dict) or not isinstance(resp, dict):
        return None
    if "choices" in resp:
        return "openai-chat"
    if isinstance(resp.get("output"), list) or "input" in req:
        return "openai-responses"
    if isinstance(resp.get("content"), list) and "messages" in req:
        return "anthropic"
    return None
