"""The budget gate's bound without Ray: the meter never misses more than ``capacity`` trials.

``BudgetGate`` talks to the spend meter through ``actor.report.remote(...)``, awaited;
here that is a plain object in the same event loop, so the invariant behind the
cluster's overshoot bound (one engine window) is checked trial by trial.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from cluster.records import WatchRecord, WorkerWatch
from cluster.spend import BudgetGate, SpendMeterActor
from cluster.watch import output_summary, summary_line
from runner.config.cost import Budget, ModelPrice

PRICES = {"m": ModelPrice(input=1.0, output=1.0)}


class _Remote:
    def __init__(self, meter: SpendMeterActor) -> None:
        self.meter = meter

    def remote(self, usd: float, tokens: int) -> Any:
        async def call() -> bool:
            await asyncio.sleep(random.random() / 1000)  # a round trip
            return self.meter.report(usd, tokens)
        return call()


class _Actor:
    def __init__(self, meter: SpendMeterActor) -> None:
        self.report = _Remote(meter)


def test_the_meter_misses_at_most_capacity_trials_and_the_gate_closes_when_spent() -> None:
    random.seed(7)
    meter = SpendMeterActor(PRICES, Budget(tokens=10_000), 0.0, 0)
    capacity = 8
    gate = BudgetGate(_Actor(meter), PRICES, capacity)
    finished = [0]
    started = [0]
    worst = [0]

    async def trial() -> None:
        if not await gate.admit():
            return
        started[0] += 1
        await asyncio.sleep(random.random() / 500)
        gate.finish({"model": "m", "input_tokens": 60, "output_tokens": 40})
        finished[0] += 1

    async def run() -> None:
        workers = [asyncio.ensure_future(loop_trials()) for _ in range(capacity)]
        await asyncio.gather(*workers)
        await gate.flush()

    async def loop_trials() -> None:
        while not gate.spent:
            await trial()
            known = meter.state().tokens // 100
            worst[0] = max(worst[0], started[0] - known)

    asyncio.run(run())
    state = meter.state()
    assert state.exhausted and gate.spent
    assert worst[0] <= capacity  # the meter never missed more than one window of trials
    assert state.tokens == finished[0] * 100  # every finished trial reached the meter once
    assert 10_000 <= state.tokens <= 10_000 + capacity * 100  # overshoot: at most one window
    assert "budget of 10,000 tokens reached" in state.reason


def test_summary_line_and_output_summary(tmp_path) -> None:  # type: ignore[no-untyped-def]
    record = WatchRecord(at="2026-01-01T00:00:00Z", done=50, total=100, trials_per_s=12.0, requeued_chunks=1,
                         workers_lost=1, spent_usd=0.5, spent_tokens=1234, budget="$1.00", cache_hits=7,
                         workers=[WorkerWatch(index=0, trials=30, trials_per_s=7.0, in_flight=3, limiter_waits=2),
                                  WorkerWatch(index=1, trials=20, trials_per_s=5.0, in_flight=4, limiter_waits=0)])
    line = summary_line(record)
    for piece in ("50/100 trials", "12 trials/s", "w0:7/s w1:5/s", "7 in flight", "2 limiter waits",
                  "1 chunks re-queued (1 workers replaced)", "spent $0.5000 / 1,234 tokens of $1.00", "7 cached"):
        assert piece in line, (piece, line)
    assert "no manifest yet" in output_summary(tmp_path)
