"""Each vendor's message list → normalised ``Msg`` es: one function per wire shape, shared by every reader.

The same shapes recur across formats — OpenAI chat messages are what Langfuse stores and what
OpenInference flattens; Anthropic content blocks appear in request logs and inside the older
flattened OTel attributes — so each is read once, here.
"""

from __future__ import annotations

from typing import Any

from runner.importers.traces._core import BadRecord, Call, Msg, text_of

_SYSTEM_ROLES = ("system", "developer")


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRecord("wrong type", f"{what} is a JSON {type(value).__name__}, not an array")
    return value


def _dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRecord("wrong type", f"{what} is a JSON {type(value).__name__}, not an object")
    return value


def openai_calls(tool_calls: Any) -> list[Call]:
    out = []
    for tc in _list(tool_calls, "tool_calls"):
        tc = _dict(tc, "a tool call")
        fn: dict[str, Any] = tc["function"] if isinstance(tc.get("function"), dict) else tc
        out.append(Call(tc.get("id"), fn.get("name") or "", fn.get("arguments")))
    return out


def openai_chat(messages: Any) -> list[Msg]:
    """Chat Completions messages (also Langfuse's and LiteLLM's stored inputs)."""
    out = []
    for m in _list(messages, "messages"):
        m = _dict(m, "a message")
        role = m.get("role")
        if role in _SYSTEM_ROLES:
            out.append(Msg("system", [text_of(m.get("content"))]))
        elif role == "user":
            content = m.get("content")
            if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
                out.extend(anthropic_blocks("user", content))  # Anthropic blocks stored as a chat message
            else:
                out.append(Msg("user", [text_of(content)]))
        elif role == "assistant":
            calls = openai_calls(m.get("tool_calls"))
            content = m.get("content")
            if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content):
                out.extend(anthropic_blocks("assistant", content))
            else:
                out.append(Msg("assistant", [], calls))
        elif role in ("tool", "function"):
            out.append(Msg("tool", result_of=m.get("tool_call_id"), result_name=m.get("name"), result=m.get("content")))
    return out


def anthropic_blocks(role: str, content: Any) -> list[Msg]:
    """One Anthropic message's content (a string or blocks) → messages: its text, tool_use calls, tool_results."""
    if isinstance(content, str) or content is None:
        return [Msg(role, [content or ""]) if role != "assistant" else Msg("assistant")]
    msgs: list[Msg] = []
    texts: list[str] = []
    calls: list[Call] = []
    for b in _list(content, "content"):
        if isinstance(b, str):
            texts.append(b)
            continue
        b = _dict(b, "a content block")
        kind = b.get("type")
        if kind == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
        elif kind == "tool_use":
            calls.append(Call(b.get("id"), b.get("name") or "", b.get("input")))
        elif kind == "tool_result":
            result = b.get("content")
            if isinstance(result, list):
                result = text_of(result)
            msgs.append(Msg("tool", result_of=b.get("tool_use_id"), result=result))
    if role == "assistant":
        msgs.append(Msg("assistant", [], calls))
    elif texts:
        msgs.append(Msg(role, texts))
    return msgs


def anthropic(system: Any, messages: Any) -> list[Msg]:
    out = []
    if system:
        out.append(Msg("system", [text_of(system)]))
    for m in _list(messages, "messages"):
        m = _dict(m, "a message")
        out.extend(anthropic_blocks("assistant" if m.get("role") == "assistant" else "user", m.get("content")))
    return out


def responses(instructions: Any, items: Any) -> list[Msg]:
    """Responses API ``instructions`` and ``input`` (a string or items) → messages."""
    out = []
    if instructions:
        out.append(Msg("system", [text_of(instructions)]))
    if isinstance(items, str):
        return [*out, Msg("user", [items])]
    for it in _list(items, "input"):
        it = _dict(it, "an input item")
        kind = it.get("type", "message")
        if kind == "message" or ("role" in it and kind not in ("function_call", "function_call_output")):
            role = it.get("role")
            if role in _SYSTEM_ROLES:
                out.append(Msg("system", [text_of(it.get("content"))]))
            elif role == "user":
                out.append(Msg("user", [text_of(it.get("content"))]))
        elif kind == "function_call":
            out.append(Msg("assistant", [], [Call(it.get("call_id"), it.get("name") or "", it.get("arguments"))]))
        elif kind == "function_call_output":
            out.append(Msg("tool", result_of=it.get("call_id"), result=it.get("output")))
    return out


def responses_calls(output: Any) -> list[Call]:
    return [Call(it.get("call_id"), it.get("name") or "", it.get("arguments"))
            for it in _list(output, "output") if isinstance(it, dict) and it.get("type") == "function_call"]


def genai(messages: Any) -> list[Msg]:
    """OpenTelemetry GenAI ``gen_ai.input.messages`` / ``gen_ai.output.messages``: ``{role, parts: [...]}`` with
    parts ``text`` (``content``), ``tool_call`` (``id``, ``name``, ``arguments``) and ``tool_call_response``
    (``id``, ``response``)."""
    out = []
    for m in _list(messages, "messages"):
        if m.__class__ is not dict:  # (the checks inline where they pass: every span holds its whole history)
            m = _dict(m, "a message")
        role = m.get("role")
        role = "system" if role in _SYSTEM_ROLES else role
        texts: list[str] = []
        calls: list[Call] = []
        for p in _list(m.get("parts"), "parts"):
            if p.__class__ is not dict:
                p = _dict(p, "a message part")
            kind = p.get("type")
            if kind == "text":
                content = p.get("content")
                if isinstance(content, str):
                    texts.append(content)
            elif kind == "tool_call":
                calls.append(Call(p.get("id"), p.get("name") or "", p.get("arguments")))
            elif kind == "tool_call_response":
                # ``response`` is the schema's name (docs/gen-ai/gen-ai-input-messages.json, ToolCallResponsePart);
                # ``result`` is what the registry's own example of gen_ai.input.messages writes (registry.yaml)
                out.append(Msg("tool", result_of=p.get("id"), result_name=p.get("name"),
                               result=p.get("response", p.get("result"))))
        if role == "assistant":
            out.append(Msg("assistant", [], calls))
        elif role in ("system", "user") and texts:
            out.append(Msg(role, texts))
    return out
