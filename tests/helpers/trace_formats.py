"""A phantom trace written out in each format ``import traces`` reads, for the round-trip (equivalence) tests.

The conversation is the trace's: its system prompt, its user turn, then for each earlier tool
result an assistant call and the tool's answer, and finally the model call holding the trace's
calls. Every writer follows the format's own spec (attribute names, message shapes), so what is
imported back must give the same baseline verdicts as the trace itself.
"""

from __future__ import annotations

import json
from typing import Any

from runner.probes.phantom import Trace


def _user(t: Trace) -> list[str]:
    return [t.context.user] if isinstance(t.context.user, str) else list(t.context.user)


def _history(t: Trace) -> list[tuple[str, str, Any]]:
    """(call id, tool, result) of each earlier tool result."""
    return [(f"{t.id}-r{i}", r["tool"], r["result"]) for i, r in enumerate(t.context.tool_results)]


def _calls(t: Trace) -> list[tuple[str, str, dict[str, Any]]]:
    return [(f"{t.id}-c{i}", c.tool, c.args) for i, c in enumerate(t.calls)]


def openai_messages(t: Trace) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": t.context.system}]
    msgs += [{"role": "user", "content": u} for u in _user(t)]
    for cid, tool, result in _history(t):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": tool, "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": json.dumps(result)})
    return msgs


def openai_chat(t: Trace) -> dict[str, Any]:
    return {"request": {"model": "m", "messages": openai_messages(t)},
            "response": {"id": f"chatcmpl-{t.id}", "object": "chat.completion", "choices": [{"index": 0, "message": {
                "role": "assistant", "content": None, "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
                    for cid, tool, args in _calls(t)]}, "finish_reason": "tool_calls"}]}}


def openai_responses(t: Trace) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": u}]}
                                   for u in _user(t)]
    for cid, tool, result in _history(t):
        items.append({"type": "function_call", "call_id": cid, "name": tool, "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": cid, "output": json.dumps(result)})
    return {"request": {"model": "m", "instructions": t.context.system, "input": items},
            "response": {"id": f"resp_{t.id}", "object": "response", "output": [
                {"type": "function_call", "id": f"fc_{i}", "call_id": cid, "name": tool, "arguments": json.dumps(args)}
                for i, (cid, tool, args) in enumerate(_calls(t))]}}


def anthropic(t: Trace) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": u} for u in _user(t)]
    for cid, tool, result in _history(t):
        msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": tool, "input": {}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid,
                                                  "content": json.dumps(result)}]})
    return {"request": {"model": "m", "max_tokens": 512, "system": t.context.system, "messages": msgs},
            "response": {"id": f"msg_{t.id}", "type": "message", "role": "assistant", "stop_reason": "tool_use",
                         "content": [{"type": "tool_use", "id": cid, "name": tool, "input": args}
                                     for cid, tool, args in _calls(t)]}}


def langfuse(t: Trace) -> dict[str, Any]:
    pair = openai_chat(t)
    return {"id": f"obs-{t.id}", "traceId": f"trace-{t.id}", "type": "GENERATION", "name": "OpenAI-generation",
            "input": pair["request"]["messages"], "output": pair["response"]["choices"][0]["message"]}


# -- OTLP ------------------------------------------------------------------------------------------------------------

def _any(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v if isinstance(v, str) else json.dumps(v)}


def otlp(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": _any("t")}]},
                               "scopeSpans": [{"scope": {"name": "writer"}, "spans": spans}]}]}


def _span(n: int, attrs: dict[str, Any], name: str = "chat m") -> dict[str, Any]:
    return {"traceId": f"{n + 1:032x}", "spanId": f"{n + 1:016x}", "name": name, "kind": 3,
            "startTimeUnixNano": "1", "endTimeUnixNano": "2",
            "attributes": [{"key": k, "value": _any(v)} for k, v in attrs.items() if v is not None]}


