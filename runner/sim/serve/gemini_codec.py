"""The server's side of the Gemini API's ``generateContent``: request → neutral ``ChatRequest``, answer → body.

The mirror image of ``runner/providers/gemini_wire.py``. The model is in the path
(``/v1beta/models/{model}:generateContent``, ``model_from``), the key in ``x-goog-api-key`` (or the ``key``
query parameter the API also takes), the seed in ``generationConfig.seed`` (an int32) or, whole, in the
``x-trialgrid-seed`` header, which wins. A tool call's ``args`` is always an object on this API, so a call
whose argument text does not parse goes out as the object of its complete leading parameters, as over the
Messages API (``tool_input.py``). Errors are written as Google's APIs write them
(``{"error": {"code", "message", "status"}}``); a key the server does not accept is Google's 400
``API_KEY_INVALID``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from runner.core.types import ChatRequest, ChatResponse, Message, ToolSpec
from runner.providers.seed_channel import SEED_HEADER
from runner.sim.serve.codecs import BadRequest, served_tool_choice, tool_call
from runner.sim.serve.options import Rule
from runner.sim.serve.tool_input import tool_input

__all__ = ["GeminiCodec", "VertexCodec"]

#: the HTTP status of each of Google's canonical error codes a served error uses
_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           405: "INVALID_ARGUMENT", 409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
           529: "UNAVAILABLE"}


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """A field by its JSON name or its proto name: Google's APIs read either (``systemInstruction`` or
    ``system_instruction``), and Google's own client writes some of each."""
    if not isinstance(obj, dict):
        return default
    value = obj.get(name)
    if value is None:
        value = obj.get(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name))
    return default if value is None else value


def _texts(parts: list[Any]) -> str:
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict) and "text" in p)


