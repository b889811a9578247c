"""The server's side of both wire formats: request → neutral ``ChatRequest``, neutral response → body.

The mirror image of ``runner/providers/openai_wire.py`` and ``anthropic_wire.py``:
what those encode, these decode, and the other way round, so that a request that
travels over HTTP reaches the simulated agent as the same ``ChatRequest`` the
in-process path builds — same messages, same tools in the same order, same seed —
and its answer comes back as the same ``ChatResponse``, with one exception the
Messages format forces: a tool call whose arguments do not parse goes out as an
object (``tool_input.py``). Error bodies are written in each vendor's own style,
because the client's classification reads them.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec
from runner.providers.seed_channel import SEED_HEADER
from runner.providers.toolchoice import neutral_tool_choice
from runner.sim.serve.options import Rule
from runner.sim.serve.tool_input import tool_input

_FINE_GRAINED_BETA = "fine-grained-tool-streaming-2025-05-14"


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


def request_seed(body: Mapping[str, Any], headers: Mapping[str, str]) -> int | None:
    value = body.get("seed")
    if value is None:
        value = headers.get(SEED_HEADER)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        raise BadRequest(f"seed must be an integer, got {value!r}") from None


def tool_call(raw_id: str, name: str, raw: str, args: Any) -> ToolCall:
    ok = isinstance(args, dict)
    return ToolCall(name=name, raw_arguments=raw, arguments=args if ok else None, id=raw_id,
                    parse_error=None if ok else "not a JSON object")


class OpenAICodec:
    api = "openai"
    #: the wire format of the bodies (an API served at other paths, Azure's, shares OpenAI's)
    wire = "openai"
    #: the status a key the server does not accept is answered with
    auth_status = 401

    @staticmethod
    def model_from(request: web.Request) -> str | None:
        """The model the request's path names (None: the body's ``model`` is the model)."""
        return None

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
                calls.append(tool_call(c.get("id", ""), c["function"]["name"], raw, args))
            messages.append(Message("system" if role == "developer" else role, _text(m.get("content")),
                                    tuple(calls), m.get("tool_call_id"), m.get("name")))
        tools = []
        for t in body.get("tools") or ():
            f = t.get("function") or {}
            if not f.get("name"):
                raise BadRequest("every tool needs function.name")
            tools.append(ToolSpec(f["name"], f.get("description", ""), f.get("parameters") or {"type": "object", "properties": {}}))
        choice = served_tool_choice(body.get("tool_choice"), tools)
        return ChatRequest(model, tuple(messages), tuple(tools), {}, request_seed(body, headers), choice)

    @staticmethod
    def choices(body: Mapping[str, Any]) -> int:
        """How many choices the request asks for (``n``)."""
        n = body.get("n", 1)
        if n is None:
            return 1
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 128:
            raise BadRequest(f"Invalid value for 'n': expected an integer from 1 to 128, got {n!r}")
        return n

    @staticmethod
    def encode(response: ChatResponse, model: str, more: tuple[ChatResponse, ...] = ()) -> dict[str, Any]:
        """The completion; ``more`` are the answers of choices 1.. when ``n`` > 1."""
        answers = (response, *more)
        usage = response.usage
        return {
            "id": "chatcmpl-" + secrets.token_hex(12), "object": "chat.completion", "created": int(time.time()),
            "model": model, "system_fingerprint": None,
            "choices": [{"index": i, "message": OpenAICodec.message(a), "logprobs": None,
                         "finish_reason": "tool_calls" if a.tool_calls else "stop"} for i, a in enumerate(answers)],
            "usage": {"prompt_tokens": usage.input_tokens,
                      "completion_tokens": sum(a.usage.output_tokens or 0 for a in answers),
                      "total_tokens": (usage.input_tokens or 0) + sum(a.usage.output_tokens or 0 for a in answers)},
        }

    @staticmethod
    def message(response: ChatResponse) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": response.text or None, "refusal": None}
        if response.tool_calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.raw_arguments}}
                                     for c in response.tool_calls]
        return message

    @staticmethod
    def error(status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
              code: str | None = None) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": param, "code": code}}

    @staticmethod
    def params_of(body: Mapping[str, Any]) -> Mapping[str, Any]:
        """Where a request keeps its parameters, as a rule matches them: the body's top level."""
        return body

    @staticmethod
    def rule_error(rule: Rule, body: Mapping[str, Any], has_tools: bool) -> dict[str, Any]:
        p = rule.param
        if rule.action == "drop":
            msg = f"Unsupported parameter: '{p}' is not supported with this model."
            return OpenAICodec.error(400, msg, param=p, code="unsupported_parameter")
        if rule.action == "rename":
            msg = f"Unsupported parameter: '{p}' is not supported with this model. Use '{rule.new_name}' instead."
            return OpenAICodec.error(400, msg, param=p, code="unsupported_parameter")
        when = " when tools are present" if rule.when_tools else ""
        msg = (f"Unsupported value: '{p}' does not support {json.dumps(body.get(p))} with this model{when}. "
               f"Set {p} to {_shown(rule.value)}.")
        return OpenAICodec.error(400, msg, param=p, code="unsupported_value")

    @staticmethod
    def auth_error(key: str | None) -> dict[str, Any]:
        # Like the real API this echoes what it was given — in full, to be hostile on
        # purpose: the client must scrub it before it reaches a row or a terminal.
        return OpenAICodec.error(401, f"Incorrect API key provided: {key or '(none)'}. You can find your API key "
                                      "in your account settings.", code="invalid_api_key")

    @staticmethod
    def kind_for(status: int) -> str:
        return {429: "rate_limit_error", 500: "server_error", 503: "server_error", 529: "server_error",
                404: "invalid_request_error"}.get(status, "invalid_request_error")

    #: what the vendor answers when it is overloaded: OpenAI has no 529, it says so with a 503
    overloaded = (503, "server_error", "The server is overloaded. Please try again later.")

    @staticmethod
    def unknown_model(model: str) -> tuple[int, dict[str, Any]]:
        return 404, OpenAICodec.error(404, f"The model `{model}` does not exist or you do not have access to it.",
                                      kind="invalid_request_error", code="model_not_found")


