"""The driver's dispatch loop: chunks out to worker actors, record batches back.

The grid is consumed lazily, a chunk at a time, and each worker has at most
``in_flight`` chunks outstanding — the only backpressure needed, since the driver
holds no more than ``workers × in_flight`` chunks of specs and results at once.

Fault tolerance lives here. A chunk is *accepted* at most once: its result is
handed to ``on_result`` only the first time it arrives, and only for the trial ids
the chunk was made of (each once), so the output cannot hold a duplicate whatever
Ray retries. When a worker dies (process killed, node lost), every chunk it had
outstanding fails with an actor error; those chunks go back to the front of the
queue for the other workers, and the dead worker is replaced in its slot (so its
share of the budgets is not lost) up to ``max_replacements`` times in the run.
An exception raised by trialgrid's own code inside a worker is a bug, not a lost
worker: it stops the run (what was written stays written and resumes).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cluster.worker import ChunkResult, SpecTuple, spec_tuple
from runner.core.errors import TrialgridError
from runner.core.messages import say
from runner.core.types import TrialSpec


@dataclass(frozen=True)
class Chunk:
    chunk_id: int
    specs: Sequence[SpecTuple]

    @property
    def trial_ids(self) -> list[str]:
        return [s[0] for s in self.specs]


def chunked(specs: Iterable[TrialSpec], size: int) -> Iterator[Chunk]:
    iterator = iter(specs)
    chunk_id = 0
    while batch := list(islice(iterator, size)):
        yield Chunk(chunk_id, [spec_tuple(s) for s in batch])
        chunk_id += 1


@dataclass
class DispatchStats:
    chunks: int = 0
    trials: int = 0
    errors: int = 0
    requeued_chunks: int = 0
    workers_lost: int = 0
    dropped_rows: int = 0  # rows a worker returned that were not its chunk's, or repeated
    lost: list[str] = field(default_factory=list)


class WorkersExhausted(TrialgridError):
    """Workers kept dying past the replacement budget. A ``TrialgridError`` (the tree: ``runner.core.errors``), so
    the CLI prints it as one ``error:`` line; the trials finished before it are kept, a rerun resumes."""


def _accepted_rows(chunk: Chunk, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The rows of ``batch`` that belong to ``chunk``, the first of each trial id only."""
    expected = chunk.trial_ids
    ids = batch.column(batch.schema.get_field_index("trial_id")).to_pylist()
    if len(ids) == len(expected) and set(ids) == set(expected) and len(set(ids)) == len(ids):
        return batch
    wanted, keep = set(expected), []
    for i, trial_id in enumerate(ids):
        if trial_id in wanted:
            wanted.discard(trial_id)
            keep.append(i)
    return batch.take(pa.array(keep, type=pa.int64()))


class Dispatcher:
    """Run chunks on a pool of worker actors until the grid is done."""

    def __init__(self, make_worker: Callable[[int], Any], workers: int, *, in_flight: int = 2,
                 max_replacements: int | None = None,
                 should_stop: Callable[[], bool] = lambda: False) -> None:
        if workers < 1 or in_flight < 1:
            raise ValueError("workers and in_flight must be >= 1")
        self._make_worker = make_worker
        self._in_flight = in_flight
        self._replacements_left = max_replacements if max_replacements is not None else 2 * workers
        self._should_stop = should_stop  # a spent budget: hand out no new chunk, let the outstanding ones return
        self.workers: list[Any] = [make_worker(i) for i in range(workers)]
        self._generation = [0] * workers

    def run(self, chunks: Iterator[Chunk], on_result: Callable[[Chunk, pa.RecordBatch, int, bool], None], *,
            stats: DispatchStats | None = None, on_idle: Callable[[], None] | None = None) -> DispatchStats:
        """Dispatch until every chunk is accepted (or ``should_stop``); ``stats`` is updated as it goes.

        ``on_idle`` is called each second no chunk came back (the driver's summary goes on while chunks are long).
        """
        import ray
        from ray.exceptions import ObjectLostError, RayActorError, WorkerCrashedError

        lost_errors = (RayActorError, ObjectLostError, WorkerCrashedError)
        stats = stats if stats is not None else DispatchStats()
        retry: deque[Chunk] = deque()
        accepted: set[int] = set()
        pending: dict[Any, tuple[int, int, Chunk]] = {}  # ref -> (slot, generation, chunk)
        outstanding = [0] * len(self.workers)
        exhausted = False

        def next_chunk() -> Chunk | None:
            nonlocal exhausted
            if retry:
                return retry.popleft()
            if exhausted:
                return None
            chunk = next(chunks, None)
            if chunk is None:
                exhausted = True
            return chunk

        def fill() -> None:
            if self._should_stop():
                return
            for slot, worker in enumerate(self.workers):
                while outstanding[slot] < self._in_flight:
                    chunk = next_chunk()
                    if chunk is None:
                        return
                    ref = worker.run_chunk.remote(chunk.chunk_id, chunk.specs)
                    pending[ref] = (slot, self._generation[slot], chunk)
                    outstanding[slot] += 1

        fill()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            if not ready and on_idle is not None:
                on_idle()
            for ref in ready:
                slot, generation, chunk = pending.pop(ref)
                if generation == self._generation[slot]:
                    outstanding[slot] -= 1
                try:
                    result: ChunkResult = ray.get(ref)
                except lost_errors as exc:
                    if chunk.chunk_id not in accepted:
                        retry.appendleft(chunk)
                        stats.requeued_chunks += 1
                    if generation == self._generation[slot]:
                        self._replace(slot, exc, stats, outstanding)
                    continue
                if chunk.chunk_id in accepted:
                    stats.dropped_rows += result.batch.num_rows
                    continue
                accepted.add(chunk.chunk_id)
                batch = _accepted_rows(chunk, result.batch)
                stats.dropped_rows += result.batch.num_rows - batch.num_rows
                errors = result.errors if batch.num_rows == result.batch.num_rows else _errors(batch)
                stats.chunks += 1
                stats.trials += batch.num_rows
                stats.errors += errors
                on_result(chunk, batch, errors, result.stopped)
            fill()
        return stats

    def _replace(self, slot: int, exc: BaseException, stats: DispatchStats, outstanding: list[int]) -> None:
        import ray

        stats.workers_lost += 1
        reason = f"worker {slot} lost ({type(exc).__name__})"
        stats.lost.append(reason)
        try:  # an unreachable (not dead) actor must not come back and compete with its replacement
            ray.kill(self.workers[slot], no_restart=True)
        except Exception:
            pass
        if self._replacements_left <= 0:
            raise WorkersExhausted(f"{reason}; no replacements left after {stats.workers_lost} lost workers (finished "
                                   "trials are kept: rerun the same command to resume; the Ray logs say why "
                                   "workers died)") from exc
        self._replacements_left -= 1
        self._generation[slot] += 1
        outstanding[slot] = 0
        self.workers[slot] = self._make_worker(slot)
        say(f"{reason}: its unfinished chunks were re-queued and a new worker started")  # a progress line


def _errors(batch: pa.RecordBatch) -> int:
    status = batch.column(batch.schema.get_field_index("status"))
    return int(pc.sum(pc.not_equal(status, "ok")).as_py() or 0)