class GeminiCodec:
    api = "gemini"
    wire = "gemini"
    #: Google has no 529: an overloaded model answers 503 UNAVAILABLE
    overloaded = (503, "UNAVAILABLE", "The model is overloaded. Please try again later.")

    @staticmethod
    def key_of(headers: Mapping[str, str]) -> str | None:
        key = headers.get("x-goog-api-key")
        return key.strip() if key else None

    @staticmethod
    def model_from(request: web.Request) -> str | None:
        return request.match_info.get("model")

    @staticmethod
    def decode(body: Any, headers: Mapping[str, str]) -> ChatRequest:
        if not isinstance(body, dict):
            raise BadRequest("Invalid JSON payload received: the body must be a JSON object")
        contents = _get(body, "contents")
        if not isinstance(contents, list) or not contents:
            raise BadRequest("* GenerateContentRequest.contents: contents is not specified")
        messages: list[Message] = []
        system = _get(body, "systemInstruction")
        if _texts(_get(system, "parts", [])):
            messages.append(Message("system", _texts(_get(system, "parts", []))))
        for n, turn in enumerate(contents):
            role = turn.get("role", "user") if isinstance(turn, dict) else None
            if role not in ("user", "model"):
                raise BadRequest(f"* GenerateContentRequest.contents[{n}].role: Please use a valid role: user, model.")
            texts, calls = [], []
            for part in _get(turn, "parts", ()):
                if "text" in part:
                    texts.append(part["text"])
                elif _get(part, "functionCall") is not None:
                    call = _get(part, "functionCall")
                    args = call.get("args") or {}
                    if not isinstance(args, dict):
                        raise BadRequest(f"* GenerateContentRequest.contents[{n}].parts: functionCall.args must be "
                                         "an object")
                    calls.append(tool_call(call.get("id", ""), call["name"], json.dumps(args, separators=(",", ":")),
                                           args))
                elif _get(part, "functionResponse") is not None:
                    answer = _get(part, "functionResponse")
                    response = answer.get("response")
                    text = response["result"] if isinstance(response, dict) and set(response) == {"result"} and \
                        isinstance(response["result"], str) else json.dumps(response, separators=(",", ":"))
                    messages.append(Message("tool", text, tool_call_id=answer.get("id") or answer.get("name"),
                                            name=answer.get("name")))
            if texts or calls:
                messages.append(Message("assistant" if role == "model" else "user", "".join(texts), tuple(calls)))
        tools: list[ToolSpec] = []
        for group in _get(body, "tools", ()):
            for f in _get(group, "functionDeclarations", ()):
                if not f.get("name"):
                    raise BadRequest("* GenerateContentRequest.tools[0].function_declarations: name is required")
                schema = _get(f, "parametersJsonSchema") or _get(f, "parameters") or {"type": "object", "properties": {}}
                tools.append(ToolSpec(f["name"], f.get("description", ""), schema))
        config = _get(_get(body, "toolConfig"), "functionCallingConfig", {})
        mode, allowed = _get(config, "mode"), _get(config, "allowedFunctionNames", [])
        choice = None if mode in (None, "MODE_UNSPECIFIED") else \
            {"AUTO": "auto", "NONE": "none", "VALIDATED": "auto"}.get(mode) or (
                allowed[0] if mode == "ANY" and len(allowed) == 1 else "required")
        seed = headers.get(SEED_HEADER)
        if seed is None:
            seed = _get(_get(body, "generationConfig"), "seed")
        try:
            seed_value = int(seed) if seed is not None else None
        except (TypeError, ValueError):
            raise BadRequest(f"* GenerateContentRequest.generation_config.seed: invalid value {seed!r}") from None
        # the model is the path's (``model_from``): a placeholder until the server puts it in
        return ChatRequest("", tuple(messages), tuple(tools), {}, seed_value, served_tool_choice(choice, tools))

    @staticmethod
    def choices(body: Mapping[str, Any]) -> int:
        n = _get(_get(body, "generationConfig"), "candidateCount", 1)
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 8:
            raise BadRequest(f"* GenerateContentRequest.generation_config.candidate_count: {n!r} must be 1 to 8")
        return n

    @staticmethod
    def encode(answers: tuple[ChatResponse, ...], model: str) -> dict[str, Any]:
        candidates = []
        for i, a in enumerate(answers):
            parts: list[dict[str, Any]] = [{"text": a.text}] if a.text else []
            parts += [{"functionCall": {"id": c.id, "name": c.name, "args": tool_input(c)}} for c in a.tool_calls]
            candidates.append({"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": i})
        first = answers[0].usage
        output = sum(a.usage.output_tokens or 0 for a in answers)
        return {"candidates": candidates, "modelVersion": model,
                "usageMetadata": {"promptTokenCount": first.input_tokens, "candidatesTokenCount": output,
                                  "totalTokenCount": (first.input_tokens or 0) + output}}

    @staticmethod
    def kind_for(status: int) -> str:
        return _STATUS.get(status, "UNKNOWN")

    @staticmethod
    def error(status: int, message: str, *, kind: str | None = None, param: str | None = None,
              code: str | None = None) -> dict[str, Any]:
        status = 503 if status == 529 else status
        return {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}}

    @staticmethod
    def params_of(body: Mapping[str, Any]) -> Mapping[str, Any]:
        """Where a request keeps its parameters, as a rule matches them: ``generationConfig``, spelt as sent."""
        config = body.get("generationConfig")
        return config if isinstance(config, Mapping) else {}

    @staticmethod
    def rule_error(rule: Rule, body: Mapping[str, Any], has_tools: bool) -> dict[str, Any]:
        p = rule.param
        if rule.action in ("drop", "rename"):
            return GeminiCodec.error(400, f"Invalid JSON payload received. Unknown name \"{p}\" at "
                                          "'generation_config': Cannot find field.")
        return GeminiCodec.error(400, f"* GenerateContentRequest.generation_config.{p}: must be {rule.value!r} for "
                                      "this model")

    @staticmethod
    def auth_error(key: str | None) -> dict[str, Any]:
        return {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                          "status": "INVALID_ARGUMENT",
                          "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                       "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}

    #: the status a key the server refuses is answered with: Google says 400, not 401
    auth_status = 400

    @staticmethod
    def unknown_model(model: str) -> tuple[int, dict[str, Any]]:
        return 404, GeminiCodec.error(404, f"models/{model} is not found for API version v1beta, or is not "
                                           "supported for generateContent.")


class VertexCodec(GeminiCodec):
    """Gemini models on Vertex AI: the same bodies, an OAuth bearer token (or an express-mode API key), 401s."""

    api = "vertex"
    auth_status = 401

    @staticmethod
    def key_of(headers: Mapping[str, str]) -> str | None:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        return GeminiCodec.key_of(headers)

    @staticmethod
    def auth_error(key: str | None) -> dict[str, Any]:
        return GeminiCodec.error(401, "Request had invalid authentication credentials. Expected OAuth 2 access "
                                      "token, login cookie or other valid authentication credential.")
