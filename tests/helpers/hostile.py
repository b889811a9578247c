"""A server of the tests' own on 127.0.0.1 that answers what a test tells it to: hostile bodies and headers.

``HostileServer(answer)`` runs an aiohttp app in a thread; every POST is answered by
``answer(n, body)`` → ``(status, headers, body)`` (``n`` counts the requests from 0, ``body``
is the parsed JSON request), so a test can send a usage field no vendor sends, a Retry-After
of a billion seconds, or a 429 now and then between good answers.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

from aiohttp import web

Answer = Callable[[int, dict[str, Any]], tuple[int, dict[str, str], Any]]


def chat_answer(text: str = "Which account do you mean?", usage: Any = None) -> dict[str, Any]:
    """An OpenAI Chat Completions answer with ``text`` and no tool call; ``usage`` as given (any JSON)."""
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": usage}


class HostileServer:
    def __init__(self, answer: Answer, record: list[tuple[dict[str, str], bytes]] | None = None) -> None:
        self.answer = answer
        #: ``record``: each request's headers and raw body are appended to it, as received
        self.record = record
        self.requests = 0
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        if self.record is not None:
            self.record.append((dict(request.headers), raw))
        body = json.loads(raw)
        with self._lock:
            n, self.requests = self.requests, self.requests + 1
        status, headers, payload = self.answer(n, body)
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return web.Response(status=status, headers=headers, text=text, content_type="application/json")

    def _serve(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.close()

    def __enter__(self) -> HostileServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
