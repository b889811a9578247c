"""One HTTP attempt of a wire-format provider: encode, POST, classify, decode.

``HttpProvider`` sends exactly one request per ``complete`` call and turns every way
it can go wrong into a classified ``ProviderError`` (see ``classify.py``): timeouts,
refused or reset connections, truncated or malformed bodies are transient; HTTP
errors are read by status, headers and body. Retries, limits and remedies are not
its business — ``managed.ManagedProvider`` wraps it for that, so there is exactly one
retry loop in trialgrid.

Subclasses (``openai_wire``, ``anthropic_wire``) supply the path, the auth headers,
``encode`` (neutral request → JSON body), ``decode`` (JSON body → neutral response)
and ``error_fields`` (where their error body keeps the message).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import httpx
import orjson

from runner.core.errors import CONNECTION_FAILED
from runner.core.redact import scrub_bytes
from runner.core.types import ChatRequest, ChatResponse
from runner.providers.classify import classify_http, filtered
from runner.providers.errors import ErrorKind, ProviderError, Remedy
from runner.providers.pacing import note_rate_headers
from runner.providers.remedies import apply_remedies
from runner.providers.secrets import Secret, secret_from_env
from runner.providers.seed_channel import SEED_HEADER
from runner.providers.settings import DEFAULT_BASE_URL, Connection, redact_url
from runner.providers.transport import DEFAULT_TRANSPORT, Client, make_client

try:  # aiohttp's own errors, when the aiohttp transport lets one through unmapped
    from aiohttp import ClientError as _AiohttpError
except ImportError:  # pragma: no cover
    _AiohttpError = OSError  # type: ignore[misc,assignment]

#: body keys that are the request's structure, never a "parameter" a remedy may touch
_STRUCTURAL = frozenset({"model", "messages", "tools", "system"})


class HttpProvider:
    """A wire-format provider over HTTP. One ``complete`` = one request."""

    name = "http"
    path = ""
    #: this provider applies remedies to its wire body (``managed`` passes them in)
    accepts_remedies = True
    #: the endpoint's models route knows the sweep's model ids: a 404 naming one means a wrong id (the preflight)
    knows_models = True
    #: the preflight may ask ``GET {base}/models/{model}``, which bills nothing (False: ``check_offline`` only)
    has_models_route = True
    #: model servers people run on their own machine (llama.cpp, Ollama) speak this wire format: at a loopback
    #: ``base_url`` a run warns that one may answer a request at a time (False: only a proxy or a test server
    #: is found there, never such a server)
    local_model_servers = True

    @classmethod
    def check_offline(cls, connection: Connection) -> str | None:
        """What the preflight can tell is wrong without a request (None: nothing), for an endpoint with no
        route it may ask for free."""
        return None

    def __init__(self, connection: Connection, *, transport: str = DEFAULT_TRANSPORT,
                 max_connections: int = 1024) -> None:
        self.connection = connection
        #: the API root every URL of this endpoint hangs from (live requests here, batch calls in batch mode)
        self.base = self.api_base(connection.base_url)
        self.url = self.base + self.path
        # the key is read here, from the variable the sweep names, and nowhere else
        self.secret: Secret | None = secret_from_env(connection.api_key_env) if connection.api_key_env else None
        headers = {"content-type": "application/json", "accept": "application/json",
                   **self.auth_headers(self.secret), **connection.header_map}
        self._client: Client = make_client(transport, timeout_s=connection.timeout_s, headers=headers,
                                           max_connections=max_connections)
        self._where = f" from {redact_url(self.url)}"  # printed in errors: never a credential of the URL
        # the seed header is the simulator's plumbing: only to `trialgrid serve` (seed_channel.py)
        self._sends_seed = connection.sends_seed

    # -- what subclasses provide

    @classmethod
    def api_base(cls, base_url: str | None) -> str:
        """The API root from the sweep's ``base_url`` (the vendor's default when unset), without a trailing slash."""
        return (base_url or DEFAULT_BASE_URL[cls.name]).rstrip("/")

    @staticmethod
    def auth_headers(secret: Secret | None) -> dict[str, str]:
        raise NotImplementedError

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        raise NotImplementedError

    def decode(self, data: Any) -> ChatResponse:
        raise NotImplementedError

    def error_fields(self, data: Any) -> tuple[str, str | None, str | None]:
        """(message, parameter, code) from an error body."""
        raise NotImplementedError

    def param_homes(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """Where this wire format keeps a request's parameters, which learned remedies change: the body's top
        level here; a format that nests them (Gemini's ``generationConfig``) says where."""
        return [body]

    def retry_after_in(self, data: Any) -> float | None:
        """The wait an error body asks for, for a vendor that says it there rather than in a ``Retry-After``
        header (Google's ``RetryInfo``); None: the body says nothing of it."""
        return None

    # -- one attempt

    def scrub(self, text: str) -> str:
        return self.secret.scrub(text) if self.secret is not None else text

    async def complete(self, request: ChatRequest, remedies: Sequence[Remedy] = ()) -> ChatResponse:
        body = self.encode(request)
        applied = apply_remedies(self.param_homes(body), remedies, _STRUCTURAL) if remedies else []
        headers = {SEED_HEADER: str(request.seed)} if request.seed is not None and self._sends_seed else {}
        payload = orjson.dumps(body)  # ~8x json.dumps on these bodies; CPU is the limit at high concurrency
        url = self.url_for(request)
        headers.update(self.sign(url, payload))
        started = time.perf_counter()
        try:
            response = await self._client.post(url, content=payload, headers=headers)
        except (httpx.TransportError, _AiohttpError, OSError) as exc:
            if _timed_out(exc):
                message = f"no answer within the {self.connection.timeout_s:g} s request timeout{self._where}"
            else:
                message = f"{CONNECTION_FAILED}{self._where}: {_describe(exc)}"
            raise self._error(ErrorKind.TRANSIENT, message, applied) from None
        latency = time.perf_counter() - started
        note_rate_headers(response.headers)  # every answer's rate-limit headers pace the key (pacing.py)
        raw = scrub_bytes(response.content)  # an answer or error body echoing any key of the run: never kept
        if response.status_code >= 300:
            error = self.http_error(response.status_code, response.headers, raw, self._where)
            error.remedies = tuple(applied)
            raise error
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise self._error(ErrorKind.TRANSIENT, f"malformed JSON body{self._where} ({len(raw)} bytes, "
                              f"starts {self.scrub(raw[:40].decode('utf-8', 'replace'))!r})", applied) from None
        try:
            decoded = self.decode(data)
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
            raise self._error(ErrorKind.TRANSIENT, f"unexpected response shape{self._where}: "
                              f"{type(exc).__name__} {self.scrub(str(exc))}", applied) from None
        refused = filtered(decoded, self._where)
        if refused is not None:
            refused.remedies = tuple(applied)
            raise refused
        return _with(decoded, latency, applied)

    def url_for(self, request: ChatRequest) -> str:
        """Where ``request`` is sent: one URL per endpoint, unless the wire format names the model in its path."""
        return self.url

    def sign(self, url: str, payload: bytes) -> dict[str, str]:
        """Headers that authenticate this one request (a signature over its URL and body); none where a key
        header, sent with every request, is enough."""
        return {}

    def http_error(self, status: int, headers: Mapping[str, str], raw: bytes, where: str) -> ProviderError:
        """The classified error of a non-2xx answer whose body is ``raw``: what the body says (its message,
        parameter, code, and a wait it asks for) read once, here, for every caller."""
        try:
            data = json.loads(raw)
            message, param, code = self.error_fields(data)
            wait = self.retry_after_in(data)
        except (ValueError, KeyError, TypeError, AttributeError):
            message, param, code, wait = raw[:300].decode("utf-8", "replace").strip(), None, None, None
        return classify_http(status, headers, self.scrub(message), param=param, code=code, where=where,
                             retry_after=wait)

    def _error(self, kind: ErrorKind, message: str, applied: list[str]) -> ProviderError:
        error = ProviderError(kind, self.scrub(message))
        error.remedies = tuple(applied)
        return error

    async def aclose(self) -> None:
        await self._client.aclose()


def _with(response: ChatResponse, latency: float, applied: list[str]) -> ChatResponse:
    return replace(response, latency_s=latency, attempts=1, remedies=tuple(applied))


def _timed_out(exc: BaseException) -> bool:
    """A timeout, as opposed to a refused, reset or cut-off connection.

    httpx_aiohttp maps every ``aiohttp.ClientConnectionError`` — a server disconnect
    included — onto ``httpx.ConnectTimeout``, so the original cause decides.
    """
    cause = exc.__cause__ if isinstance(exc, httpx.TransportError) and exc.__cause__ is not None else exc
    return isinstance(cause, (TimeoutError, httpx.TimeoutException)) or type(cause).__name__ in (
        "ServerTimeoutError", "SocketTimeoutError", "ConnectionTimeoutError")


def _describe(exc: BaseException) -> str:
    """The most specific readable cause: httpx_aiohttp maps aiohttp errors onto httpx ones."""
    cause = exc.__cause__ or exc.__context__
    for e in (cause, exc):
        if e is not None and str(e):
            return f"{type(e).__name__}: {e}"
    return type(exc).__name__
