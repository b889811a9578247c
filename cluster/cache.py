"""The response cache on Ray: one process owns the SQLite file, workers reach it in batches.

The single-node cache (``runner.providers.cache``) is one SQLite database in WAL mode.
SQLite over a network filesystem, or written by many hosts, is not safe, and workers
on other nodes cannot see the driver's disk anyway. So on Ray the database stays where
one process owns it: ``CacheActor`` runs on the driver's node (pinned there) and is the
only reader and writer of ``DIR/responses.sqlite``. Workers use ``SharedCache``, the
``AnswerStore`` ``CachedProvider`` talks to: every lookup and every store made during
one turn of the worker's event loop leaves as *one* actor call (``get_many`` /
``put_many``), so the per-call cost of Ray is paid per batch, not per request.

The rules are the single-node ones, because the keys and the wrapper are the same code:
same ``request_key`` (neutral request + the trial's seed), only answers are stored (a
``ProviderError`` never reaches ``store``), a hit comes back with ``cached=True`` and
``attempts=0``. A store leaves the worker in the same loop turn its answer arrived in,
so a worker that dies loses only the answers it was still waiting for; each
``put_many`` is one transaction on the actor.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runner.core.types import ChatResponse
from runner.providers.cache import ResponseCache, decode_response, encode_response


class CacheActor:
    """The owner of ``DIR/responses.sqlite`` for a Ray run (max_concurrency=1: calls are serialised)."""

    def __init__(self, directory: str) -> None:
        self._cache = ResponseCache(Path(directory))
        self.calls = 0

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        self.calls += 1
        return self._cache.get_blobs(keys)

    def put_many(self, items: list[tuple[bytes, bytes]]) -> int:
        self.calls += 1
        self._cache.put_blobs(items)
        return len(items)

    def stats(self) -> dict[str, Any]:
        return {**self._cache.stats(), "calls": self.calls}

    def close(self) -> None:
        self._cache.close()


class SharedCache:
    """A worker's ``AnswerStore``: lookups and stores batched per event-loop turn to a ``CacheActor``."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor
        self._gets: list[tuple[bytes, asyncio.Future[ChatResponse | None]]] = []
        self._puts: list[tuple[bytes, bytes]] = []
        self._flush_scheduled = False
        self._answering: set[asyncio.Task[None]] = set()
        self._stores: list[Any] = []  # put_many calls sent and not yet confirmed (``drain``)

    async def lookup(self, key: bytes) -> ChatResponse | None:
        future: asyncio.Future[ChatResponse | None] = asyncio.get_running_loop().create_future()
        self._gets.append((key, future))
        self._schedule()
        return await future

    def store(self, key: bytes, response: ChatResponse) -> None:
        self._puts.append((key, encode_response(response)))
        self._schedule()

    def _schedule(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._puts:
            puts, self._puts = self._puts, []
            self._stores.append(self._actor.put_many.remote(puts))  # sent now: a later get is ordered after it
        if self._gets:
            gets, self._gets = self._gets, []
            task = asyncio.ensure_future(self._answer(gets))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)

    async def _answer(self, gets: list[tuple[bytes, asyncio.Future[ChatResponse | None]]]) -> None:
        try:
            blobs = await self._actor.get_many.remote([k for k, _ in gets])
        except BaseException as exc:
            for _, future in gets:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), blob in zip(gets, blobs, strict=True):
            if not future.done():
                future.set_result(None if blob is None else _decoded(blob))

    async def drain(self) -> None:
        """Wait until every store sent so far is committed; raise if the cache actor could not store one.

        A worker calls it before returning a chunk, so a chunk's rows never reach the
        output before its answers are in the cache (and a failing cache stops the run
        instead of silently storing nothing).
        """
        stores, self._stores = self._stores, []
        for ref in stores:
            try:
                await ref
            except Exception as exc:
                raise RuntimeError(f"the response cache could not store answers: {exc}") from exc


def _decoded(blob: bytes) -> ChatResponse | None:
    """A stored answer, or a miss when the value is not a well-formed one (never a failed trial)."""
    try:
        return decode_response(blob)
    except ValueError:
        return None
