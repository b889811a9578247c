"""``trialgrid serve``: OpenAI- and Anthropic-compatible endpoints answered by the simulated agent.

Routes: ``POST /v1/chat/completions`` (OpenAI), ``POST /v1/messages`` (Anthropic),
``GET /stats`` (``?log=1`` adds the per-request log), ``GET /health``, and both
vendors' batch APIs (``runner/sim/serve/batches.py``).

Each request is answered by the same ``SimProvider.respond`` the in-process ``sim``
provider uses, from the request decoded back into a neutral ``ChatRequest`` (seed
from OpenAI's ``seed`` field or the ``x-trialgrid-seed`` header), so a sweep gives
the same outcomes over HTTP as in-process. Around that, in this order, as a real
API would: the API key check (401), the server's own per-key rate limit (a real 429
with ``Retry-After``, ``retry-after-ms`` and the vendor's rate-limit headers), the
body check (400), the parameter-rejection rules (400 in the vendor's error style),
the latency draw, and the fault draw (429 / 500 / 503 / slow past the client's
timeout / connection reset / malformed JSON / truncated body).

Everything runs on one event loop and the state changes in synchronous code
between awaits, so counts cannot race.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import deque
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from aiohttp import web

from runner.sim import SimProvider
from runner.sim.serve.batches import BatchRoutes
from runner.sim.serve.codecs import CODECS, BadRequest
from runner.sim.serve.options import FAULTS, ServeOptions
from runner.sim.serve.stats import ServerStats, key_id

_JSON = "application/json"
_FAULT_STATUS = {"429": 429, "500": 500, "503": 503, "slow": 200, "reset": 0, "malformed": 200, "truncated": 200}


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
        self._fault_table = [(k, options.faults[k]) for k in FAULTS if options.faults.get(k)]
        self._windows: dict[str, deque[float]] = {}
        self._keys = frozenset(options.keys)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_get("/stats", self._stats)
        app.router.add_get("/health", self._health)
        self.batches = BatchRoutes(self)
        self.batches.register(app)
        return app

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "openai")

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "anthropic")

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(body=b'{"ok":true}', content_type=_JSON)

    async def _stats(self, request: web.Request) -> web.Response:
        return web.Response(body=_dumps(self.stats.snapshot(with_log=request.query.get("log") == "1")),
                            content_type=_JSON)

    def _draw_fault(self) -> str | None:
        if not self._fault_table:
            return None
        u = self._fault_rng.random()
        for kind, rate in self._fault_table:
            if u < rate:
                return kind
            u -= rate
        return None

    def _rate_limited(self, kid: str, now: float) -> float | None:
        """Seconds until ``kid`` may send again if it is over the server's own limit, else None."""
        rpm = self.options.rpm
        if rpm is None:
            return None
        window = self._windows.setdefault(kid, deque())
        span = self.options.rpm_window_s
        while window and window[0] <= now - span:
            window.popleft()
        if len(window) >= rpm:
            return window[0] + span - now
        window.append(now)
        return None

    async def _handle(self, request: web.Request, api: str) -> web.StreamResponse:
        codec = CODECS[api]
        key = codec.key_of(request.headers)
        kid = key_id(key)
        stats = self.stats
        t = stats.enter(kid)
        model, status, tag, tokens = "", 0, "", 0
        try:
            if self._keys and key not in self._keys:
                status, tag = 401, "auth"
                return self._json(401, codec.auth_error(key))
            wait = self._rate_limited(kid, t)
            if wait is not None:
                status, tag = 429, "ratelimit"
                return self._too_many(api, codec, wait, "rate limit reached for requests (the server's own rpm limit)")
            raw = await request.read()
            try:
                body = orjson.loads(raw)
                chat = codec.decode(body, request.headers)
            except (ValueError, BadRequest, KeyError, TypeError, AttributeError) as exc:
                status, tag = 400, "bad_request"
                message = str(exc) if isinstance(exc, BadRequest) else f"could not parse the request: {type(exc).__name__}"
                return self._json(400, codec.error(400, message))
            model = chat.model
            has_tools = bool(chat.tools)
            for rule in self.options.rules:
                if rule.applies(model, body, has_tools):
                    status, tag = 400, f"rule:{rule.spec}"
                    stats.rejected(rule.spec, model, rule.param)
                    return self._json(400, codec.rule_error(rule, body, has_tools))
            fault = self._draw_fault()
            delay = self.latency()
            if delay > 0:
                await asyncio.sleep(delay)
            if fault is not None:
                # the status the client sees (0: the connection is cut before any status line)
                status, tag = _FAULT_STATUS[fault], f"fault:{fault}"
                return await self._fault(request, api, codec, fault, chat)
            try:
                answer = self.sim.respond(chat)
            except ValueError as exc:  # e.g. a model id that names no persona
                status, tag = 404, "unknown_model"
                return self._json(404, codec.error(404, f"The model '{model}' does not exist: {exc}",
                                                   kind="not_found_error", code="model_not_found"))
            status, tag = 200, "ok"
            tokens = answer.usage.input_tokens + answer.usage.output_tokens
            return web.Response(body=_dumps(codec.encode(answer, model)), content_type=_JSON)
        finally:
            stats.leave(kid)
            stats.record(t, kid, api, model, status, tag, tokens)

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
        return web.Response(status=status, body=_dumps(body), content_type=_JSON, headers=headers)

    def _too_many(self, api: str, codec: Any, wait_s: float, message: str) -> web.Response:
        wait_s = max(0.0, wait_s)
        headers = {"retry-after": str(max(1, math.ceil(wait_s))), "retry-after-ms": str(int(wait_s * 1000))}
        if self.options.rpm is not None:
            if api == "openai":
                headers.update({"x-ratelimit-limit-requests": str(self.options.rpm),
                                "x-ratelimit-remaining-requests": "0",
                                "x-ratelimit-reset-requests": f"{wait_s:.3f}s"})
            else:
                reset = datetime.now(UTC) + timedelta(seconds=wait_s)
                headers.update({"anthropic-ratelimit-requests-limit": str(self.options.rpm),
                                "anthropic-ratelimit-requests-remaining": "0",
                                "anthropic-ratelimit-requests-reset": reset.isoformat().replace("+00:00", "Z")})
        return self._json(429, codec.error(429, message, kind="rate_limit_error", code="rate_limit_exceeded"), headers)

    async def _fault(self, request: web.Request, api: str, codec: Any, fault: str, chat: Any) -> web.StreamResponse:
        options = self.options
        if fault == "429":
            wait = options.fault_retry_after_s
            headers = {"retry-after": f"{wait:g}", "retry-after-ms": str(int(wait * 1000))}
            return self._json(429, codec.error(429, "Rate limit reached (injected fault)", kind="rate_limit_error",
                                               code="rate_limit_exceeded"), headers)
        if fault in ("500", "503"):
            status = int(fault)
            return self._json(status, codec.error(status, f"injected fault: HTTP {status}", kind=codec.kind_for(status)))
        if fault == "slow":
            await asyncio.sleep(options.slow_s)  # the client gave up long ago; answer anyway
            return web.Response(body=_dumps(codec.encode(self.sim.respond(chat), chat.model)), content_type=_JSON)
        transport = request.transport
        if fault == "reset":
            if transport is not None:
                transport.abort()
            raise asyncio.CancelledError  # nothing more to say on a connection that is gone
        body = _dumps(codec.encode(self.sim.respond(chat), chat.model))
        if fault == "malformed":
            return web.Response(body=body[: len(body) // 2] + b'",,}', content_type=_JSON)
        # truncated: promise the whole body, send half, close
        response = web.StreamResponse(status=200, headers={"content-type": _JSON})
        response.content_length = len(body)
        await response.prepare(request)
        await response.write(body[: len(body) // 2])
        if transport is not None:
            transport.close()
        raise asyncio.CancelledError


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
