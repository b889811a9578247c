"""The shared limiter actor learns one pace from every worker's answers (in-process: no Ray needed for the logic)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from cluster.limiter import LeasedLimiter, LimiterActor
from runner.providers.pacing import RateInfo
from runner.providers.settings import Limits

KEY = ("openai", "http://127.0.0.1:1/v1", "")


class _Method:
    """``actor.method.remote(...)`` as Ray spells it, run on this event loop."""

    def __init__(self, fn: Callable[..., Awaitable[Any]]) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> asyncio.Future[Any]:
        return asyncio.ensure_future(self.fn(*args))


class _Handle:
    def __init__(self, actor: LimiterActor) -> None:
        for name in ("lease", "observe", "pause", "settle", "learned"):
            setattr(self, name, _Method(getattr(actor, name)))


def test_a_429_one_worker_meets_paces_every_worker() -> None:
    async def go() -> tuple[dict[str, Any], float, dict[str, Any]]:
        actor = LimiterActor(KEY, Limits())
        handle = _Handle(actor)
        a = LeasedLimiter(handle, KEY, Limits(), 0, 2)
        b = LeasedLimiter(handle, KEY, Limits(), 1, 2)
        permits = [await a.acquire() for _ in range(3)] + [await b.acquire() for _ in range(3)]
        for p in permits[3:]:
            await b.release(p, 10)
        for p in permits[:3]:  # worker a meets a burst of 429s (one alone would be a blip: pacing's burst rule)
            await a.release(p, None, rate_limited=True, retry_after_s=1.0)
        await asyncio.sleep(0.01)  # the observation travels to the actor
        learned = await actor.learned()
        interval = actor._limiter._pace()[0]
        # worker b's answers with headers reach the actor with its next lease
        permit = await b.acquire()
        await b.release(permit, 10, info=RateInfo(limit_requests=30))
        await b.acquire()
        return learned, interval, await actor.learned()

    learned, interval, later = asyncio.run(go())
    assert learned["cuts"] == 1 and learned["rate"] is not None and interval > 0  # both workers now wait on it
    assert later["header_rate"] is not None and abs(later["header_rate"] - 0.98 * 30 / 60) < 1e-9
