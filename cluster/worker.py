"""The worker actor: runner's async engine on one chunk of the grid at a time.

Each ``TrialWorker`` builds the sweep's ``TrialRunner`` once (providers, clients,
limiters) and runs ``runner.execution.engine.run_trials`` on every chunk it is given. Several
chunks run at once on the actor's event loop, so the next chunk's trials start
while the last ones of the previous chunk are still waiting on the network; the
worker's share of the sweep's concurrency is enforced across all of them by one
set of semaphores here, not per chunk. A chunk comes back as one Arrow record batch
(``runner.output.sink.to_record_batch``): one actor call per chunk, never one per trial.
With a budget, each trial first takes a slot of the worker's ``BudgetGate``
(``cluster.spend``); once the run's spend meter says "spent", the chunk's remaining
trials are not started and the chunk comes back ``stopped``. ``stats`` gives the
driver's watch its counters (trials, in flight, limiter waits).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from cluster.limiter import apply_pushed_pause
from cluster.shares import engine_share
from cluster.spend import BudgetGate
from cluster.watch import WaitCounter
from runner.config.sweep import LoadedSweep
from runner.core.types import TrialSpec
from runner.execution.engine import run_trials
from runner.execution.run import build_trial_runner, per_model_concurrency
from runner.output.sink import to_record_batch
from runner.providers.errors import Remedy

#: a trial spec on the wire: (trial_id, model, probe, case_id, condition, run, seed); the sweep id is the worker's
SpecTuple = tuple[str, str, str, str, str, int, int, int]


def spec_tuple(spec: TrialSpec) -> SpecTuple:
    return (spec.trial_id, spec.model, spec.probe, spec.case_id, spec.condition, spec.run, spec.seed, spec.unit_seed)


@dataclass(frozen=True)
class ChunkResult:
    chunk_id: int
    batch: pa.RecordBatch
    errors: int  # rows whose status is not "ok" (for the driver's progress line)
    stopped: bool = False  # the budget was spent: some of the chunk's trials were not started (a resume runs them)


@dataclass(frozen=True)
class WorkerStats:
    """A worker's counters, for the driver's progress line (cumulative since the worker started)."""

    index: int
    pid: int
    trials: int
    in_flight: int
    limiter_waits: int
    limiter_wait_s: float


#: what ``_execute`` returns for a trial the budget did not let start (never written)
_NOT_RUN: dict[str, Any] = {"status": "not_run", "model": ""}


class TrialWorker:
    """Run chunks of trial specs; return each chunk's rows as one record batch.

    ``hooks`` (a ``cluster.shared.WorkerHooks``) builds the keyword arguments
    ``runner.execution.run.build_trial_runner`` takes for shared limits and remedies; it runs
    inside the actor, on its event loop, because those pieces hold asyncio primitives.
    """

    def __init__(self, loaded: LoadedSweep, schema: pa.Schema, index: int, workers: int,
                 hooks: Callable[[int, int], dict[str, Any]] | None = None) -> None:
        self._loaded = loaded
        self._schema = schema
        self._index = index
        self._workers = workers
        self._hooks = hooks
        engine = loaded.sweep.engine
        self._concurrency = engine_share(engine.concurrency, workers, index)
        self._model_caps = {m: engine_share(c, workers, index) for m, c in per_model_concurrency(loaded).items()}
        self._runner: Any = None
        self._providers: list[Any] = []
        self._slots: asyncio.Semaphore | None = None
        self._model_slots: dict[str, asyncio.Semaphore] = {}
        self._book: Any = None
        self._gate: BudgetGate | None = None
        self._trials = 0
        self._in_flight = 0
        self._waits = WaitCounter()
        self._cache: Any = None

    def _ensure_started(self) -> None:
        if self._runner is not None:
            return
        extra = self._hooks(self._index, self._workers) if self._hooks is not None else {}
        self._book = extra.get("book")
        self._waits = extra.pop("wait_counter", None) or WaitCounter()
        self._cache = extra.get("cache")
        spend_actor = getattr(self._hooks, "spend_actor", None)
        if spend_actor is not None:
            self._gate = BudgetGate(spend_actor, self._loaded.sweep.prices, self._concurrency)
        self._runner, self._providers = build_trial_runner(self._loaded, **extra)
        self._slots = asyncio.Semaphore(self._concurrency)
        self._model_slots = {m: asyncio.Semaphore(c) for m, c in self._model_caps.items()}

    async def _execute(self, spec: TrialSpec) -> dict[str, Any]:
        assert self._slots is not None
        model_slots = self._model_slots.get(spec.model)
        if model_slots is None:
            async with self._slots:
                return await self._gated(spec)
        async with model_slots, self._slots:
            return await self._gated(spec)

    async def _gated(self, spec: TrialSpec) -> dict[str, Any]:
        gate = self._gate
        if gate is not None and not await gate.admit():
            return _NOT_RUN
        self._in_flight += 1
        try:
            row = await self._runner(spec)
        except BaseException:
            if gate is not None:
                gate.release()
            raise
        finally:
            self._in_flight -= 1
        self._trials += 1
        if gate is not None:
            gate.finish(row)
        return row

    async def run_chunk(self, chunk_id: int, specs: Sequence[SpecTuple]) -> ChunkResult:
        self._ensure_started()
        sweep_id = self._loaded.sweep_id
        trial_specs = [TrialSpec(sweep_id, *t) for t in specs]
        rows: list[Mapping[str, Any]] = []
        gate = self._gate
        await run_trials(trial_specs, self._execute, _ListSink(rows),
                         concurrency=min(len(trial_specs), self._concurrency),
                         stop=(lambda: gate.spent) if gate is not None else None)
        if gate is not None:
            await gate.flush()  # the driver hears of this chunk's spend no later than of its rows
        if self._cache is not None:
            await self._cache.drain()  # ... and its answers are in the cache before its rows are written
        written = [r for r in rows if r is not _NOT_RUN]
        errors = sum(1 for r in written if r["status"] != "ok")
        stopped = len(written) < len(trial_specs)
        return ChunkResult(chunk_id, to_record_batch(written, self._schema), errors, stopped)

    async def stats(self) -> WorkerStats:
        """This worker's counters (the driver polls them for its progress line)."""
        return WorkerStats(self._index, os.getpid(), self._trials, self._in_flight, self._waits.waits,
                           self._waits.seconds)

    async def ready(self) -> int:
        """Start the worker (providers, clients) and return its process id."""
        self._ensure_started()
        return os.getpid()

    async def limiter_pause(self, key: tuple[str, str, str], seconds: float) -> None:
        """A retry-after pause another worker met, pushed by the key's ``LimiterActor``."""
        apply_pushed_pause(key, seconds)

    async def adopt_remedy(self, key: tuple[str, str, str], remedy: Remedy) -> None:
        """A remedy another worker learned, pushed by the ``RemedyActor``."""
        if self._book is not None:
            self._book.preload(tuple(key), remedy)

    async def aclose(self) -> None:
        if self._runner is not None:
            await self._runner.aclose()
        for provider in self._providers:
            await provider.aclose()
        self._runner = None


class _ListSink:
    """The engine's ``RowSink`` for one chunk: rows stay in memory until the chunk is done."""

    __slots__ = ("append",)

    def __init__(self, rows: list[Mapping[str, Any]]) -> None:
        self.append = rows.append
