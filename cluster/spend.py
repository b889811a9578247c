"""The budget across a Ray cluster: one spend meter actor, and each worker's gate in front of it.

A single-node run stops starting trials once its ``CostMeter`` (``runner.execution.budget``)
is spent and cancels the trials in flight (they run on resume); what may be billed past
the budget is at most one engine window (``engine.concurrency`` trials). On Ray the spend happens in many processes, so:

- ``SpendMeterActor`` (one per run, on the driver's node) holds the run's spend: what
  the output already held when the session started (a resume) plus every worker's
  reports. It says when the budget is spent, with the single-node meter's words.
- ``BudgetGate`` (one per worker) admits a trial only while the worker holds fewer than
  its concurrency share of *unreported* trials: a trial takes a slot when it starts and
  gives it back only once its cost has reached the meter (reports go in batches, in
  the background, or at once when the slots run out). So at any moment the meter knows
  every trial of the run but at most ``engine.concurrency`` ones — the cluster's
  overshoot bound is the single-node one: one engine window of trials.

Once a report comes back "spent", the worker starts nothing more and its engine cancels the
trials in flight (unwritten, as single-node); the driver stops
handing out chunks (``ChunkResult.stopped``) and the session ends ``stopped_budget``.
Resuming with a raised budget starts a new meter from the output's spend, as single-node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.config.cost import PER_MILLION, Budget, ModelPrice
from runner.execution.budget import CostMeter


class _NoSink:
    def append(self, row: Mapping[str, Any]) -> None:
        return None


@dataclass(frozen=True)
class SpendState:
    usd: float
    tokens: int
    exhausted: bool
    reason: str


class SpendMeterActor:
    """The run's spend, fed by every worker's finished trials (a Ray actor; calls are serialised)."""

    def __init__(self, prices: Mapping[str, ModelPrice], budget: Budget, usd: float, tokens: int) -> None:
        self._meter = CostMeter(_NoSink(), prices, budget, usd, tokens)
        self.reports = 0

    def report(self, usd: float, tokens: int) -> bool:
        """Add a worker's finished trials' spend; return whether the budget is spent."""
        self._meter.usd += usd
        self._meter.tokens += tokens
        self.reports += 1
        return self._meter.exhausted()

    def state(self) -> SpendState:
        m = self._meter
        return SpendState(m.usd, m.tokens, m.exhausted(), m.reason())


class BudgetGate:
    """A worker's admission to start trials under the shared budget (lives on the worker's event loop).

    ``capacity`` is the worker's concurrency share: the most trials whose cost the
    meter may not know yet. ``flush_every`` finished trials trigger a background report.
    """

    def __init__(self, actor: Any, prices: Mapping[str, ModelPrice], capacity: int,
                 flush_every: int | None = None) -> None:
        self._actor = actor
        self._rates = {m: (p.input / PER_MILLION, p.output / PER_MILLION) for m, p in prices.items()}
        self.capacity = max(1, capacity)
        self._flush_every = flush_every or max(1, self.capacity // 4)
        self.held = 0  # started, cost not yet reported
        self._finished = 0  # finished, cost not yet reported
        self._usd = 0.0
        self._tokens = 0
        self.spent = False
        self._flushing: asyncio.Task[None] | None = None
        self._freed = asyncio.Event()

    async def admit(self) -> bool:
        """Take a slot for a new trial; False once the budget is spent (start nothing more)."""
        while not self.spent:
            if self.held < self.capacity:
                self.held += 1
                return True
            self._freed.clear()
            if self._finished:
                await self.flush()
            else:  # every slot is a trial still running: wait for one to finish and report
                await self._freed.wait()
        return False

    def finish(self, row: Mapping[str, Any]) -> None:
        """A trial admitted by ``admit`` ended with ``row``: its cost waits for the next report."""
        i, o = row.get("input_tokens") or 0, row.get("output_tokens") or 0
        self._tokens += i + o
        rate = self._rates.get(row.get("model", ""))
        if rate is not None:
            self._usd += i * rate[0] + o * rate[1]
        self._finished += 1
        self._freed.set()
        if self._finished >= self._flush_every and self._flushing is None:
            self._flushing = asyncio.ensure_future(self._flush())

    def release(self) -> None:
        """A trial admitted by ``admit`` produced no row (it was not run): give its slot back."""
        self.held -= 1
        self._freed.set()

    async def flush(self) -> None:
        """Report every finished trial's cost now (waits for a report already on its way)."""
        while self._flushing is not None:
            await asyncio.shield(self._flushing)
        if self._finished:
            self._flushing = asyncio.ensure_future(self._flush())
            await asyncio.shield(self._flushing)

    async def _flush(self) -> None:
        try:
            n, usd, tokens = self._finished, self._usd, self._tokens
            self._finished, self._usd, self._tokens = 0, 0.0, 0
            if n:
                exhausted = await self._actor.report.remote(usd, tokens)
                self.held -= n
                self.spent = self.spent or bool(exhausted)
                self._freed.set()
        finally:
            self._flushing = None
