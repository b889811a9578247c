"""Provider ``gemini``: the Gemini API's own wire format, ``generateContent``.

Encoding: system messages joined into ``systemInstruction``; user and assistant turns as ``contents`` with
roles ``user`` and ``model`` (an assistant's tool calls as ``functionCall`` parts, tool results as
``functionResponse`` parts of a user turn, named by the tool they answer; consecutive turns of one role merged,
as the API requires alternation); tools as one ``functionDeclarations`` list, each schema sent whole as
``parametersJsonSchema`` (the JSON Schema the probe wrote, not the OpenAPI subset of ``parameters``);
``tool_choice`` as ``toolConfig.functionCallingConfig`` (auto → ``AUTO``, none → ``NONE``, required → ``ANY``, a
tool name → ``ANY`` with that one name allowed). ``params`` go into ``generationConfig`` (``max_tokens`` →
``maxOutputTokens``, ``top_p`` → ``topP``, ``top_k`` → ``topK``, ``stop`` → ``stopSequences``; other names as
written). The seed is ``generationConfig.seed``, an int32 on this API: the trial seed folded into 31 bits;
``trialgrid serve`` reads the whole seed from the ``x-trialgrid-seed`` header (``seed_channel.py``).

Decoding: the first candidate's text parts joined; each ``functionCall`` part is a tool call whose ``args`` is
already an object (its raw string is the compact JSON of it, as for Anthropic's ``input``), its id the part's
``id`` or, where the API gives none, ``call_N`` by position. ``usageMetadata`` gives the token columns. A
prompt the API blocks (``promptFeedback.blockReason``) or an answer it stops for safety (``finishReason``
``SAFETY``, ``PROHIBITED_CONTENT``, ``BLOCKLIST``, ``SPII``, ``RECITATION``) is an error of kind
``content_filter``, never an answer.

The key (``api_key_env``, default ``GEMINI_API_KEY``) goes out as ``x-goog-api-key``; the model is in the path:
``{base_url}/models/{model}:generateContent`` with ``base_url`` by default
``https://generativelanguage.googleapis.com/v1beta``.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from runner.core.errors import ErrorKind, ProviderError
from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, Usage, call_with_object
from runner.providers.http_base import HttpProvider
from runner.providers.secrets import Secret
from runner.providers.turns import alternating_turns

__all__ = ["GeminiProvider", "decode_response", "encode_request"]

#: ``params`` names of the other wire formats, as ``generationConfig`` spells them
_CONFIG_NAMES = {"max_tokens": "maxOutputTokens", "max_output_tokens": "maxOutputTokens", "top_p": "topP",
                 "top_k": "topK", "stop": "stopSequences", "presence_penalty": "presencePenalty",
                 "frequency_penalty": "frequencyPenalty", "candidate_count": "candidateCount"}
#: ``finishReason`` values of an answer the API stopped for what it says, not because the model finished
BLOCKED = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY"})
_SEED_BITS = 0x7FFFFFFF  # generationConfig.seed is an int32
#: a protobuf Duration in JSON: seconds, with up to nine decimals, then ``s``
_DURATION_RE = re.compile(r"(\d{1,9}(?:\.\d{1,9})?)s")


def _result(m: Message) -> dict[str, Any]:
    """A tool message's content as a ``functionResponse.response`` (always an object on this API)."""
    return {"result": m.content}