class AzureCodec(OpenAICodec):
    """Azure OpenAI: Chat Completions bodies, the key in the ``api-key`` header (or an Entra ID bearer token)."""

    api = "azure"

    @staticmethod
    def key_of(headers: Mapping[str, str]) -> str | None:
        key = headers.get("api-key")
        return key.strip() if key is not None else OpenAICodec.key_of(headers)

    @staticmethod
    def auth_error(key: str | None) -> dict[str, Any]:
        # Azure's words, which name neither the key nor the variable
        return {"error": {"code": "401", "message": "Access denied due to invalid subscription key or wrong API "
                                                    "endpoint. Make sure to provide a valid key for an active "
                                                    "subscription and use a correct regional API endpoint for "
                                                    "your resource."}}

    @staticmethod
    def model_from(request: web.Request) -> str | None:
        return request.match_info.get("deployment")  # the deployments API: the deployment is the model

    @staticmethod
    def not_found() -> dict[str, Any]:
        """Azure's answer to a deployments route without ``api-version``, or to a path it does not serve."""
        return {"error": {"code": "404", "message": "Resource not found"}}


class AnthropicCodec:
    api = "anthropic"
    wire = "anthropic"
    auth_status = 401

    @staticmethod
    def model_from(request: web.Request) -> str | None:
        return None

    @staticmethod
    def key_of(headers: Mapping[str, str]) -> str | None:
        key = headers.get("x-api-key")
        if key:
            return key.strip()
        return OpenAICodec.key_of(headers)

    @staticmethod
    def decode(body: Any, headers: Mapping[str, str], *, counting: bool = False) -> ChatRequest:
        if not headers.get("anthropic-version"):
            raise BadRequest("anthropic-version: header is required")
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        model, turns = body.get("model"), body.get("messages")
        if not isinstance(model, str) or not model:
            raise BadRequest("model: Field required")
        if not counting and not isinstance(body.get("max_tokens"), int):
            raise BadRequest("max_tokens: Field required")
        if not isinstance(turns, list) or not turns:
            raise BadRequest("messages: Field required")
        messages: list[Message] = []
        system = body.get("system")
        if system:
            messages.append(Message("system", _text(system)))
        for n, turn in enumerate(turns):
            role = turn.get("role")
            if role not in ("user", "assistant"):
                raise BadRequest(f"messages: Input tag {role!r} found using 'role' does not match any of the expected tags")
            content = turn.get("content")
            if isinstance(content, str):
                messages.append(Message(role, content))
                continue
            texts, calls = [], []
            for k, block in enumerate(content or ()):
                kind = block.get("type")
                if kind == "text":
                    texts.append(block.get("text", ""))
                elif kind == "tool_use":
                    value = block.get("input")
                    if not isinstance(value, dict):  # the API takes only an object here, as it only sends one
                        raise BadRequest(f"messages.{n}.content.{k}.tool_use.input: Input should be a valid dictionary")
                    calls.append(tool_call(block.get("id", ""), block["name"], json.dumps(value, separators=(",", ":")), value))
                elif kind == "tool_result":
                    messages.append(Message("tool", _text(block.get("content")), tool_call_id=block.get("tool_use_id")))
            if texts or calls:
                messages.append(Message(role, "".join(texts), tuple(calls)))
        tools = []
        for t in body.get("tools") or ():
            if not t.get("name"):
                raise BadRequest("tools: every tool needs a name")
            tools.append(ToolSpec(t["name"], t.get("description", ""), t.get("input_schema") or {"type": "object", "properties": {}}))
        choice = served_tool_choice(body.get("tool_choice"), tools)
        return ChatRequest(model, tuple(messages), tuple(tools), {}, request_seed(body, headers), choice)

    @staticmethod
    def choices(body: Mapping[str, Any]) -> int:
        return 1  # the Messages API has no n

    @staticmethod
    def eager_tools(body: Mapping[str, Any], headers: Mapping[str, str]) -> frozenset[str]:
        """The tools whose input a stream sends unbuffered: ``eager_input_streaming: true``, or — for a
        tool that leaves it unset — the older ``anthropic-beta: fine-grained-tool-streaming-2025-05-14``."""
        legacy = _FINE_GRAINED_BETA in (b.strip() for b in headers.get("anthropic-beta", "").split(","))
        return frozenset(t["name"] for t in body.get("tools") or () if t.get("eager_input_streaming", legacy) is True)

    @staticmethod
    def encode(response: ChatResponse, model: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": response.text}] if response.text else []
        for c in response.tool_calls:
            # the sim's own call id, as on every route (ids are opaque to the API and the SDKs; see tool_input
            # for a call whose arguments do not parse)
            content.append({"type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(c)})
        return {
            "id": "msg_" + secrets.token_hex(12), "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "tool_use" if response.tool_calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens},
        }

    @staticmethod
    def error(status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
              code: str | None = None) -> dict[str, Any]:
        # the request_id is added by the server's middleware (runner/sim/serve/vendor_http.py)
        return {"type": "error", "error": {"type": kind, "message": message}}

    @staticmethod
    def params_of(body: Mapping[str, Any]) -> Mapping[str, Any]:
        """Where a request keeps its parameters, as a rule matches them: the body's top level."""
        return body

    @staticmethod
    def rule_error(rule: Rule, body: Mapping[str, Any], has_tools: bool) -> dict[str, Any]:
        p = rule.param
        if rule.action == "drop":
            return AnthropicCodec.error(400, f"{p}: Extra inputs are not permitted")
        if rule.action == "rename":
            return AnthropicCodec.error(400, f"{p}: Extra inputs are not permitted. Use '{rule.new_name}' instead.")
        when = " when tools are present" if rule.when_tools else ""
        return AnthropicCodec.error(400, f"{p}: Input should be {_shown(rule.value)}{when}. Set {p} to {_shown(rule.value)}.")

    @staticmethod
    def auth_error(key: str | None) -> dict[str, Any]:
        return AnthropicCodec.error(401, f"invalid x-api-key: {key or '(none)'}", kind="authentication_error")

    @staticmethod
    def kind_for(status: int) -> str:
        return {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 405: "invalid_request_error", 413: "request_too_large",
                429: "rate_limit_error", 500: "api_error", 503: "api_error", 504: "timeout_error",
                529: "overloaded_error"}.get(status, "invalid_request_error")

    overloaded = (529, "overloaded_error", "Overloaded")

    @staticmethod
    def unknown_model(model: str) -> tuple[int, dict[str, Any]]:
        return 404, AnthropicCodec.error(404, f"model: {model}", kind="not_found_error")


def served_tool_choice(value: Any, tools: list[ToolSpec]) -> str | None:
    """Either vendor's ``tool_choice`` → the neutral string; a 400 for an unreadable one or an unknown tool."""
    if value is None:
        return None
    try:
        choice = neutral_tool_choice(value)
    except ValueError as exc:
        raise BadRequest(f"Invalid value for 'tool_choice': {exc}") from None
    if choice not in ("auto", "none", "required"):
        if not tools:
            raise BadRequest("'tool_choice' names a tool, but the request has no tools")
        if all(t.name != choice for t in tools):
            raise BadRequest(f"Invalid value for 'tool_choice': tool {choice!r} is not among the request's tools")
    return choice


def _shown(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else json.dumps(value)

