"""The queue in front of a key's limiter: FIFO, except that a call's re-sends go before first sends.

At a learned pace of one request a second with 48 trials in flight, a request waits
about 48 s for its turn. If a retried request (after a 5xx or a 429) queued at the
back again, a trial needing three attempts would wait three times that, and run into
its own deadline (``engine.timeout_s``, 120 s by default) although the run as a
whole is well within the limit. A re-send has already waited its turn once, so it
takes the front lane: every trial then waits for the queue about once.

Only the holder of the turn may take a permit (it sleeps on the pace while it holds
it), so the order of the lanes is the order of the sends.

Leaving the queue never raises in place of what made the waiter leave: a stop's
cancellation must reach the engine as a cancellation, or the trial becomes an
``internal`` row and its worker takes the next spec.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Turnstile:
    """``async with turnstile.turn(first=...)``: one holder at a time; the ``first`` lane is served before the rest."""

    def __init__(self) -> None:
        self._held = False
        self._front: deque[asyncio.Future[None]] = deque()
        self._back: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._front) + len(self._back)

    @asynccontextmanager
    async def turn(self, *, first: bool = False) -> AsyncIterator[None]:
        await self._enter(first)
        try:
            yield
        finally:
            self._pass_on()

    async def _enter(self, first: bool) -> None:
        if not self._held and not self._front and not self._back:
            self._held = True
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane = self._front if first else self._back
        lane.append(future)
        try:
            await future
        except BaseException:
            # whatever ends the wait (a cancellation, above all) leaves unchanged: only the queue is tidied
            if future.done() and not future.cancelled():
                self._pass_on()  # the turn was handed to us as we were cancelled: hand it on
            elif future in lane:
                # a ``_pass_on`` may already have popped (and skipped) this cancelled future: then it is not
                # in the lane, and removing it would raise ValueError in place of the cancellation
                lane.remove(future)
            raise

    def _pass_on(self) -> None:
        for lane in (self._front, self._back):
            while lane:
                future = lane.popleft()
                if not future.done():
                    future.set_result(None)  # the turn goes to this waiter; _held stays True
                    return
        self._held = False
