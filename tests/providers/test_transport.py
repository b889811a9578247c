"""The default transport: aiohttp's session under the ``Client`` protocol, answering ``httpx.Response``s.

Against a real aiohttp server on 127.0.0.1: the body goes out as given with the
provider's headers and the request's own, a compressed answer comes back decoded, a
redirect is returned as is (never followed), and every transport kind answers the same
status, headers and bytes, so the retry loop, classifier and limiter cannot tell them apart.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import httpx
import pytest
from aiohttp import web

from runner.providers.transport import make_client


async def _with_server(check: Any) -> None:
    seen: list[dict[str, Any]] = []

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append({"body": body, "headers": dict(request.headers),
                     "peer": request.transport.get_extra_info("peername") if request.transport else None})
        answer = json.dumps({"got": json.loads(body), "n": len(seen)}).encode()
        if request.query.get("gzip"):
            return web.Response(body=gzip.compress(answer), headers={"Content-Encoding": "gzip",
                                                                     "Content-Type": "application/json"})
        return web.Response(body=answer, content_type="application/json", headers={"x-ratelimit-remaining-requests": "7"})

    async def moved(request: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": "/echo"})

    app = web.Application()
    app.router.add_post("/echo", echo)
    app.router.add_post("/moved", moved)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        await check(f"http://127.0.0.1:{port}", seen)
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("kind", ["aiohttp", "httpx-transport", "httpx-aiohttp", "httpx", "sharded"])
def test_every_transport_kind_answers_the_same_status_headers_and_decoded_bytes(kind: str) -> None:
    async def check(base: str, seen: list[dict[str, Any]]) -> None:
        client = make_client(kind, timeout_s=10, headers={"authorization": "Bearer k", "content-type": "application/json"},
                             max_connections=4)
        try:
            plain = await client.post(base + "/echo", content=b'{"a": 1}', headers={"x-trialgrid-seed": "5"})
            zipped = await client.post(base + "/echo?gzip=1", content=b'{"b": [2]}', headers={})
            redirect = await client.post(base + "/moved", content=b"{}", headers={})
        finally:
            await client.aclose()
        assert isinstance(plain, httpx.Response)
        assert plain.status_code == 200 and plain.json() == {"got": {"a": 1}, "n": 1}
        assert plain.headers["x-ratelimit-remaining-requests"] == "7"  # what pacing reads
        assert json.loads(zipped.content) == {"got": {"b": [2]}, "n": 2}  # decompressed once, whatever the kind
        assert redirect.status_code == 307 and redirect.headers["location"] == "/echo"  # not followed
        assert len(seen) == 2
        assert seen[0]["body"] == b'{"a": 1}'
        assert seen[0]["headers"]["Authorization"] == "Bearer k" and seen[0]["headers"]["x-trialgrid-seed"] == "5"
        assert "x-trialgrid-seed" not in seen[1]["headers"]  # a request's own header is its own

    asyncio.run(_with_server(check))


def test_the_aiohttp_kind_keeps_to_max_connections_and_closes_cleanly() -> None:
    async def check(base: str, seen: list[dict[str, Any]]) -> None:
        client = make_client("aiohttp", timeout_s=10, headers={}, max_connections=2)
        answers = await asyncio.gather(*(client.post(base + "/echo", content=json.dumps(i).encode(), headers={})
                                         for i in range(20)))
        await client.aclose()
        await client.aclose()  # twice is harmless
        assert sorted(a.json()["got"] for a in answers) == list(range(20))
        assert len({s["peer"] for s in seen}) <= 2  # max_connections: 20 requests over at most 2 connections

    asyncio.run(_with_server(check))
