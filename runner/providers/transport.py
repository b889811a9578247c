"""The HTTP client under the wire formats: httpx's API over a transport chosen by measurement.

httpx is the client API (requests, responses, headers, timeouts, exceptions), but
its own async connection pool (httpcore) does not scale with concurrency on this
project's machines: against a 50 ms loopback server the issue measured 293 req/s
at 16 concurrent requests and ~104 at 256. ``benchmarks/http_throughput.py``
compares the ways to carry httpx requests (figures in that script's output and the
README's "Performance" section):

- ``httpx``: one ``httpx.AsyncClient`` with its default pool;
- ``sharded``: several ``httpx.AsyncClient`` objects used round-robin, each pool
  small enough to stay on the fast path;
- ``httpx-aiohttp``: one ``httpx.AsyncClient`` over ``httpx_aiohttp.AiohttpTransport``
  (aiohttp's pool and parser behind the httpx API);
- ``httpx-transport``: the same transport, driven directly with ``httpx.Request``
  objects. ``AsyncClient.send`` spends more CPU per request than the transport itself
  (URL re-parsing, header merging, the cookie jar, auth and redirect hooks — none
  of which an API client needs), and on two shared cores that CPU is the limit;
- ``aiohttp``: one ``aiohttp.ClientSession`` posting the encoded body as is and
  reading the answer whole with ``read()``; the status, raw headers and bytes become
  one ``httpx.Response``. No ``httpx.Request``, no byte stream and chunk iterator
  between aiohttp and the caller, no second copy of the body, no per-request header
  list (the wrapped path was 45% of client CPU, and trialgrid reached
  0.45–0.58 of a bare aiohttp loop).

``DEFAULT_TRANSPORT`` is the one the benchmark chose. Every kind is driven through
the same ``Client`` protocol and answers with an ``httpx.Response``, so the wire
formats, the retry loop, the classifier and the limiter never know which one they use.

``timeout_s`` bounds each request as a whole — connecting, the status line and
headers, and the full body — not only each read: httpx's and aiohttp's timeouts are
per operation, so an answer dripping one byte every 100 ms never tripped a 2 s read
timeout and took 54 s. Every kind is wrapped in ``_WholeRequest``, which
ends the request at ``timeout_s`` with ``TimeoutError`` (a transient error, retried
like any timeout). It is separate from the trial's deadline (``engine.timeout_s``),
which covers all of a trial's calls, their retries and their waits.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

import httpx

from runner.providers.settings import DEFAULT_TRANSPORT

_TRANSPORTS = ("aiohttp", "httpx-transport", "httpx-aiohttp", "httpx", "sharded")
_SHARD_SIZE = 16  # connections per shard: where a single httpx pool still scaled in the benchmark


class Client(Protocol):
    async def post(self, url: str, *, content: bytes, headers: Mapping[str, str]) -> httpx.Response: ...

    async def aclose(self) -> None: ...


def _limits(max_connections: int) -> httpx.Limits:
    return httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections,
                        keepalive_expiry=30.0)


class _ShardedClient:
    """Several small httpx pools used round-robin: each stays below the size where httpcore slows."""

    def __init__(self, shards: list[httpx.AsyncClient]) -> None:
        self._shards = shards
        self._next = itertools.cycle(shards)

    async def post(self, url: str, *, content: bytes, headers: Mapping[str, str]) -> httpx.Response:
        return await next(self._next).post(url, content=content, headers=headers)

    async def aclose(self) -> None:
        for shard in self._shards:
            await shard.aclose()


class _DirectClient:
    """httpx requests handed straight to an httpx transport, without ``AsyncClient``'s per-request work.

    What ``AsyncClient`` would add and an API client does not need: cookies (none are
    kept), redirects (a redirected POST is an error here: the 3xx is returned as is),
    auth flows (the key is a plain header), event hooks. Timeouts go the way
    ``AsyncClient`` passes them, in the request's ``timeout`` extension.
    """

    def __init__(self, transport: httpx.AsyncBaseTransport, *, timeout_s: float, headers: Mapping[str, str]) -> None:
        self._transport = transport
        self._headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        self._extensions = {"timeout": httpx.Timeout(timeout_s).as_dict()}
        self._urls: dict[str, httpx.URL] = {}

    async def post(self, url: str, *, content: bytes, headers: Mapping[str, str]) -> httpx.Response:
        parsed = self._urls.get(url)
        if parsed is None:
            parsed = self._urls[url] = httpx.URL(url)
        request = httpx.Request("POST", parsed, content=content, extensions=self._extensions,
                                headers=[(b"host", parsed.netloc), *self._headers,
                                         *((k.encode(), v.encode()) for k, v in headers.items())])
        response = await self._transport.handle_async_request(request)
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response

    async def aclose(self) -> None:
        await self._transport.aclose()


class _EmptyStream(httpx.AsyncByteStream):
    """The stream of a response whose body is already read: nothing left to iterate."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        return
        yield b""  # pragma: no cover - makes this an async generator


