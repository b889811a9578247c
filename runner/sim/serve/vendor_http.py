"""What every answer of ``trialgrid serve`` carries, as each vendor sends it: request ids, limits, JSON errors.

- Request ids on every response: OpenAI's ``x-request-id``, Anthropic's
  ``request-id`` (and ``request_id`` in its error bodies), so an SDK's
  ``_request_id`` / ``error.request_id`` is filled as against the real API.
- Rate-limit headers on every response while the server has its own limit
  (``--rpm``), not only on 429s: OpenAI ``x-ratelimit-{limit,remaining,reset}-requests``,
  Anthropic ``anthropic-ratelimit-requests-{limit,remaining,reset}``.
- ``Retry-After`` as an integer number of seconds (rounded up, never below 1), as
  HTTP defines it; the exact wait, fractions included, in ``retry-after-ms``.
- Unknown routes and wrong methods answered with the vendor's JSON error (404 /
  405), not aiohttp's plain text: Anthropic's when the path is under
  ``/v1/messages`` or the request carries ``anthropic-version``, else OpenAI's.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import orjson
from aiohttp import web

from runner.sim.serve.codec_table import CODECS

_REQUEST_ID = web.RequestKey("request_id", str)  # where the id is kept on the aiohttp request


def api_of(request: web.BaseRequest) -> str:
    """The vendor whose error style a request gets: Anthropic's Messages routes or headers, else OpenAI."""
    if request.path.startswith("/v1/messages") or "anthropic-version" in request.headers:
        return "anthropic"
    if request.path.startswith("/v1beta/"):
        return "gemini"
    if request.path.startswith("/model/"):
        return "bedrock"
    if "/publishers/google/" in request.path:
        return "vertex"
    return "azure" if request.path.startswith("/openai/") else "openai"


def retry_headers(wait_s: float) -> dict[str, str]:
    wait_s = max(0.0, wait_s)
    return {"retry-after": str(max(1, math.ceil(wait_s))), "retry-after-ms": str(round(wait_s * 1000))}


def limit_headers(api: str, limit: int, remaining: int, reset_s: float) -> dict[str, str]:
    """The vendor's rate-limit headers for a request budget of ``limit`` per window."""
    reset_s = max(0.0, reset_s)
    if api == "anthropic":
        reset = datetime.now(UTC) + timedelta(seconds=reset_s)
        return {"anthropic-ratelimit-requests-limit": str(limit),
                "anthropic-ratelimit-requests-remaining": str(max(0, remaining)),
                "anthropic-ratelimit-requests-reset": reset.isoformat().replace("+00:00", "Z")}
    return {"x-ratelimit-limit-requests": str(limit), "x-ratelimit-remaining-requests": str(max(0, remaining)),
            "x-ratelimit-reset-requests": f"{reset_s:.3f}s"}


@web.middleware
async def vendor_middleware(request: web.Request,
                            handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """A request id for every request; vendor JSON for unknown routes and methods; Anthropic error ids."""
    api = api_of(request)
    rid = "req_" + secrets.token_hex(12)
    request[_REQUEST_ID] = rid
    try:
        response = await handler(request)
    except web.HTTPMethodNotAllowed as exc:
        body = CODECS[api].error(405, f"Method {request.method} is not allowed for {request.path} "
                                      f"(allowed: {', '.join(sorted(exc.allowed_methods))})")
        response = web.Response(status=405, body=orjson.dumps(body), content_type="application/json",
                                headers={"allow": ", ".join(sorted(exc.allowed_methods))})
    except web.HTTPNotFound:
        if api == "anthropic":
            body = CODECS[api].error(404, f"Not found: {request.method} {request.path}", kind="not_found_error")
        else:
            body = CODECS[api].error(404, f"Invalid URL ({request.method} {request.path})")
        response = web.Response(status=404, body=orjson.dumps(body), content_type="application/json")
    if (api == "anthropic" and response.status >= 400 and isinstance(response, web.Response)
            and isinstance(response.body, bytes) and response.body.startswith(b'{"type":"error"')):
        data = orjson.loads(response.body)
        data["request_id"] = rid
        response.body = orjson.dumps(data)
    return response


async def add_request_id(request: web.BaseRequest, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the id header goes on every response, streamed ones included."""
    rid = request.get(_REQUEST_ID)
    if rid is not None:
        response.headers["request-id" if api_of(request) == "anthropic" else "x-request-id"] = rid