def genai_span(t: Trace, n: int) -> dict[str, Any]:
    inp: list[dict[str, Any]] = [{"role": "user", "parts": [{"type": "text", "content": u}]} for u in _user(t)]
    for cid, tool, result in _history(t):
        inp.append({"role": "assistant", "parts": [{"type": "tool_call", "id": cid, "name": tool, "arguments": {}}]})
        inp.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": cid, "response": result}]})
    out = [{"role": "assistant", "finish_reason": "tool_call", "parts": [
        {"type": "tool_call", "id": cid, "name": tool, "arguments": args} for cid, tool, args in _calls(t)]}]
    return _span(n, {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                     "gen_ai.system_instructions": [{"type": "text", "content": t.context.system}],
                     "gen_ai.input.messages": inp, "gen_ai.output.messages": out})


def flat_span(t: Trace, n: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.system": "openai", "gen_ai.request.model": "m"}
    for i, m in enumerate(openai_messages(t)):
        attrs[f"gen_ai.prompt.{i}.role"] = m["role"]
        if m.get("content") is not None:
            attrs[f"gen_ai.prompt.{i}.content"] = m["content"]
        if m.get("tool_call_id"):
            attrs[f"gen_ai.prompt.{i}.tool_call_id"] = m["tool_call_id"]
        for j, tc in enumerate(m.get("tool_calls") or []):
            attrs[f"gen_ai.prompt.{i}.tool_calls.{j}.id"] = tc["id"]
            attrs[f"gen_ai.prompt.{i}.tool_calls.{j}.name"] = tc["function"]["name"]
            attrs[f"gen_ai.prompt.{i}.tool_calls.{j}.arguments"] = tc["function"]["arguments"]
    attrs["gen_ai.completion.0.role"] = "assistant"
    attrs["gen_ai.completion.0.finish_reason"] = "tool_calls"
    for j, (cid, tool, args) in enumerate(_calls(t)):
        attrs[f"gen_ai.completion.0.tool_calls.{j}.id"] = cid
        attrs[f"gen_ai.completion.0.tool_calls.{j}.name"] = tool
        attrs[f"gen_ai.completion.0.tool_calls.{j}.arguments"] = json.dumps(args)
    return _span(n, attrs, "openai.chat")


def openinference_span(t: Trace, n: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.system": "openai"}
    for i, m in enumerate(openai_messages(t)):
        p = f"llm.input_messages.{i}.message"
        attrs[f"{p}.role"] = m["role"]
        if m.get("content") is not None:
            attrs[f"{p}.content"] = m["content"]
        if m.get("tool_call_id"):
            attrs[f"{p}.tool_call_id"] = m["tool_call_id"]
        for j, tc in enumerate(m.get("tool_calls") or []):
            attrs[f"{p}.tool_calls.{j}.tool_call.id"] = tc["id"]
            attrs[f"{p}.tool_calls.{j}.tool_call.function.name"] = tc["function"]["name"]
            attrs[f"{p}.tool_calls.{j}.tool_call.function.arguments"] = tc["function"]["arguments"]
    attrs["llm.output_messages.0.message.role"] = "assistant"
    for j, (cid, tool, args) in enumerate(_calls(t)):
        p = f"llm.output_messages.0.message.tool_calls.{j}.tool_call"
        attrs[f"{p}.id"], attrs[f"{p}.function.name"], attrs[f"{p}.function.arguments"] = cid, tool, json.dumps(args)
    return _span(n, attrs, "ChatCompletion")


#: format name → (the --format it imports as, one JSON line per trace)
WRITERS: dict[str, tuple[str, Any]] = {
    "otel-genai": ("otlp", lambda t, n: otlp([genai_span(t, n)])),
    "otel-genai-flat": ("otlp", lambda t, n: otlp([flat_span(t, n)])),
    "openinference": ("otlp", lambda t, n: otlp([openinference_span(t, n)])),
    "openai-chat": ("openai-chat", lambda t, n: openai_chat(t)),
    "openai-responses": ("openai-responses", lambda t, n: openai_responses(t)),
    "anthropic": ("anthropic", lambda t, n: anthropic(t)),
    "langfuse": ("langfuse", lambda t, n: langfuse(t)),
}
