"""The shared remedy book: a parameter fix learned by one worker reaches all of them.

``RemedyActor`` holds the run's remedies (one per (provider, endpoint, model) and
parameter) and the list the manifest records. Each worker keeps runner's own
``RemedyBook`` — so applying remedies costs no call — subclassed as
``SharedRemedyBook`` to do two things more:

- ``learn`` also tells the actor, which pushes a remedy it had not seen to every
  subscribed worker (``RemedyBook.preload``: applied from the next request on);
- ``gate`` — the scout gate each worker already puts in front of the first request
  of a request shape — first pulls what the actor knows for that model, so the
  scout goes out with every remedy learned anywhere.

So a worker pays for a rejection only when no worker had learned that remedy
before its scout left: at most one rejected request per (model, parameter) per
worker, and usually one in the whole run. Announcing a remedy (the printed line,
the manifest entry) is the driver's job: it drains ``RemedyActor.new_entries``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from types import TracebackType
from typing import Any

from runner.providers.errors import Remedy
from runner.providers.remedies import BookKey, RemedyBook


class RemedyActor:
    """The run's remedies, shared by all workers (used as a Ray async actor)."""

    def __init__(self, known: list[tuple[BookKey, Remedy]] | None = None) -> None:
        self._book = RemedyBook()
        for key, remedy in known or ():
            self._book.preload(key, remedy)
        self._new: list[dict[str, Any]] = []
        self._subscribers: list[Any] = []

    async def learn(self, key: BookKey, remedy: Remedy, message: str) -> bool:
        key = tuple(key)  # type: ignore[assignment]
        if not await self._book.learn(key, remedy, message):
            return False
        self._new.append(self._book.learned[-1].as_json())
        for worker in list(self._subscribers):
            try:
                worker.adopt_remedy.remote(key, remedy)
            except Exception:
                self._subscribers.remove(worker)
        return True

    async def remedies(self, key: BookKey) -> tuple[Remedy, ...]:
        return self._book.remedies(tuple(key))  # type: ignore[arg-type]

    async def subscribe(self, worker: Any) -> None:
        self._subscribers.append(worker)

    async def new_entries(self) -> list[dict[str, Any]]:
        """Remedies learned since the last call, as the manifest records them (``Learned.as_json``)."""
        entries, self._new = self._new, []
        return entries


class SharedRemedyBook(RemedyBook):
    """runner's ``RemedyBook`` in one worker, kept in step with the run's ``RemedyActor``."""

    def __init__(self, actor: Any) -> None:
        super().__init__(on_learn=None)
        self._actor = actor

    async def learn(self, key: BookKey, remedy: Remedy, message: str) -> bool:
        new_here = await super().learn(key, remedy, message)
        if new_here:
            await self._actor.learn.remote(key, remedy, message)
        return new_here

    def gate(self, key: BookKey, shape: Hashable) -> Any:
        return _PullingGate(super().gate(key, shape), self, key)

    async def pull(self, key: BookKey) -> None:
        for remedy in await self._actor.remedies.remote(key):
            self.preload(key, remedy)


class _PullingGate:
    """The local scout lock, plus: before the scout goes out, adopt what the run knows."""

    __slots__ = ("_book", "_key", "_lock")

    def __init__(self, lock: asyncio.Lock, book: SharedRemedyBook, key: BookKey) -> None:
        self._lock = lock
        self._book = book
        self._key = key

    async def __aenter__(self) -> None:
        await self._lock.acquire()
        try:
            await self._book.pull(self._key)
        except BaseException:
            self._lock.release()
            raise

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._lock.release()


__all__ = ["RemedyActor", "SharedRemedyBook"]
