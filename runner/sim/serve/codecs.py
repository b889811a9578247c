"""The server's side of both wire formats: request → neutral ``ChatRequest``, neutral response → body.

The mirror image of ``runner/providers/openai_wire.py`` and ``anthropic_wire.py``:
what those encode, these decode, and the other way round, so that a request that
travels over HTTP reaches the simulated agent as the same ``ChatRequest`` the
in-process path builds — same messages, same tools in the same order, same seed —
and its answer comes back as the same ``ChatResponse``. Error bodies are written in
each vendor's own style, because the client's classification reads them.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from typing import Any

from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec
from runner.sim.serve.options import Rule

SEED_HEADER = "x-trialgrid-seed"


class BadRequest(Exception):
    """The request itself is malformed (not a parameter rule): a 400 naming what is wrong.

    Internal control flow: the server turns it into its 400 answer; it never reaches a caller.
    """


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text")
    raise BadRequest(f"content must be a string or a list of parts, got {type(content).__name__}")


def _seed(body: Mapping[str, Any], headers: Mapping[str, str]) -> int | None:
    value = body.get("seed")
    if value is None:
        value = headers.get(SEED_HEADER)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        raise BadRequest(f"seed must be an integer, got {value!r}") from None


def _call(raw_id: str, name: str, raw: str, args: Any) -> ToolCall:
    ok = isinstance(args, dict)
    return ToolCall(name=name, raw_arguments=raw, arguments=args if ok else None, id=raw_id,
                    parse_error=None if ok else "not a JSON object")


class _OpenAICodec:
    api = "openai"

    @staticmethod
    def key_of(headers: Mapping[str, str]) -> str | None:
        auth = headers.get("authorization", "")
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None

    @staticmethod
    def decode(body: Any, headers: Mapping[str, str]) -> ChatRequest:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        model, raw_messages = body.get("model"), body.get("messages")
        if not isinstance(model, str) or not model:
            raise BadRequest("you must provide a model parameter")
        if not isinstance(raw_messages, list) or not raw_messages:
            raise BadRequest("'messages' must be a non-empty array")
        messages = []
        for m in raw_messages:
            role = m.get("role")
            if role not in ("system", "developer", "user", "assistant", "tool"):
                raise BadRequest(f"invalid role {role!r}")
            calls = []
            for c in m.get("tool_calls") or ():
                raw = c["function"].get("arguments", "")
                try:
                    args = json.loads(raw)
                except ValueError:
                    args = None
                calls.append(_call(c.get("id", ""), c["function"]["name"], raw, args))
            messages.append(Message("system" if role == "developer" else role, _text(m.get("content")),
                                    tuple(calls), m.get("tool_call_id"), m.get("name")))
        tools = []
        for t in body.get("tools") or ():
            f = t.get("function") or {}
            if not f.get("name"):
                raise BadRequest("every tool needs function.name")
            tools.append(ToolSpec(f["name"], f.get("description", ""), f.get("parameters") or {"type": "object", "properties": {}}))
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            choice = (choice.get("function") or {}).get("name")
        return ChatRequest(model, tuple(messages), tuple(tools), {}, _seed(body, headers), choice)

    @staticmethod
    def encode(response: ChatResponse, model: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": response.text or None, "refusal": None}
        if response.tool_calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.raw_arguments}}
                                     for c in response.tool_calls]
        usage = response.usage
        return {
            "id": "chatcmpl-" + secrets.token_hex(12), "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if response.tool_calls else "stop"}],
            "usage": {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                      "total_tokens": usage.input_tokens + usage.output_tokens},
        }

    @staticmethod
    def error(status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
              code: str | None = None) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": param, "code": code}}

    @staticmethod
    def rule_error(rule: Rule, body: Mapping[str, Any], has_tools: bool) -> dict[str, Any]:
        p = rule.param
        if rule.action == "drop":
            msg = f"Unsupported parameter: '{p}' is not supported with this model."
            return _OpenAICodec.error(400, msg, param=p, code="unsupported_parameter")
        if rule.action == "rename":
            msg = f"Unsupported parameter: '{p}' is not supported with this model. Use '{rule.new_name}' instead."
            return _OpenAICodec.error(400, msg, param=p, code="unsupported_parameter")
        when = " when tools are present" if rule.when_tools else ""
        msg = (f"Unsupported value: '{p}' does not support {json.dumps(body.get(p))} with this model{when}. "
               f"Set {p} to {_shown(rule.value)}.")
        return _OpenAICodec.error(400, msg, param=p, code="unsupported_value")

    @staticmethod
    def auth_error(key: str | None) -> dict[str, Any]:
        # Like the real API this echoes what it was given — in full, to be hostile on
        # purpose: the client must scrub it before it reaches a row or a terminal.
        return _OpenAICodec.error(401, f"Incorrect API key provided: {key or '(none)'}. You can find your API key "
                                      "in your account settings.", code="invalid_api_key")

    @staticmethod
    def kind_for(status: int) -> str:
        return {429: "rate_limit_error", 500: "server_error", 503: "server_error"}.get(status, "invalid_request_error")


class _AnthropicCodec:
    api = "anthropic"

    @staticmethod
    def key_of(headers: Mapping[str, str]) -> str | None:
        key = headers.get("x-api-key")
        if key:
            return key.strip()
        return _OpenAICodec.key_of(headers)

    @staticmethod
    def decode(body: Any, headers: Mapping[str, str]) -> ChatRequest:
        if not headers.get("anthropic-version"):
            raise BadRequest("anthropic-version: header is required")
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        model, turns = body.get("model"), body.get("messages")
        if not isinstance(model, str) or not model:
            raise BadRequest("model: Field required")
        if not isinstance(body.get("max_tokens"), int):
            raise BadRequest("max_tokens: Field required")
        if not isinstance(turns, list) or not turns:
            raise BadRequest("messages: Field required")
        messages: list[Message] = []
        system = body.get("system")
        if system:
            messages.append(Message("system", _text(system)))
        for turn in turns:
            role = turn.get("role")
            if role not in ("user", "assistant"):
                raise BadRequest(f"messages: Input tag {role!r} found using 'role' does not match any of the expected tags")
            content = turn.get("content")
            if isinstance(content, str):
                messages.append(Message(role, content))
                continue
            texts, calls = [], []
            for block in content or ():
                kind = block.get("type")
                if kind == "text":
                    texts.append(block.get("text", ""))
                elif kind == "tool_use":
                    value = block.get("input")
                    if isinstance(value, str):
                        try:
                            parsed = json.loads(value)
                        except ValueError:
                            parsed = None
                        calls.append(_call(block.get("id", ""), block["name"], value, parsed))
                    else:
                        calls.append(_call(block.get("id", ""), block["name"], json.dumps(value, separators=(",", ":")), value))
                elif kind == "tool_result":
                    messages.append(Message("tool", _text(block.get("content")), tool_call_id=block.get("tool_use_id")))
            if texts or calls:
                messages.append(Message(role, "".join(texts), tuple(calls)))
        tools = []
        for t in body.get("tools") or ():
            if not t.get("name"):
                raise BadRequest("tools: every tool needs a name")
            tools.append(ToolSpec(t["name"], t.get("description", ""), t.get("input_schema") or {"type": "object", "properties": {}}))
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            choice = {"auto": "auto", "none": "none", "any": "required"}.get(str(choice.get("type")), choice.get("name"))
        return ChatRequest(model, tuple(messages), tuple(tools), {}, _seed(body, headers), choice)

    @staticmethod
    def encode(response: ChatResponse, model: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": response.text}] if response.text else []
        for c in response.tool_calls:
            # a broken call (arguments that do not parse) goes as its raw string: the
            # Messages format has no other place for it, and the client reads it back as such
            content.append({"type": "tool_use", "id": c.id, "name": c.name,
                            "input": c.arguments if c.arguments is not None else c.raw_arguments})
        return {
            "id": "msg_" + secrets.token_hex(12), "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "tool_use" if response.tool_calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens},
        }

    @staticmethod
    def error(status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
              code: str | None = None) -> dict[str, Any]:
        return {"type": "error", "error": {"type": kind, "message": message}}

    @staticmethod
    def rule_error(rule: Rule, body: Mapping[str, Any], has_tools: bool) -> dict[str, Any]:
        p = rule.param
        if rule.action == "drop":
            return _AnthropicCodec.error(400, f"{p}: Extra inputs are not permitted")
        if rule.action == "rename":
            return _AnthropicCodec.error(400, f"{p}: Extra inputs are not permitted. Use '{rule.new_name}' instead.")
        when = " when tools are present" if rule.when_tools else ""
        return _AnthropicCodec.error(400, f"{p}: Input should be {_shown(rule.value)}{when}. Set {p} to {_shown(rule.value)}.")

    @staticmethod
    def auth_error(key: str | None) -> dict[str, Any]:
        return _AnthropicCodec.error(401, f"invalid x-api-key: {key or '(none)'}", kind="authentication_error")

    @staticmethod
    def kind_for(status: int) -> str:
        return {429: "rate_limit_error", 500: "api_error", 503: "overloaded_error"}.get(status, "invalid_request_error")


def _shown(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else json.dumps(value)


CODECS: dict[str, type[_OpenAICodec] | type[_AnthropicCodec]] = {"openai": _OpenAICodec, "anthropic": _AnthropicCodec}
