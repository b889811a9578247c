"""The asyncio engine: many trials in flight, bounded overall and per model.

It knows trial specs, an ``execute`` coroutine that turns a spec into a row, and a
sink that takes rows. It knows nothing about probes, providers or wire formats — the
same engine runs in-process and inside each Ray worker.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

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
    limits = {m: asyncio.Semaphore(n) for m, n in (per_model or {}).items()}
    pending_progress = [0, 0]

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

    async def worker() -> None:
        since_yield = 0
        for spec in iterator:
            if stop is not None and stop():
                halt()  # the spec just taken stays unwritten: a resume runs it
                break
            limit = limits.get(spec.model)
            if limit is None:
                row = await execute(spec)
            else:
                async with limit:
                    row = await execute(spec)
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
            since_yield += 1
            if since_yield >= _YIELD_EVERY:
                since_yield = 0
                await asyncio.sleep(0)

    workers.extend(asyncio.ensure_future(worker()) for _ in range(max(1, concurrency)))
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], _GC_THRESHOLD), *thresholds[1:])
    try:
        # not ``gather``: a worker the stop cancelled is not the run being cancelled; a worker's own exception (a bug)
        # ends the run at once, the others cancelled below
        finished, _ = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        for w in finished:
            error = None if w.cancelled() else w.exception()
            if error is not None:
                raise error
    finally:
        for w in workers:
            w.cancel()
        # let them unwind (no trial of theirs is written) before the caller closes the providers they use
        await asyncio.gather(*workers, return_exceptions=True)
        gc.set_threshold(*thresholds)
        report(force=True)
    return stats
