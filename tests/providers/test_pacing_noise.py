"""Pacing tells a rate limit from noise.

A 429 whose own rate-limit headers say requests remain in the window is a vendor's
overload blip, not the limit. Cutting the learned pace for every such 429 collapsed it
(27 to 3.5 requests a second at 8% random 429s), and pausing the key for each one's
Retry-After held every trial back. Such a 429 now cuts nothing, pauses nothing, and is
retried as a transient error; a 429 whose headers say the budget is spent (or that has
none) still teaches the pace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runner.core.types import ChatRequest, Message
from runner.providers.pacing import Pacer, RateInfo
from runner.providers.pool import ProviderPool
from runner.providers.settings import Connection, RetryPolicy
from runner.sim.serve import ServerThread
from tests.helpers.fakes import Clock


def test_a_429_with_budget_left_in_its_headers_cuts_nothing_and_a_burst_without_does() -> None:
    clock = Clock()
    pacer = Pacer(clock=clock)
    pacer.observe(99.9, info=RateInfo(600, 412, 1.0), rate_limited=True, retry_after_s=1.0)
    assert pacer.cuts == 0 and pacer.rate is None and pacer.rate_limited == 0
    clock.now += 1
    pacer.observe(clock.now - 0.1, info=RateInfo(600, 0, 1.0), rate_limited=True, retry_after_s=1.0)  # budget spent
    assert pacer.cuts == 1 and pacer.rate is not None
    clock.now += 5
    # no headers: one 429 is a blip (it neither cuts nor, in the call, pauses the key)...
    assert not pacer.observe(clock.now - 0.1, info=None, rate_limited=True, retry_after_s=1.0)
    assert pacer.cuts == 1 and pacer.isolated == 1
    for _ in range(2):  # ...a burst of them is the limit
        clock.now += 0.1
        pacer.observe(clock.now - 0.1, info=None, rate_limited=True, retry_after_s=1.0)
    assert pacer.cuts == 2


def test_random_429s_under_the_servers_limit_neither_cut_the_pace_nor_pause_the_key(
        serve: Callable[..., ServerThread]) -> None:
    # the server's own limit is far away (its headers say so on every answer), yet 30% of answers are 429
    server = serve(rpm=600_000, rpm_mode="bucket", faults={"429": 0.3}, fault_seed=5, fault_retry_after_s=0.05)
    pool = ProviderPool()
    provider = pool.provider("openai", Connection("openai", base_url=server.base_url), limits=None,
                             retry=RetryPolicy(max_attempts=20, backoff_base_s=0.01, backoff_max_s=0.05),
                             max_connections=8)
    (limiter,) = pool.limiters.values()

    async def go() -> None:
        async def one(i: int) -> None:
            request = ChatRequest("careful", (Message("user", f"look up order {i}"),), seed=i)
            await provider.complete(request)

        try:
            await asyncio.gather(*(one(i) for i in range(60)))
        finally:
            await pool.aclose()

    asyncio.run(go())
    assert server.stats()["by_tag"].get("fault:429", 0) >= 10  # the blips were met, and each retried to an answer
    pacer = limiter.pacer
    assert pacer is not None and pacer.cuts == 0 and pacer.rate is None
    assert limiter.paused_until == 0.0


def test_isolated_429s_without_headers_are_retried_alone_and_a_burst_of_them_still_teaches_the_pace(
        serve: Callable[..., ServerThread]) -> None:
    # 5% random 429s with no rate-limit headers at all (seed 2: 11 in the first 160 draws, never 3 or more making a
    # fifth of the answers so far): each is a blip, retried after its retry-after without pausing the key or
    # cutting the pace (cutting and pausing for each held the rate at 0.74 of the no-429 rate)
    server = serve(faults={"429": 0.05}, fault_seed=2, fault_retry_after_s=0.05, rate_headers=False)
    pool = ProviderPool()
    provider = pool.provider("openai", Connection("openai", base_url=server.base_url), limits=None,
                             retry=RetryPolicy(max_attempts=2, backoff_base_s=0.01, backoff_max_s=0.05),
                             max_connections=4)
    (limiter,) = pool.limiters.values()

    async def go(n: int) -> None:
        todo = iter(range(n))

        async def worker() -> None:
            for i in todo:
                response = await provider.complete(ChatRequest("careful", (Message("user", f"order {i}"),), seed=i))
                assert response.text or response.tool_calls

        await asyncio.gather(*(worker() for _ in range(4)))

    async def both() -> None:
        try:
            await go(120)
            pacer = limiter.pacer
            assert pacer is not None
            met = server.stats()["by_tag"].get("fault:429", 0)
            assert met >= 5 and pacer.isolated == pacer.rate_limited == met, (met, pacer.snapshot())
            assert pacer.cuts == 0 and pacer.rate is None and limiter.paused_until == 0.0
            # the incident changes: now half the answers are 429s — a burst, the limit's signature: it cuts and pauses
            server.set_faults({"429": 0.5})
            await go(20)
            assert pacer.cuts >= 1 and pacer.rate is not None and limiter.paused_until > 0.0, pacer.snapshot()
        finally:
            await pool.aclose()

    asyncio.run(both())


def test_the_burst_rules_binomial_tail_equals_scipys() -> None:
    from scipy.stats import binom

    from runner.providers.pacing import _binomial_tail

    for k, n, p in [(3, 3, 0.05), (10, 50, 0.08), (13, 50, 0.08), (5, 10, 0.06), (30, 200, 0.08), (0, 5, 0.1),
                    (1, 1, 0.25), (120, 200, 0.25)]:
        assert abs(_binomial_tail(k, n, p) - binom.sf(k - 1, n, p)) < 1e-12, (k, n, p)


def test_eight_percent_of_429s_without_headers_never_read_as_the_limit() -> None:
    """Noise at a steady rate: thousands of answers, one in twelve a 429, and the pace is never cut."""
    import random

    clock = Clock()
    pacer = Pacer(clock=clock)
    draw = random.Random(7)
    for i in range(20_000):
        clock.now = 100 + i / 1000  # 1,000 answers a second
        pacer.observe(clock.now - 0.02, info=None, rate_limited=draw.random() < 0.08, retry_after_s=1.0)
    assert pacer.cuts == 0 and pacer.rate is None and pacer.isolated == pacer.rate_limited > 1_400
