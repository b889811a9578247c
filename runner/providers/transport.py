"""The HTTP client under the wire formats: httpx's API over a transport chosen by measurement.

httpx is the client API (requests, headers, timeouts, exceptions), but its own
async connection pool (httpcore) does not scale with concurrency on this project's
machines: against a 50 ms loopback server the issue measured 293 req/s at 16
concurrent requests and ~104 at 256. ``benchmarks/http_throughput.py`` compares
three ways to carry httpx requests (figures in that script's output and the
README's "Performance" section):

- ``httpx``: one ``httpx.AsyncClient`` with its default pool;
- ``sharded``: several ``httpx.AsyncClient`` objects, requests spread round-robin,
  each pool small enough to stay on the fast path;
- ``aiohttp``: one ``httpx.AsyncClient`` over ``httpx_aiohttp.AiohttpTransport``,
  i.e. aiohttp's connection pool and HTTP parser behind the httpx API.

``DEFAULT_TRANSPORT`` is the one the benchmark chose. Every kind is driven through
the same ``Client`` protocol, so the wire formats never know which one they use.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Protocol

import httpx

TRANSPORTS = ("aiohttp", "httpx", "sharded")
#: chosen by benchmarks/http_throughput.py (see the README's "Performance" section)
DEFAULT_TRANSPORT = "aiohttp"
_SHARD_SIZE = 16  # connections per shard: where a single httpx pool still scaled in the benchmark


class Client(Protocol):
    async def post(self, url: str, *, content: bytes, headers: Mapping[str, str]) -> httpx.Response: ...

    async def aclose(self) -> None: ...


def _limits(max_connections: int) -> httpx.Limits:
    return httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections,
                        keepalive_expiry=30.0)


class ShardedClient:
    """Several small httpx pools used round-robin: each stays below the size where httpcore slows."""

    def __init__(self, shards: list[httpx.AsyncClient]) -> None:
        self._shards = shards
        self._next = itertools.cycle(shards)

    async def post(self, url: str, *, content: bytes, headers: Mapping[str, str]) -> httpx.Response:
        return await next(self._next).post(url, content=content, headers=headers)

    async def aclose(self) -> None:
        for shard in self._shards:
            await shard.aclose()


def make_client(
    kind: str = DEFAULT_TRANSPORT,
    *,
    timeout_s: float,
    headers: Mapping[str, str],
    max_connections: int = 1024,
) -> Client:
    """An async client of ``kind`` whose every request carries ``headers``.

    ``trust_env=False``: proxies and netrc from the environment are ignored, so what a
    sweep names is exactly where requests go (and a key is never sent to a proxy).
    """
    timeout = httpx.Timeout(timeout_s)
    common: dict[str, Any] = {"timeout": timeout, "headers": dict(headers), "trust_env": False}
    if kind == "httpx":
        return httpx.AsyncClient(limits=_limits(max_connections), **common)
    if kind == "sharded":
        n = max(1, -(-max_connections // _SHARD_SIZE))
        return ShardedClient([httpx.AsyncClient(limits=_limits(_SHARD_SIZE), **common) for _ in range(n)])
    if kind == "aiohttp":
        from httpx_aiohttp import AiohttpTransport

        transport = AiohttpTransport(limits=_limits(max_connections), trust_env=False)
        return httpx.AsyncClient(transport=transport, **common)
    raise ValueError(f"unknown transport {kind!r}: expected one of {', '.join(TRANSPORTS)}")
