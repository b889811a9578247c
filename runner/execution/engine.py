"""The asyncio engine: many trials in flight, bounded overall and per model.

It knows trial specs, an ``execute`` coroutine that turns a spec into a row, and a
sink that takes rows. It knows nothing about probes, providers or wire formats — the
same engine runs in-process and inside each Ray worker. A trial that only waits (a
server's Retry-After, a retry's backoff) parks (``runner.core.parking``): its place,
and its model's, go to another trial until it wakes, so the bounds count trials that
can send, not trials asleep.
"""

from __future__ import annotations

import asyncio
import gc
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from runner.core.parking import set_parking
from runner.core.types import TrialSpec

Execute = Callable[[TrialSpec], Awaitable[dict[str, Any]]]


class RowSink(Protocol):
    def append(self, row: Mapping[str, Any]) -> None: ...


class Progress(Protocol):
    def advance(self, done: int, errors: int) -> None: ...


@dataclass
class EngineStats:
    done: int = 0
    errors: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    stopped: bool = False  # ``stop`` ended scheduling before the specs ran out


# The cyclic collector's first-generation threshold while trials run. Each trial allocates a few hundred
# container objects (request, response, row and its nested values) that are freed by reference counting, not
# by the collector; at the default of 700 the collector still ran every couple of trials, walking the young
# objects each time (~10% of a simulated trial). Collections still happen, every this many allocations.
_GC_THRESHOLD = 20_000

# Yield to the event loop every so often even when every await completes at once
# (the in-process sim never suspends), so timers, signals and progress still run.
_YIELD_EVERY = 512


async def run_trials(
    specs: Iterable[TrialSpec],
    execute: Execute,
    sink: RowSink,
    *,
    concurrency: int,
    per_model: Mapping[str, int] | None = None,
    progress: Progress | None = None,
    progress_every: int = 256,
    stop: Callable[[], bool] | None = None,
) -> EngineStats:
    """Run every spec through ``execute`` and append each row to ``sink``.

    ``concurrency`` workers pull from one shared iterator, so the grid is consumed
    lazily; ``per_model`` caps how many trials of one model are in flight. Rows
    arrive in completion order. ``execute`` must not raise for a trial's own failure
    (it returns an error row); an exception escaping it is a bug and stops the run.
    ``stop`` (e.g. a spent budget) is asked before each new trial starts and after each
    row is written: once true, no trial is started, the ones in flight are cancelled (they
    write no row, so a resume runs them, as after Ctrl-C), and ``stats.stopped`` is set.
    """
    stats = EngineStats()
    iterator = iter(specs)
    limits = {m: _Places(n) for m, n in (per_model or {}).items()}
    pending_progress = [0, 0]
    places = max(1, concurrency)
    # workers alive, and trials parked among theirs: a parked trial's place goes to a spare worker, which retires
    # at its next trial boundary once the parked trial is back (workers - parked stays at ``places``)
    census = {"workers": 0, "parked": 0}

    def report(force: bool = False) -> None:
        if progress is not None and (force or pending_progress[0] >= progress_every):
            progress.advance(pending_progress[0], pending_progress[1])
            pending_progress[0] = pending_progress[1] = 0

    workers: list[asyncio.Future[None]] = []

    def halt() -> None:
        """The stop came true: cancel every trial in flight (they stay unwritten: a resume runs them)."""
        stats.stopped = True
        me = asyncio.current_task()
        for w in workers:
            if w is not me:
                w.cancel()

    def start_worker() -> None:
        census["workers"] += 1
        workers.append(asyncio.ensure_future(worker()))

    class _Parking:
        """The running trial's hook (``runner.core.parking``): lend its places while it waits."""

        __slots__ = ("limit",)

        def __init__(self) -> None:
            self.limit: _Places | None = None

        def park(self) -> None:
            if self.limit is not None:
                self.limit.give()
            census["parked"] += 1
            if census["workers"] - census["parked"] < places:
                start_worker()

        def unpark(self) -> None:
            # back at once, even past the bound (a wait here could be on a trial that waits for this one): the
            # places lent out are repaid as the trials that took them end
            census["parked"] -= 1
            if self.limit is not None:
                self.limit.reclaim()

    async def worker() -> None:
        parking = _Parking()
        set_parking(parking)  # this worker's task and the trials it awaits
        try:
            await work(parking)
        finally:
            census["workers"] -= 1

    async def work(parking: _Parking) -> None:
        since_yield = 0
        for spec in iterator:
            if stop is not None and stop():
                halt()  # the spec just taken stays unwritten: a resume runs it
                break
            limit = parking.limit = limits.get(spec.model)
            if limit is None:
                row = await execute(spec)
            else:
                await limit.take()
                try:
                    row = await execute(spec)
                finally:
                    limit.give()
            sink.append(row)
            status = row["status"]
            stats.done += 1
            stats.by_status[status] = stats.by_status.get(status, 0) + 1
            pending_progress[0] += 1
            if status != "ok":
                stats.errors += 1
                pending_progress[1] += 1
            report()
            if stop is not None and stop():
                halt()
                break
            if census["workers"] - census["parked"] > places:
                return  # a spare whose parked trial is back: its place is taken again
            since_yield += 1
            if since_yield >= _YIELD_EVERY:
                since_yield = 0
                await asyncio.sleep(0)

    for _ in range(places):
        start_worker()
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], _GC_THRESHOLD), *thresholds[1:])
    try:
        # not ``gather``: a worker the stop cancelled is not the run being cancelled; a worker's own exception (a bug)
        # ends the run at once, the others cancelled below. Spares join the list while it is waited on.
        waited = 0
        while waited < len(workers):
            finished, _ = await asyncio.wait(workers[waited:], return_when=asyncio.FIRST_EXCEPTION)
            for w in finished:
                error = None if w.cancelled() else w.exception()
                if error is not None:
                    raise error
            while waited < len(workers) and workers[waited].done():
                waited += 1
    finally:
        for w in workers:
            w.cancel()
        # let them unwind (no trial of theirs is written) before the caller closes the providers they use
        await asyncio.gather(*workers, return_exceptions=True)
        gc.set_threshold(*thresholds)
        report(force=True)
    return stats


class _Places:
    """A model's places in flight: a semaphore that a parked trial can take back at once (``reclaim``), running
    past its bound by the places it lent; each ``give`` repays that debt before it seats a waiter."""

    __slots__ = ("_waiters", "free")

    def __init__(self, n: int) -> None:
        self.free = n
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def take(self) -> None:
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # seated as it was cancelled: the place goes on to the next
            raise

    def give(self) -> None:
        if self.free < 0:
            self.free += 1  # a debt from a reclaim
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the place passes straight to it
                return
        self.free += 1

    def reclaim(self) -> None:
        self.free -= 1
