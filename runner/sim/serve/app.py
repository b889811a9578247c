"""``trialgrid serve``: OpenAI- and Anthropic-compatible endpoints answered by the simulated agent.

Routes: ``POST /v1/chat/completions`` (OpenAI Chat Completions), ``POST /v1/messages``
(Anthropic Messages), ``POST /v1/responses`` (OpenAI Responses), each streamed as
server-sent events when the body says ``"stream": true`` (``sse.py``); ``GET /v1/models``
and ``POST /v1/messages/count_tokens`` (``catalog.py``); both vendors' batch and file
APIs (``batches.py``); ``GET /stats`` (``?log=1`` adds the per-request log),
``GET /health``, and ``GET`` / ``PUT /admin/faults`` (the fault rates in force, and
new ones — ``{}`` lifts every fault — so a test can end an incident mid-run:
``SimServer.set_faults``). Every response carries the vendor's request-id header, every error is
the vendor's JSON, unknown routes included (``vendor_http.py``).

Each request is answered by the same ``SimProvider.respond`` the in-process ``sim``
provider uses, from the request decoded back into a neutral ``ChatRequest`` (seed
from OpenAI's ``seed`` field or the ``x-trialgrid-seed`` header), so a sweep gives
the same outcomes over HTTP as in-process; ``n`` > 1 adds choices answered with
seeds derived from the request's. Around that, in this order, as a real API would:
the API key check (401), the server's own per-key rate limit (a real 429 with
``Retry-After``, ``retry-after-ms`` and the vendor's rate-limit headers, which every
answer carries while a limit is set unless ``rate_headers`` is off; enforced as a
sliding window — one long wait once it is full — or, with ``rpm_mode="bucket"``, as
a token bucket with short waits, as the vendors do), the body check (400), the parameter-rejection
rules (400 in the vendor's error style), the latency draw, and the fault draw (429 /
500 / 503 / 529 overloaded / slow past the client's timeout / connection reset /
malformed JSON / truncated body, and the stream faults: disconnect mid-stream, a
stall mid-stream past the client's read timeout, a chunk that does not parse).

Everything runs on one event loop and the state changes in synchronous code
between awaits, so counts cannot race.

A successful answer is sent from the handler itself (``_send``), not after it returns, so the log
records whether, and when, it went out whole (``stats.py``: ``digest`` and ``sent``).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import orjson
from aiohttp import web

from runner.core.seeding import mix64
from runner.core.types import ChatRequest, ChatResponse
from runner.providers.errors import ProviderError
from runner.providers.seed_channel import SEED_HEADER
from runner.sim import SimProvider
from runner.sim.serve.batches import BatchRoutes
from runner.sim.serve.bedrock_codec import BedrockCodec
from runner.sim.serve.catalog import CatalogRoutes
from runner.sim.serve.codec_table import CODECS
from runner.sim.serve.codecs import AnthropicCodec, AzureCodec, BadRequest, OpenAICodec
from runner.sim.serve.gemini_codec import GeminiCodec
from runner.sim.serve.options import FAULTS, SOLO_FAULTS, ServeOptions, check_faults
from runner.sim.serve.responses_codec import ResponsesCodec
from runner.sim.serve.sse import anthropic_frames, malformed_frame, openai_frames, responses_frames
from runner.sim.serve.stats import ServerStats, key_id
from runner.sim.serve.vendor_http import add_request_id, limit_headers, retry_headers, vendor_middleware

_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"
#: the fault a non-streamed request meets for each stream fault, and the other way round
_UNSTREAMED = {"disconnect": "truncated", "stall": "slow", "bad_chunk": "malformed"}
_STREAMED = {"truncated": "disconnect", "malformed": "bad_chunk"}
_SENT = web.RequestKey("trialgrid.sent", float)  # the server's clock when the answer went out whole


def request_digest(raw: bytes, headers: Mapping[str, str]) -> str:
    """What was asked: the body and the seed header (two runs of one case differ only by seed)."""
    return hashlib.blake2b(raw + b"\0" + headers.get(SEED_HEADER, "").encode(), digest_size=8).hexdigest()


def _dumps(data: Any) -> bytes:
    return orjson.dumps(data)


class SimServer:
    """The application state: options, the simulated agent, rate-limit windows, stats."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self.sim = SimProvider()
        self.stats = ServerStats(options.log_limit)
        self.latency = options.latency_sampler()
        self._fault_rng = random.Random(options.fault_seed)
        self._fault_table: list[tuple[str, float]] = []
        self.set_faults(options.faults)
        self._windows: dict[str, deque[float]] = {}
        self._buckets: dict[str, tuple[float, float]] = {}  # key → (tokens, when counted)
        self._keys = frozenset(options.keys)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[vendor_middleware])
        app.on_response_prepare.append(add_request_id)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/responses", self._responses)
        # Azure OpenAI: its v1 API, and the deployments API (the deployment is the model; api-version required)
        app.router.add_post("/openai/v1/chat/completions", self._azure)
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self._azure_deployment)
        app.router.add_post("/v1beta/models/{model}:generateContent", self._gemini)  # the Gemini API
        app.router.add_post("/model/{model}/converse", self._bedrock)  # Amazon Bedrock's Converse
        app.router.add_post("/{version}/projects/{project}/locations/{location}/publishers/google/models/"
                            "{model}:generateContent", self._vertex)  # Gemini models on Vertex AI
        app.router.add_get("/stats", self._stats)
        app.router.add_get("/health", self._health)
        app.router.add_get("/admin/faults", self._get_faults)
        app.router.add_put("/admin/faults", self._put_faults)
        self.batches = BatchRoutes(self)
        self.batches.register(app)
        CatalogRoutes(self).register(app)
        return app

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "openai")

    async def _azure(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "azure")

    async def _azure_deployment(self, request: web.Request) -> web.StreamResponse:
        if not request.query.get("api-version"):
            return self._json(404, AzureCodec.not_found())
        return await self._handle(request, "azure")

    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "gemini")

    async def _vertex(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "vertex")

    async def _bedrock(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "bedrock")

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "anthropic")

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "responses")

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(body=b'{"ok":true}', content_type=_JSON)

    async def _stats(self, request: web.Request) -> web.Response:
        return web.Response(body=_dumps(self.stats.snapshot(with_log=request.query.get("log") == "1")),
                            content_type=_JSON)

    @property
    def faults(self) -> dict[str, float]:
        """The fault rates in force (kind → rate)."""
        return dict(self._fault_table)

    def set_faults(self, faults: Mapping[str, float]) -> dict[str, float]:
        """Replace the fault rates in force (``{}`` lifts every fault); the draws go on from the same seeded stream.

        Raises ``ValueError`` naming the bad kind or rate (see ``options.check_faults``).
        """
        rates = check_faults(faults)
        self._fault_table = [(k, rates[k]) for k in FAULTS + SOLO_FAULTS if rates.get(k)]
        return self.faults

    async def _get_faults(self, request: web.Request) -> web.Response:
        return web.Response(body=_dumps({"faults": self.faults}), content_type=_JSON)

    async def _put_faults(self, request: web.Request) -> web.Response:
        try:
            body = orjson.loads(await request.read())
            if not isinstance(body, dict):
                raise ValueError('the body must be a JSON object of fault kind to rate, as in {"429": 0.05}, '
                                 "or {} to lift every fault")
            faults = self.set_faults(body)
        except ValueError as exc:  # orjson's decode error is a ValueError too
            return web.Response(status=400, body=_dumps({"error": f"PUT /admin/faults: {exc}"}), content_type=_JSON)
        return web.Response(body=_dumps({"faults": faults}), content_type=_JSON)

    def denied(self, request: web.Request, api: str) -> web.Response | None:
        """A 401 (Google's APIs: a 400) in ``api``'s style when the server checks keys and this request's is not
        one of them."""
        codec = CODECS[api]
        key = codec.key_of(request.headers)
        if self._keys and key not in self._keys:
            return self._json(codec.auth_status, codec.auth_error(key))
        return None

    def _draw_fault(self) -> str | None:
        if not self._fault_table:
            return None
        u = self._fault_rng.random()
        for kind, rate in self._fault_table:
            if u < rate:
                return kind
            u -= rate
        return None

    def _admit(self, api: str, kid: str, now: float) -> tuple[float | None, dict[str, str]]:
        """(seconds until ``kid`` may send again if it is over the server's own limit, the rate-limit headers)."""
        rpm = self.options.rpm
        if rpm is None:
            return None, {}
        wait, headers = self._take_bucket(api, kid, now) if self.options.rpm_mode == "bucket" else \
            self._take_window(api, kid, now)
        return wait, headers if self.options.rate_headers else {}

    def _take_bucket(self, api: str, kid: str, now: float) -> tuple[float | None, dict[str, str]]:
        """A token bucket of ``bucket_capacity`` refilled at rpm per window: a 429 asks for the next token's wait."""
        options = self.options
        rpm = options.rpm or 0
        refill = rpm / options.rpm_window_s
        capacity = options.bucket_capacity
        tokens, last = self._buckets.get(kid, (capacity, now))
        tokens = min(capacity, tokens + (now - last) * refill)
        if tokens < 1.0:
            self._buckets[kid] = (tokens, now)
            wait = (1.0 - tokens) / refill
            return wait, limit_headers(api, rpm, 0, (capacity - tokens) / refill)
        tokens -= 1.0
        self._buckets[kid] = (tokens, now)
        # remaining: whole requests in the bucket; reset: until it is full again (OpenAI's "initial state")
        return None, limit_headers(api, rpm, int(tokens), (capacity - tokens) / refill)

    def _take_window(self, api: str, kid: str, now: float) -> tuple[float | None, dict[str, str]]:
        rpm = self.options.rpm or 0
        window = self._windows.setdefault(kid, deque())
        span = self.options.rpm_window_s
        while window and window[0] <= now - span:
            window.popleft()
        if len(window) >= rpm:
            wait = window[0] + span - now
            return wait, limit_headers(api, rpm, 0, wait)
        window.append(now)
        return None, limit_headers(api, rpm, rpm - len(window), window[0] + span - now)

    async def _handle(self, request: web.Request, api: str) -> web.StreamResponse:
        response = await self._answer(request, api)
        if self.options.echo_key and isinstance(response, web.Response) and response.status >= 400:
            _echo_in_error(response, CODECS[api].key_of(request.headers))
        return response

    async def _answer(self, request: web.Request, api: str) -> web.StreamResponse:
        codec = CODECS[api]
        key = codec.key_of(request.headers)
        kid = key_id(key)
        stats = self.stats
        t = stats.enter(kid)
        model, status, tag, tokens, digest = "", 0, "", 0, ""
        try:
            if self._keys and key not in self._keys:
                status, tag = codec.auth_status, "auth"
                return self._json(codec.auth_status, codec.auth_error(key))
            wait, limits = self._admit(api, kid, t)
            if wait is not None:
                status, tag = 429, "ratelimit"
                message = "rate limit reached for requests (the server's own rpm limit)"
                return self._json(429, codec.error(429, message, kind="rate_limit_error", code="rate_limit_exceeded"),
                                  {**retry_headers(wait), **limits})
            raw = await request.read()
            digest = request_digest(raw, request.headers)
            try:
                body = orjson.loads(raw)
                chat = codec.decode(body, request.headers)
                named = codec.model_from(request)
                if named is not None:  # the model the path names (Gemini; Azure's deployments API)
                    chat = replace(chat, model=named)
                n = codec.choices(body)
            except (ValueError, BadRequest, KeyError, TypeError, AttributeError) as exc:
                status, tag = 400, "bad_request"
                message = str(exc) if isinstance(exc, BadRequest) else f"could not parse the request: {type(exc).__name__}"
                return self._json(400, codec.error(400, message), limits)
            model = chat.model
            streamed = body.get("stream") is True
            has_tools = bool(chat.tools)
            for rule in self.options.rules:
                if rule.applies(model, codec.params_of(body), has_tools):
                    status, tag = 400, f"rule:{rule.spec}"
                    stats.rejected(rule.spec, model, rule.param)
                    return self._json(400, codec.rule_error(rule, body, has_tools), limits)
            drawn = self._draw_fault()  # the kind drawn (stats tag it so); the fault met, as streamed or not
            fault = None if drawn is None else (_STREAMED if streamed else _UNSTREAMED).get(drawn, drawn)
            delay = self.latency()
            if delay > 0:
                await asyncio.sleep(delay)
            if fault in ("429", "500", "503", "529"):
                status, tag = self._fault_status(codec, fault), f"fault:{drawn}"
                return self._status_fault(codec, fault, limits)
            if fault == "reset":
                status, tag = 0, f"fault:{drawn}"  # the connection is cut before any status line
                if request.transport is not None:
                    request.transport.abort()
                raise asyncio.CancelledError  # nothing more to say on a connection that is gone
            if fault == "slow":
                status, tag = 200, f"fault:{drawn}"
                await asyncio.sleep(self.options.slow_s)  # the client gave up long ago; answer anyway
                fault = None
            try:
                answers = self._answers(chat, n)
                if self.options.echo_key:
                    answers = tuple(replace(a, text=f"{a.text or ''} (your key is {key})") for a in answers)
            except ProviderError as exc:  # a simulated failure (the flaky auditor persona)
                status, tag = 500, "sim_error"
                return self._json(500, codec.error(500, exc.message, kind=codec.kind_for(500)), limits)
            except ValueError:  # e.g. a model id that names no persona
                status, tag = 404, "unknown_model"
                code, error = codec.unknown_model(model)
                return self._json(code, error, limits)
            if not tag:
                status, tag = 200, "ok"
            if drawn is not None:
                tag = f"fault:{drawn}"
            tokens = (answers[0].usage.input_tokens or 0) + sum(a.usage.output_tokens or 0 for a in answers)
            if streamed:
                frames = self._frames(codec.wire, answers, model, body, request.headers)
                if fault == "drip":
                    return await self._drip(request, b"".join(frames), _SSE, limits)
                return await self._stream(request, api, frames, limits, fault)
            payload = _dumps(self.encode_answers(codec.wire, answers, model, body))
            if fault == "drip":
                return await self._drip(request, payload, _JSON, limits)
            if fault is None:
                return await self._send(request, web.Response(body=payload, content_type=_JSON, headers=limits))
            return await self._broken_body(request, payload, fault, limits)
        finally:
            stats.leave(kid)
            stats.record(t, kid, api, model, status, tag, tokens, digest, request.get(_SENT))

    async def _send(self, request: web.Request, response: web.Response) -> web.Response:
        """Send an answer now (aiohttp would after the handler returns; doing it twice is a no-op) and stamp
        when it went out whole; a client gone before that gets nothing, and no stamp."""
        try:
            await response.prepare(request)
            await response.write_eof()
        except ConnectionError:
            if request.transport is not None:
                request.transport.close()
            return response
        request[_SENT] = self.stats.now()
        return response

    def _answers(self, chat: ChatRequest, n: int) -> tuple[ChatResponse, ...]:
        first = self.sim.respond(chat)
        seed = chat.seed or 0
        return (first, *(self.sim.respond(replace(chat, seed=mix64(seed, 0xC40 + i))) for i in range(1, n)))

    @staticmethod
    def encode_answers(wire: str, answers: tuple[ChatResponse, ...], model: str, body: Any) -> dict[str, Any]:
        """The answer body of ``wire`` (a live answer's, and each answer of a batch)."""
        if wire == "openai":
            return OpenAICodec.encode(answers[0], model, answers[1:])
        if wire == "anthropic":
            return AnthropicCodec.encode(answers[0], model)
        if wire == "gemini":
            return GeminiCodec.encode(answers, model)
        if wire == "bedrock":
            return BedrockCodec.encode(answers[0], model)
        return ResponsesCodec.encode(answers[0], model, body=body)

    @staticmethod
    def _frames(wire: str, answers: tuple[ChatResponse, ...], model: str, body: Any,
                headers: Mapping[str, str]) -> list[bytes]:
        if wire == "openai":
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return openai_frames(answers, model, usage)
        if wire == "anthropic":
            return anthropic_frames(answers[0], model, AnthropicCodec.eager_tools(body, headers))
        return responses_frames(answers[0], model, body)

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
        return web.Response(status=status, body=_dumps(body), content_type=_JSON, headers=headers)

    @staticmethod
    def _fault_status(codec: Any, fault: str) -> int:
        return codec.overloaded[0] if fault == "529" else int(fault)

    def _status_fault(self, codec: Any, fault: str, limits: dict[str, str]) -> web.Response:
        if fault == "429":
            headers = {**retry_headers(self.options.fault_retry_after_s), **limits}
            return self._json(429, codec.error(429, "Rate limit reached (injected fault)", kind="rate_limit_error",
                                               code="rate_limit_exceeded"), headers)
        if fault == "529":
            status, kind, message = codec.overloaded
            return self._json(status, codec.error(status, message, kind=kind), limits)
        status = int(fault)
        return self._json(status, codec.error(status, f"injected fault: HTTP {status}", kind=codec.kind_for(status)),
                          limits)

    async def _broken_body(self, request: web.Request, body: bytes, fault: str,
                           limits: dict[str, str]) -> web.StreamResponse:
        if fault == "malformed":
            return web.Response(body=body[: len(body) // 2] + b'",,}', content_type=_JSON, headers=limits)
        # truncated: promise the whole body, send half, close
        response = web.StreamResponse(status=200, headers={"content-type": _JSON, **limits})
        response.content_length = len(body)
        await response.prepare(request)
        await response.write(body[: len(body) // 2])
        if request.transport is not None:
            request.transport.close()
        raise asyncio.CancelledError

    async def _drip(self, request: web.Request, body: bytes, content_type: str,
                    limits: dict[str, str]) -> web.StreamResponse:
        """The whole answer, one byte every ``drip_s``: each read is quick, the request is not."""
        response = web.StreamResponse(status=200, headers={"content-type": content_type, **limits})
        response.content_length = len(body)
        await response.prepare(request)
        try:
            for i in range(len(body)):
                await response.write(body[i:i + 1])
                await asyncio.sleep(self.options.drip_s)
            await response.write_eof()
            request[_SENT] = self.stats.now()
        except ConnectionError:  # the client's whole-request timeout gave up on it
            if request.transport is not None:
                request.transport.close()
        return response

    async def _stream(self, request: web.Request, api: str, frames: list[bytes], limits: dict[str, str],
                      fault: str | None) -> web.StreamResponse:
        """Write ``frames`` as server-sent events; a stream fault strikes halfway through."""
        response = web.StreamResponse(status=200, headers={"content-type": _SSE, "cache-control": "no-cache",
                                                           **limits})
        await response.prepare(request)
        cut = max(1, len(frames) // 2) if fault is not None else len(frames)
        for frame in frames[:cut]:
            await response.write(frame)
        if fault == "disconnect":
            if request.transport is not None:
                request.transport.close()
            raise asyncio.CancelledError
        try:
            if fault == "stall":
                await asyncio.sleep(self.options.slow_s)  # past the client's read timeout; then carry on
            elif fault == "bad_chunk":
                await response.write(malformed_frame(api))
            for frame in frames[cut:]:
                await response.write(frame)
            await response.write_eof()
            if fault is None:  # a stalled or broken stream is no answer, even when its last byte went out
                request[_SENT] = self.stats.now()
        except ConnectionError:  # the client gave up on a stalled or broken stream: nobody is listening
            if request.transport is not None:
                request.transport.close()
        return response


def _echo_in_error(response: web.Response, key: str | None) -> None:
    """The "echo the key" fault on an error answer: the key appended to the vendor error's message."""
    try:
        body = orjson.loads(response.body)  # type: ignore[arg-type]
        body["error"]["message"] = f"{body['error']['message']} (the key sent: {key or '(none)'})"
    except (ValueError, TypeError, KeyError):
        return
    response.body = _dumps(body)


async def start_server(options: ServeOptions) -> tuple[web.AppRunner, SimServer, int]:
    """Start serving on ``options.host:options.port`` (0: any free port); return the bound port."""
    state = SimServer(options)
    # shutdown_timeout: do not wait out a "slow" fault's sleep when stopping
    runner = web.AppRunner(state.app(), access_log=None, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, options.host, options.port, backlog=4096, reuse_address=True)
    await site.start()
    server = site._server  # the asyncio server: the only way to learn the port bound for port 0
    assert isinstance(server, asyncio.Server)
    port = server.sockets[0].getsockname()[1]
    return runner, state, port
