"""The read-only endpoints SDKs call besides chat: the model list and Anthropic's token counting.

``GET /v1/models`` (and ``/v1/models/{id}``) lists the simulated agent's models —
its personas and auditor personas — in OpenAI's shape, or in Anthropic's when the
request carries ``anthropic-version`` (both vendors use the same path).
``POST /v1/messages/count_tokens`` answers ``{"input_tokens": N}`` with the count
the simulated agent would bill for the same request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from runner.providers.preflight import SIMULATED_SERVER
from runner.sim.auditor import AUDITORS
from runner.sim.oracle import is_oracle
from runner.sim.personas import PERSONAS, persona_for_model
from runner.sim.serve.codec_table import CODECS
from runner.sim.serve.codecs import BadRequest
from runner.sim.serve.vendor_http import api_of

if TYPE_CHECKING:
    from runner.sim.serve.app import SimServer

_CREATED = 1735689600  # 2025-01-01: the models are as old as the sim's first personas
_JSON = "application/json"


def model_ids() -> list[str]:
    return [*PERSONAS, *AUDITORS]


def _serves(model_id: str) -> bool:
    """Whether a chat request for ``model_id`` would be answered: the oracle, or a persona or an auditor persona it
    names (``typical-a``, ``sim-careful``), as the chat routes read it."""
    if is_oracle(model_id):
        return True
    try:
        persona_for_model(model_id)
    except ValueError:
        return False
    return True


def _json(status: int, body: Any) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(body), content_type=_JSON, headers={"Server": SIMULATED_SERVER})


def _anthropic(request: web.Request) -> bool:
    return "anthropic-version" in request.headers


def _model(model_id: str, anthropic: bool) -> dict[str, Any]:
    if anthropic:
        return {"type": "model", "id": model_id, "display_name": f"Simulated agent ({model_id})",
                "created_at": "2025-01-01T00:00:00Z"}
    return {"id": model_id, "object": "model", "created": _CREATED, "owned_by": "trialgrid"}


class CatalogRoutes:
    def __init__(self, server: SimServer) -> None:
        self.server = server

    def register(self, app: web.Application) -> None:
        app.router.add_get("/v1/models", self._list)
        app.router.add_get("/v1/models/{id}", self._get)
        app.router.add_get("/openai/v1/models", self._list)  # Azure OpenAI's v1 API
        app.router.add_get("/openai/v1/models/{id}", self._get)
        app.router.add_get("/v1beta/models/{id}", self._get)  # the Gemini API's
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)

    async def _list(self, request: web.Request) -> web.Response:
        anthropic = _anthropic(request)
        if (denied := self.server.denied(request, api_of(request))) is not None:
            return denied
        data = [_model(m, anthropic) for m in model_ids()]
        if anthropic:
            return _json(200, {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]})
        return _json(200, {"object": "list", "data": data})

    async def _get(self, request: web.Request) -> web.Response:
        anthropic = _anthropic(request)
        api = api_of(request)
        if (denied := self.server.denied(request, api)) is not None:
            return denied
        model_id = request.match_info["id"]
        if not _serves(model_id):
            status, body = CODECS[api].unknown_model(model_id)
            return _json(status, body)
        if api == "gemini":  # a Google model resource
            return _json(200, {"name": f"models/{model_id}", "displayName": f"Simulated agent ({model_id})",
                               "supportedGenerationMethods": ["generateContent"]})
        return _json(200, _model(model_id, anthropic))

    async def _count_tokens(self, request: web.Request) -> web.Response:
        codec = CODECS["anthropic"]
        if (denied := self.server.denied(request, "anthropic")) is not None:
            return denied
        try:
            chat = codec.decode(orjson.loads(await request.read()), request.headers, counting=True)
        except (ValueError, BadRequest, KeyError, TypeError, AttributeError) as exc:
            message = str(exc) if isinstance(exc, BadRequest) else f"could not parse the request: {type(exc).__name__}"
            return _json(400, codec.error(400, message))
        try:
            tokens = self.server.sim.respond(chat).usage.input_tokens
        except ValueError:
            status, body = codec.unknown_model(chat.model)
            return _json(status, body)
        return _json(200, {"input_tokens": tokens})
