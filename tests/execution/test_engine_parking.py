"""A trial that only waits lends its place: parking (``runner.core.parking``) in the engine."""

from __future__ import annotations

import asyncio
from typing import Any

from runner.core.parking import parked
from runner.core.types import TrialSpec
from runner.execution.engine import _Places, run_trials


def _spec(i: int, model: str = "m") -> TrialSpec:
    return TrialSpec("s", f"t{i}", model, "p", f"c{i}", "x", i, i, i)


class _Rows:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def append(self, row: Any) -> None:
        self.rows.append(dict(row))


def test_a_parked_trial_lends_its_place_and_the_bounds_hold_for_trials_that_send() -> None:
    """Concurrency 2 and model limit 2: the first two trials park for a while; the others run meanwhile, never
    more than two at once outside a park, and every trial writes one row."""
    running = [0, 0]  # now, most at once (trials not parked)

    async def execute(spec: TrialSpec) -> dict[str, Any]:
        running[0] += 1
        running[1] = max(running[1], running[0])
        await asyncio.sleep(0.001)
        if spec.run < 2:
            running[0] -= 1
            with parked():
                await asyncio.sleep(0.2)
            running[0] += 1
        running[0] -= 1
        return {"trial_id": spec.trial_id, "status": "ok", "finished": asyncio.get_running_loop().time()}

    rows = _Rows()

    async def go() -> None:
        await run_trials((_spec(i) for i in range(40)), execute, rows, concurrency=2, per_model={"m": 2})

    asyncio.run(go())
    assert sorted(r["trial_id"] for r in rows.rows) == sorted(f"t{i}" for i in range(40))
    assert running[1] <= 3  # a woken trial takes its place back at once; the lent one is repaid as trials end
    # the 38 others did not wait for the two parked ones: every one was done before either woke
    finished = {r["trial_id"]: r["finished"] for r in rows.rows}
    assert max(t for trial, t in finished.items() if trial not in ("t0", "t1")) < min(finished["t0"], finished["t1"])


def test_a_woken_trial_takes_its_model_place_back_without_waiting() -> None:
    """The scout of a request shape parks while trials waiting for it hold every place: it must not wait for one
    (it did: every trial of the model stopped)."""
    places = _Places(1)

    async def go() -> None:
        await places.take()
        places.give()  # parked
        await places.take()  # another trial takes the place, and waits on the parked one
        places.reclaim()  # the parked one is back at once, past the bound
        assert places.free == -1
        places.give()  # the other ends: the debt is repaid first
        assert places.free == 0
        places.give()  # the woken one ends
        assert places.free == 1

    asyncio.run(go())