_EMPTY_STREAM = _EmptyStream()


class _ReadResponse(httpx.Response):
    """An ``httpx.Response`` of a body aiohttp already read whole (and decompressed, if the server compressed it).

    ``httpx.Response(content=...)`` would pass the bytes through its byte stream, decoder and
    chunker once more (~30 µs a response, as much as the rest of the client's own work): here
    the body is set as read, which is what ``Response.read()`` leaves behind.
    """

    def __init__(self, status_code: int, headers: Any, body: bytes) -> None:
        super().__init__(status_code, headers=headers, stream=_EMPTY_STREAM)
        self._content = body


class _AiohttpClient:
    """aiohttp's own session under the ``Client`` protocol: the body sent as given, the answer read whole.

    The session is opened on the first request (aiohttp binds it to the running loop)
    with the provider's headers as its defaults, so a request adds only its own (the
    seed header). No aiohttp timeout is set: ``_WholeRequest`` bounds every request as a
    whole. Redirects are not followed (a redirected POST is an error here: the 3xx is
    returned as is), a compressed body is decompressed by aiohttp, and no cookie is kept.
    aiohttp's errors reach the caller as they are (``aiohttp.ClientError``, ``OSError``,
    ``TimeoutError``); ``http_base`` classifies them.
    """

    def __init__(self, *, headers: Mapping[str, str], max_connections: int) -> None:
        self._headers = dict(headers)
        self._max_connections = max_connections
        self._session: Any = None

    def _open(self) -> Any:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self._max_connections, keepalive_timeout=30.0)
        self._session = aiohttp.ClientSession(
            connector=connector, headers=self._headers, trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar(), timeout=aiohttp.ClientTimeout(total=None))
        return self._session

    async def post(self, url: str, *, content: bytes, headers: Mapping[str, str]) -> httpx.Response:
        session = self._session or self._open()
        async with session.post(url, data=content, headers=headers or None, allow_redirects=False) as resp:
            return _ReadResponse(resp.status, resp.raw_headers, await resp.read())

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class _WholeRequest:
    """Any ``Client`` with a deadline on each request as a whole (see the module docstring)."""

    def __init__(self, inner: Client, timeout_s: float) -> None:
        self._inner = inner
        self._timeout_s = timeout_s

    async def post(self, url: str, *, content: bytes, headers: Mapping[str, str]) -> httpx.Response:
        # asyncio.timeout turns only its own cancellation into TimeoutError: a stop's passes through unchanged
        async with asyncio.timeout(self._timeout_s):
            return await self._inner.post(url, content=content, headers=headers)

    async def aclose(self) -> None:
        await self._inner.aclose()


def make_client(
    kind: str = DEFAULT_TRANSPORT,
    *,
    timeout_s: float,
    headers: Mapping[str, str],
    max_connections: int = 1024,
) -> Client:
    """An async client of ``kind`` whose every request carries ``headers`` and ends within ``timeout_s``.

    ``trust_env=False``: proxies and netrc from the environment are ignored, so what a
    sweep names is exactly where requests go (and a key is never sent to a proxy).
    """
    return _WholeRequest(_make_client(kind, timeout_s=timeout_s, headers=headers, max_connections=max_connections),
                         timeout_s)


def _make_client(kind: str, *, timeout_s: float, headers: Mapping[str, str], max_connections: int) -> Client:
    timeout = httpx.Timeout(timeout_s)
    common: dict[str, Any] = {"timeout": timeout, "headers": dict(headers), "trust_env": False}
    if kind == "httpx":
        return httpx.AsyncClient(limits=_limits(max_connections), **common)
    if kind == "sharded":
        n = max(1, -(-max_connections // _SHARD_SIZE))
        return _ShardedClient([httpx.AsyncClient(limits=_limits(_SHARD_SIZE), **common) for _ in range(n)])
    if kind == "aiohttp":
        return _AiohttpClient(headers=headers, max_connections=max_connections)
    if kind in ("httpx-transport", "httpx-aiohttp"):
        from httpx_aiohttp import AiohttpTransport

        transport = AiohttpTransport(limits=_limits(max_connections), trust_env=False)
        if kind == "httpx-transport":
            return _DirectClient(transport, timeout_s=timeout_s, headers=headers)
        return httpx.AsyncClient(transport=transport, **common)
    raise ValueError(f"unknown transport {kind!r}: expected one of {', '.join(_TRANSPORTS)}")
