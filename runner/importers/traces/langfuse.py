"""Langfuse observation exports: ``GENERATION`` observations, as the public API or an export writes them.

A record is one observation (``{"id", "traceId", "type", "input", "output", ...}``, camelCase as the
API returns it or snake_case as the blob-storage export writes it), or a page of the API
(``{"data": [observation, ...]}``). Only ``GENERATION`` observations hold model calls; the rest are
counted. Langfuse stores whatever the integration gave it, so ``input`` is read as Chat Completions
messages (a list, or ``{"messages", "tools"}``; Anthropic content blocks inside them are understood,
and ``{"system", "messages"}`` is read as an Anthropic request), and ``output`` as an assistant message
(``tool_calls``, or ``tool_use`` blocks), a list of them, or a ``choices`` response. The conversation
is the observation's session where the export has one, else its trace. The same observations sent over
OTLP by Langfuse's own SDK (``langfuse.observation.*`` span attributes) are read by ``otlp``, with the two
readers of ``input`` and ``output`` here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runner.importers.traces import _messages as wire
from runner.importers.traces._core import BadRecord, Call, Msg, Sink, Where, context_of, conversation_of, sid, tools_of

#: Langfuse's observation types (its API's ``ObservationType``); a GENERATION holds a model call
_OBSERVATION_TYPES = frozenset({"SPAN", "GENERATION", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER", "EVALUATOR",
                                "EMBEDDING", "GUARDRAIL"})


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    v = obj.get(camel)
    return obj.get(snake) if v is None else v


def observation_input(value: Any) -> tuple[list[Msg], Any]:
    """A generation's ``input`` as messages, and the tools it offered where it says (else None)."""
    if isinstance(value, str):
        return [Msg("user", [value])], None
    if isinstance(value, list):
        return wire.openai_chat(value), None
    if isinstance(value, dict):
        if "system" in value and "messages" in value:
            return wire.anthropic(value.get("system"), value.get("messages")), value.get("tools")
        if "messages" in value:
            return wire.openai_chat(value["messages"]), value.get("tools")
        if "input" in value:
            return wire.responses(value.get("instructions"), value.get("input")), value.get("tools")
    raise BadRecord("wrong type", f"a generation's input is a JSON {type(value).__name__} Langfuse integrations "
                    "do not write")


def observation_calls(value: Any) -> list[Call]:
    """The tool calls of a generation's ``output``."""
    if isinstance(value, list):
        return [c for v in value for c in observation_calls(v)]
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("choices"), list):
        return observation_calls([ch.get("message") for ch in value["choices"] if isinstance(ch, dict)])
    if isinstance(value.get("message"), dict):
        return observation_calls(value["message"])
    if isinstance(value.get("content"), list):
        blocks = [c for m in wire.anthropic_blocks("assistant", value["content"]) for c in m.calls]
        if blocks:
            return blocks
    if value.get("type") == "function_call":
        return wire.responses_calls([value])
    return wire.openai_calls(value.get("tool_calls"))


def reader(sink: Sink) -> Callable[[Any, Where], None]:
    def observation(obs: Any, where: Where) -> None:
        if not isinstance(obs, dict):
            raise BadRecord("not a Langfuse observation", f"a JSON {type(obs).__name__}")
        if obs.get("type") != "GENERATION":
            kind = obs.get("type")  # a known type names its count; anything else is counted as one reason
            sink.note(f"observations of type {kind}" if kind in _OBSERVATION_TYPES else "observations of another type")
            return
        msgs, tools = observation_input(obs.get("input"))
        calls = observation_calls(obs.get("output"))
        if not calls:
            sink.note("model calls without a tool call")
            return
        meta: dict[str, Any] = obs["metadata"] if isinstance(obs.get("metadata"), dict) else {}
        trace = sid(_get(obs, "traceId", "trace_id"), "traceId")
        conv = conversation_of(sid(_get(obs, "sessionId", "session_id") or meta.get("session_id"), "sessionId"), msgs,
                               trace)
        context = context_of(msgs)
        offered = tools_of(tools if tools is not None else meta.get("tools"))
        span = sid(obs.get("id"), "the observation id")
        at = (trace, span) if span else (where.file, where.record)  # an observation exported twice is one call
        for i, call in enumerate(calls):
            sink.emit("langfuse", where, context, call, key=(*at, i), index=i, tools=offered, trace_id=trace,
                      span_id=span, conversation_id=conv)

    def record(value: Any, where: Where) -> None:
        if isinstance(value, dict) and isinstance(value.get("data"), list) and "type" not in value:
            for obs in value["data"]:
                try:
                    observation(obs, where)
                except BadRecord as exc:
                    sink.bad(where, exc, what=f"observation {str(obs.get('id') if isinstance(obs, dict) else '')[:40]}")
            return
        observation(value, where)
    return record


def looks_like(value: Any) -> bool:
    if isinstance(value, dict) and isinstance(value.get("data"), list) and value["data"]:
        value = value["data"][0]
    return isinstance(value, dict) and value.get("type") in ("GENERATION", "SPAN", "EVENT", "TOOL", "AGENT") and (
        "traceId" in value or "trace_id" in value)
