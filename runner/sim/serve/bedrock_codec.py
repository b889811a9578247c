"""The server's side of Amazon Bedrock's Converse API: request → neutral ``ChatRequest``, answer → body.

The mirror image of ``runner/providers/bedrock_wire.py``. The model is in the path (``/model/{model}/converse``,
``model_from``); the caller is named by the access key id of its SigV4 ``Authorization`` header (or by a
Bedrock API key sent as a bearer token), which ``--key-env`` compares; the signature itself is not recomputed
(the server does not hold the secret key; the tests check the signature against botocore's own signer). The
seed comes only in the ``x-trialgrid-seed`` header: Converse has no seed. A tool call's ``input`` is always an
object on this API (``tool_input.py``). Errors are written as AWS's JSON protocols write them
(``{"message"}`` with the exception's name in ``__type``, which the AWS SDKs read).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from runner.core.types import ChatRequest, ChatResponse, Message, ToolSpec
from runner.sim.serve.codecs import BadRequest, request_seed, served_tool_choice, tool_call
from runner.sim.serve.options import Rule
from runner.sim.serve.tool_input import tool_input

__all__ = ["BedrockCodec"]

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")
#: each status a served error uses → the AWS exception a Bedrock runtime names it with
_TYPES = {400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
          408: "ModelTimeoutException", 429: "ThrottlingException", 500: "InternalServerException",
          503: "ServiceUnavailableException", 529: "ServiceUnavailableException"}


class BedrockCodec:
    api = "bedrock"
    wire = "bedrock"
    auth_status = 403
    overloaded = (503, "ServiceUnavailableException", "Bedrock is unable to process your request.")

    @staticmethod
    def key_of(headers: Mapping[str, str]) -> str | None:
        auth = headers.get("authorization", "")
        found = _CREDENTIAL.search(auth)
        if found:
            return found.group(1)
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None

    @staticmethod
    def model_from(request: web.Request) -> str | None:
        return request.match_info.get("model")

    @staticmethod
    def decode(body: Any, headers: Mapping[str, str]) -> ChatRequest:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        turns = body.get("messages")
        if not isinstance(turns, list) or not turns:
            raise BadRequest("1 validation error detected: Value at 'messages' failed to satisfy constraint: "
                             "Member must not be null")
        messages: list[Message] = [Message("system", s["text"]) for s in body.get("system") or () if "text" in s]
        for n, turn in enumerate(turns):
            role = turn.get("role")
            if role not in ("user", "assistant"):
                raise BadRequest(f"Value at 'messages.{n + 1}.member.role' failed to satisfy constraint: Member must "
                                 "satisfy enum value set: [user, assistant]")
            texts, calls = [], []
            for block in turn.get("content") or ():
                if "text" in block:
                    texts.append(block["text"])
                elif "toolUse" in block:
                    use = block["toolUse"]
                    value = use.get("input")
                    if not isinstance(value, dict):
                        raise BadRequest(f"messages.{n}: toolUse.input must be a JSON object")
                    calls.append(tool_call(use.get("toolUseId", ""), use["name"],
                                           json.dumps(value, separators=(",", ":")), value))
                elif "toolResult" in block:
                    result = block["toolResult"]
                    text = "".join(c.get("text", "") if "text" in c else json.dumps(c.get("json"))
                                   for c in result.get("content") or ())
                    messages.append(Message("tool", text, tool_call_id=result.get("toolUseId")))
            if texts or calls:
                messages.append(Message(role, "".join(texts), tuple(calls)))
        tools: list[ToolSpec] = []
        config = body.get("toolConfig") or {}
        for t in config.get("tools") or ():
            spec = t.get("toolSpec") or {}
            if not spec.get("name"):
                raise BadRequest("toolConfig.tools: every toolSpec needs a name")
            schema = (spec.get("inputSchema") or {}).get("json") or {"type": "object", "properties": {}}
            tools.append(ToolSpec(spec["name"], spec.get("description", ""), schema))
        picked = config.get("toolChoice") or {}
        choice = "auto" if "auto" in picked else "required" if "any" in picked else \
            (picked.get("tool") or {}).get("name") if "tool" in picked else None
        # the model is the path's (``model_from``): a placeholder until the server puts it in
        return ChatRequest("", tuple(messages), tuple(tools), {}, request_seed({}, headers),
                           served_tool_choice(choice, tools))

    @staticmethod
    def choices(body: Mapping[str, Any]) -> int:
        return 1

    @staticmethod
    def encode(response: ChatResponse, model: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"text": response.text}] if response.text else []
        content += [{"toolUse": {"toolUseId": c.id, "name": c.name, "input": tool_input(c)}}
                    for c in response.tool_calls]
        usage = response.usage
        return {"output": {"message": {"role": "assistant", "content": content}},
                "stopReason": "tool_use" if response.tool_calls else "end_turn",
                "usage": {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
                          "totalTokens": (usage.input_tokens or 0) + (usage.output_tokens or 0)},
                "metrics": {"latencyMs": 1}}

    @staticmethod
    def kind_for(status: int) -> str:
        return _TYPES.get(status, "InternalServerException")

    @staticmethod
    def error(status: int, message: str, *, kind: str | None = None, param: str | None = None,
              code: str | None = None) -> dict[str, Any]:
        name = kind if kind in _TYPES.values() else _TYPES.get(status, "InternalServerException")
        return {"message": message, "__type": name}

    @staticmethod
    def params_of(body: Mapping[str, Any]) -> Mapping[str, Any]:
        """Where a request keeps its parameters, as a rule matches them: ``inferenceConfig`` and the fields
        Bedrock hands the model as they are (``additionalModelRequestFields``), spelt as sent."""
        found: dict[str, Any] = {}
        for key in ("inferenceConfig", "additionalModelRequestFields"):
            if isinstance(body.get(key), Mapping):
                found.update(body[key])
        return found

    @staticmethod
    def rule_error(rule: Rule, body: Mapping[str, Any], has_tools: bool) -> dict[str, Any]:
        # the model's own validation, as Bedrock passes it on (Anthropic's models on Bedrock, for one)
        return BedrockCodec.error(400, "The model returned the following errors: Malformed input request: #: "
                                       f"extraneous key [{rule.param}] is not permitted, please reformat your input "
                                       "and try again.", kind="ValidationException")

    @staticmethod
    def auth_error(key: str | None) -> dict[str, Any]:
        return {"message": "The security token included in the request is invalid.",
                "__type": "UnrecognizedClientException"}

    @staticmethod
    def unknown_model(model: str) -> tuple[int, dict[str, Any]]:
        return 400, BedrockCodec.error(400, "The provided model identifier is invalid.")