def encode_request(request: ChatRequest) -> dict[str, Any]:
    system = "\n\n".join(m.content for m in request.messages if m.role == "system")
    names: dict[str, str] = {}  # call id → tool name: a functionResponse names its tool

    def parts_of(m: Message) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if m.role == "tool":
            name = m.name or names.get(m.tool_call_id or "", "")
            response: dict[str, Any] = {"name": name, "response": _result(m)}
            if m.tool_call_id:
                response["id"] = m.tool_call_id
            parts.append({"functionResponse": response})
        else:
            if m.content:
                parts.append({"text": m.content})
            for call in m.tool_calls:
                names[call.id] = call.name
                # a call whose arguments did not parse is replayed as an empty object: args is always an object
                part: dict[str, Any] = {"name": call.name,
                                        "args": dict(call.arguments) if call.arguments is not None else {}}
                if call.id:
                    part["id"] = call.id
                parts.append({"functionCall": part})
        return parts

    body: dict[str, Any] = {"contents": alternating_turns(request.messages, parts_of, assistant="model", key="parts")}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [
            {"name": t.name, "description": t.description, "parametersJsonSchema": dict(t.parameters)}
            for t in request.tools]}]
    if request.tool_choice is not None and request.tools:
        mode = {"auto": "AUTO", "none": "NONE", "required": "ANY"}.get(request.tool_choice)
        config: dict[str, Any] = {"mode": mode} if mode else {"mode": "ANY",
                                                              "allowedFunctionNames": [request.tool_choice]}
        body["toolConfig"] = {"functionCallingConfig": config}
    generation: dict[str, Any] = {_CONFIG_NAMES.get(k, k): v for k, v in request.params.items()}
    if request.seed is not None:
        generation["seed"] = request.seed & _SEED_BITS
    if generation:
        body["generationConfig"] = generation
    return body


def decode_response(data: Any) -> ChatResponse:
    feedback = data.get("promptFeedback") or {}
    candidates = data.get("candidates") or []
    if feedback.get("blockReason") and not candidates:
        raise ProviderError(ErrorKind.CONTENT_FILTER, f"the API blocked the prompt ({feedback['blockReason']}): "
                            "not a model answer, not retried")
    candidate = candidates[0]
    finish = candidate.get("finishReason")
    if finish in BLOCKED:
        raise ProviderError(ErrorKind.CONTENT_FILTER, f"the API stopped the answer ({finish}): not a model answer, "
                            "not retried")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for part in (candidate.get("content") or {}).get("parts") or ():
        if "text" in part and not part.get("thought"):
            texts.append(part["text"])
        elif "functionCall" in part:
            call = part["functionCall"]
            args = call.get("args")
            calls.append(call_with_object(call["name"], {} if args is None else args,
                                          call.get("id") or f"call_{len(calls)}"))
    usage = data.get("usageMetadata")
    return ChatResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage.from_wire(usage, "promptTokenCount", "candidatesTokenCount"),
        finish_reason=finish,
    )


class GeminiProvider(HttpProvider):
    """``generateContent`` over HTTP; one request per ``complete``."""

    name = "gemini"
    local_model_servers = False  # Google's API (and Vertex's, which inherits this)

    @staticmethod
    def auth_headers(secret: Secret | None) -> dict[str, str]:
        return {"x-goog-api-key": secret.reveal()} if secret is not None else {}

    def url_for(self, request: ChatRequest) -> str:
        return f"{self.base}/models/{quote(request.model, safe='')}:generateContent"

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        return encode_request(request)

    def param_homes(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        # the API names a parameter as sent ("Unknown name \"topK\" at 'generation_config'")
        return [body.setdefault("generationConfig", {})]

    def decode(self, data: Any) -> ChatResponse:
        return decode_response(data)

    def error_fields(self, data: Any) -> tuple[str, str | None, str | None]:
        error = data["error"]
        return str(error.get("message") or ""), None, error.get("status")

    def retry_after_in(self, data: Any) -> float | None:
        """Google's 429 says when to try again in its body, not in a header: a ``google.rpc.RetryInfo`` detail
        whose ``retryDelay`` is a protobuf Duration (``"37s"``, ``"0.5s"``)."""
        details = data["error"].get("details")
        for detail in details if isinstance(details, list) else ():
            if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
                found = _DURATION_RE.fullmatch(str(detail.get("retryDelay", "")))
                if found:
                    return float(found.group(1))
        return None
