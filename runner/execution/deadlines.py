"""Per-trial deadlines at a fixed cost of a dict write per trial.

``asyncio.timeout`` schedules and cancels a timer handle per trial (~4.4 µs here,
about a tenth of the in-process budget at 20,000 trials/s). Trials run inline in the
engine's worker tasks, so one watcher task that wakes every ``resolution_s`` and
cancels the workers whose trial is past its deadline does the same job for almost
nothing; a trial times out within ``resolution_s`` of its deadline.

A trial whose model is reached through a key's limiter starts *unarmed* and its
deadline runs from its first request (``arm``): the time it waited for its turn in the
key's queue is the engine's admission at work — the queue is FIFO and bounded by
``engine.concurrency`` — not the trial being slow. Counting it made the trials at the
back of a deep queue time out with nothing sent while later ones finished (
390 of 15,093 at concurrency 1024).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any


class Deadlines:
    def __init__(self, timeout_s: float, resolution_s: float | None = None) -> None:
        self.timeout_s = timeout_s
        self.resolution_s = resolution_s if resolution_s is not None else min(0.5, timeout_s / 4)
        self._active: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._watcher: asyncio.Task[None] | None = None

    def start(self, task: asyncio.Task[Any], *, armed: bool = True) -> None:
        """The calling task begins a trial now; ``armed=False``: its deadline starts at ``arm``."""
        loop = task.get_loop()
        self._active[task] = loop.time() + self.timeout_s if armed else math.inf
        if self._watcher is None or self._watcher.done():
            self._watcher = loop.create_task(self._watch())

    def arm(self, task: asyncio.Task[Any]) -> None:
        """The trial of ``task`` sends a request now: an unarmed deadline starts (later sends change nothing)."""
        if self._active.get(task) == math.inf:
            self._active[task] = task.get_loop().time() + self.timeout_s

    def left(self, task: asyncio.Task[Any]) -> float:
        """Seconds until ``task``'s deadline (inf while unarmed, or when it has none)."""
        deadline = self._active.get(task)
        return math.inf if deadline is None else deadline - task.get_loop().time()

    def stop(self, task: asyncio.Task[Any]) -> None:
        self._active.pop(task, None)

    def claim_timeout(self, task: asyncio.Task[Any]) -> bool:
        """True if ``task`` was cancelled by this watcher alone (and that cancellation is undone).

        If anyone else cancelled the task too (a stop: SIGINT, SIGTERM, the engine ending the
        run), only the watcher's own request is withdrawn and the answer is False: the caller
        re-raises, and the stop reaches the engine unchanged instead of becoming a timeout row.
        """
        if task in self._expired:
            self._expired.discard(task)
            return task.uncancel() == 0
        return False

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while self._active or self._expired:
            await asyncio.sleep(self.resolution_s)
            now = loop.time()
            for task, deadline in list(self._active.items()):
                if now >= deadline and task not in self._expired:
                    self._expired.add(task)
                    self._active.pop(task, None)
                    task.cancel()

    async def aclose(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            try:
                await self._watcher
            except asyncio.CancelledError:
                pass
