"""Provider ``bedrock``: Amazon Bedrock's Converse API, for any model Bedrock serves.

Encoding: system messages as ``system`` text blocks; turns as ``messages`` with ``text``, ``toolUse`` (an
assistant's calls) and ``toolResult`` blocks (tool results, in a user turn; consecutive turns of one role
merged, as the API requires alternation); tools as ``toolConfig.tools[].toolSpec`` with each probe's schema as
``inputSchema.json``; ``tool_choice`` as ``toolConfig.toolChoice`` (auto → ``auto``, required → ``any``, a tool
name → ``tool``; Converse has no "none": the tools stay offered). ``params`` go into ``inferenceConfig``
(``max_tokens`` → ``maxTokens``, ``temperature``, ``top_p`` → ``topP``, ``stop`` → ``stopSequences``); any other
name into ``additionalModelRequestFields``, which Bedrock hands to the model as it is. Converse has no seed:
to ``trialgrid serve`` the trial seed travels in the ``x-trialgrid-seed`` header only (``seed_channel.py``).

Decoding: text blocks joined; each ``toolUse`` block is a tool call whose ``input`` is an object (its raw string
the compact JSON of it); ``usage.inputTokens`` / ``outputTokens``. An answer a guardrail or the content filter
stopped (``stopReason`` ``guardrail_intervened`` or ``content_filtered``) is an error of kind
``content_filter``, never an answer.

Credentials, the AWS way: every request is signed with Signature Version 4 by ``botocore`` (``pip install
'trialgrid[bedrock]'``), with the credentials its own chain finds (environment, shared profile, a role) and
the region from ``base_url``'s host (``bedrock-runtime.REGION.amazonaws.com``) or else ``AWS_REGION``, then
botocore's own (``AWS_DEFAULT_REGION``, the profile), then ``us-east-1``. A Bedrock API key instead (``api_key_env``, e.g.
``AWS_BEARER_TOKEN_BEDROCK``) goes out as a bearer token and nothing is signed. Throttling (429) is a rate
limit; the service's 5xx, 408 and 424 are transient; access denied and unknown credentials are fatal.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import quote, urlsplit

from runner.core.errors import ErrorKind, ProviderError, UserError
from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, Usage, call_with_object
from runner.providers.http_base import HttpProvider
from runner.providers.secrets import Secret
from runner.providers.settings import Connection
from runner.providers.turns import alternating_turns

__all__ = ["BedrockProvider", "decode_response", "encode_request"]

_INFERENCE = {"max_tokens": "maxTokens", "temperature": "temperature", "top_p": "topP", "stop": "stopSequences"}
#: ``stopReason`` values of an answer something other than the model ended
BLOCKED = frozenset({"guardrail_intervened", "content_filtered"})
_HOST = re.compile(r"^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com$")


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        return [{"toolResult": {"toolUseId": m.tool_call_id or "", "content": [{"text": m.content}]}}]
    blocks: list[dict[str, Any]] = [{"text": m.content}] if m.content else []
    for call in m.tool_calls:
        # a call whose arguments did not parse is replayed as an empty object: input is always an object here
        blocks.append({"toolUse": {"toolUseId": call.id, "name": call.name,
                                   "input": dict(call.arguments) if call.arguments is not None else {}}})
    return blocks


def encode_request(request: ChatRequest) -> dict[str, Any]:
    system = [{"text": m.content} for m in request.messages if m.role == "system" and m.content]
    body: dict[str, Any] = {"messages": alternating_turns(request.messages, _blocks)}
    if system:
        body["system"] = system
    if request.tools:
        config: dict[str, Any] = {"tools": [{"toolSpec": {"name": t.name, "description": t.description,
                                                          "inputSchema": {"json": dict(t.parameters)}}}
                                            for t in request.tools]}
        choice = request.tool_choice
        if choice == "auto":
            config["toolChoice"] = {"auto": {}}
        elif choice == "required":
            config["toolChoice"] = {"any": {}}
        elif choice not in (None, "none"):
            config["toolChoice"] = {"tool": {"name": choice}}
        body["toolConfig"] = config
    inference = {_INFERENCE[k]: v for k, v in request.params.items() if k in _INFERENCE}
    extra = {k: v for k, v in request.params.items() if k not in _INFERENCE}
    if inference:
        body["inferenceConfig"] = inference
    if extra:
        body["additionalModelRequestFields"] = extra
    return body


def decode_response(data: Any) -> ChatResponse:
    stop = data.get("stopReason")
    if stop in BLOCKED:
        raise ProviderError(ErrorKind.CONTENT_FILTER, f"Bedrock stopped the answer ({stop}): not a model answer, "
                            "not retried")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in data["output"]["message"]["content"]:
        if "text" in block:
            texts.append(block["text"])
        elif "toolUse" in block:
            use = block["toolUse"]
            calls.append(call_with_object(use["name"], use.get("input"), use.get("toolUseId") or ""))
    return ChatResponse(text="".join(texts), tool_calls=tuple(calls),
                        usage=Usage.from_wire(data.get("usage"), "inputTokens", "outputTokens"), finish_reason=stop)


def region_of(base_url: str | None) -> str | None:
    """The region a Bedrock runtime endpoint names in its host (None for any other host)."""
    if not base_url:
        return None
    found = _HOST.match(urlsplit(base_url).hostname or "")
    return found.group(1) if found else None


class BedrockProvider(HttpProvider):
    """Converse over HTTP, signed with SigV4 (or a Bedrock API key); one request per ``complete``."""

    name = "bedrock"
    #: the runtime host has no route the preflight may ask for free: it checks the signer can be made
    knows_models = False
    has_models_route = False
    local_model_servers = False  # AWS's API

    @classmethod
    def check_offline(cls, connection: Connection) -> str | None:
        if connection.api_key_env is not None:
            return None
        try:
            _signer(region_of(connection.base_url))
        except UserError as exc:
            return str(exc)
        return None

    def __init__(self, connection: Connection, **kw: Any) -> None:
        self._signer: Any = None
        self.region = region_of(connection.base_url)
        if connection.api_key_env is None:
            self._signer, self.region = _signer(self.region)
        if connection.base_url is None:
            connection = _with_base(connection, f"https://bedrock-runtime.{self.region or 'us-east-1'}.amazonaws.com")
        super().__init__(connection, **kw)

    @classmethod
    def api_base(cls, base_url: str | None) -> str:
        return (base_url or "https://bedrock-runtime.us-east-1.amazonaws.com").rstrip("/")

    @staticmethod
    def auth_headers(secret: Secret | None) -> dict[str, str]:
        return {"authorization": f"Bearer {secret.reveal()}"} if secret is not None else {}

    def url_for(self, request: ChatRequest) -> str:
        return f"{self.base}/model/{quote(request.model, safe='')}/converse"

    def sign(self, url: str, payload: bytes) -> dict[str, str]:
        if self._signer is None:
            return {}
        return self._signer(url, payload)

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        return encode_request(request)

    def param_homes(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        # Converse's own settings, then what it hands the model as it is (where a model's own name goes)
        homes = [body[k] for k in ("inferenceConfig", "additionalModelRequestFields") if isinstance(body.get(k), dict)]
        return homes or [body.setdefault("additionalModelRequestFields", {})]

    def decode(self, data: Any) -> ChatResponse:
        return decode_response(data)

    def error_fields(self, data: Any) -> tuple[str, str | None, str | None]:
        message = data.get("message") or data.get("Message") or ""
        return str(message), None, data.get("__type")


def _with_base(connection: Connection, base_url: str) -> Connection:
    from dataclasses import replace

    return replace(connection, base_url=base_url)


def _signer(region: str | None) -> tuple[Any, str]:
    """A function signing (url, body) with SigV4 for the service ``bedrock``, and the region it signs for."""
    try:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.session import Session
    except ImportError:
        raise UserError("provider bedrock signs its requests with botocore, which is not installed",
                        hint="pip install 'trialgrid[bedrock]' (or set api_key_env to a Bedrock API key)") from None
    session = Session()
    credentials = session.get_credentials()
    if credentials is None:
        raise UserError("provider bedrock: no AWS credentials found (environment, shared profile or role)",
                        hint="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run where a role "
                             "is attached; or set api_key_env to a Bedrock API key")
    # AWS_REGION is every AWS SDK's variable; botocore's own chain reads AWS_DEFAULT_REGION and the profile
    region = region or os.environ.get("AWS_REGION") or session.get_config_variable("region") or "us-east-1"

    def sign(url: str, payload: bytes) -> dict[str, str]:
        request = AWSRequest(method="POST", url=url, data=payload, headers={"content-type": "application/json"})
        # frozen once per request: a role's credentials are refreshed by botocore as they near expiry
        SigV4Auth(credentials.get_frozen_credentials(), "bedrock", region).add_auth(request)
        return {k: v for k, v in request.headers.items() if k.lower() != "content-type"}

    return sign, region
