"""The learned pace: vendor rate-limit headers read, AIMD on 429s, paced release after a pause, time-bounded 429 retries."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from runner.core.types import ChatRequest, ChatResponse, Message, Usage
from runner.providers.errors import ErrorKind, ProviderError
from runner.providers.limiter import LocalLimiter
from runner.providers.managed import ManagedProvider
from runner.providers.pacing import BETA, PLATEAU, Pacer, RateInfo, read_rate_headers
from runner.providers.remedies import RemedyBook
from runner.providers.settings import Limits, RetryPolicy
from tests.helpers.fakes import Clock, NoLimits


def test_openai_headers_with_durations() -> None:
    info = read_rate_headers({"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59",
                              "x-ratelimit-reset-requests": "6m0s", "x-ratelimit-limit-tokens": "150000",
                              "x-ratelimit-remaining-tokens": "149984", "x-ratelimit-reset-tokens": "20ms"})
    assert info == RateInfo(60, 59, 360.0, 150000, 149984, 0.02)
    assert read_rate_headers({"x-ratelimit-limit-requests": "10", "x-ratelimit-reset-requests": "1s"}) == \
        RateInfo(10, None, 1.0)


def test_anthropic_headers_with_rfc3339_resets() -> None:
    now = datetime(2026, 12, 1, 1, 0, 0, tzinfo=UTC)
    reset = (now + timedelta(seconds=2.5)).isoformat().replace("+00:00", "Z")
    info = read_rate_headers({"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
                              "anthropic-ratelimit-requests-reset": reset,
                              "anthropic-ratelimit-input-tokens-limit": "40000",
                              "anthropic-ratelimit-output-tokens-limit": "8000",
                              "anthropic-ratelimit-output-tokens-remaining": "7000",
                              "anthropic-ratelimit-output-tokens-reset": reset}, now=now.timestamp())
    assert info is not None
    assert (info.limit_requests, info.remaining_requests) == (50, 0)
    assert info.reset_requests_s == pytest.approx(2.5)
    assert (info.limit_tokens, info.remaining_tokens) == (8000, 7000)  # the tightest token budget
    assert read_rate_headers({"content-type": "application/json"}) is None


def test_headers_set_the_pace_a_little_under_the_limit() -> None:
    pacer = Pacer(clock=Clock())
    assert pacer.interval() == 0  # nothing learned: not paced
    pacer.observe(100.0, info=RateInfo(60, 59, 1.0), rate_limited=False)
    assert 1.0 < pacer.interval() < 1.05  # 60 per minute, with a jitter margin


def test_a_herd_of_429s_cuts_once_then_the_rate_climbs_back() -> None:
    clock = Clock()
    pacer = Pacer(clock=clock)
    for i in range(8):  # eight sent together (a herd): the server let one through
        clock.now = 100.05 + i / 100
        pacer.observe(100 + i / 1000, info=None, rate_limited=i > 0, retry_after_s=1.0)
    assert pacer.cuts == 1 and pacer.rate_limited == 7
    assert pacer.ceiling is not None and pacer.rate == pytest.approx(BETA * pacer.ceiling)
    assert pacer.ceiling <= 2.0  # what the server admitted, not the 8/s the client sent
    ceiling = pacer.ceiling
    for _ in range(5):  # answers sent after the cut grow the rate back to the plateau...
        clock.now += 1.5
        pacer.observe(clock.now - 0.1, info=None, rate_limited=False)
    assert pacer.rate == pytest.approx(PLATEAU * ceiling, rel=0.01)
    clock.now += 1.5
    # ...one 429 under the rate that failed, among answers, is a blip: it cuts nothing...
    assert not pacer.observe(clock.now - 0.1, info=None, rate_limited=True, retry_after_s=1.0)
    assert pacer.cuts == 1 and pacer.isolated == 3  # (the herd's first two were too, before it was a burst)
    for _ in range(4):  # ...and a burst of them (5 of the 10 answers since the cut: not the background) cuts again
        clock.now += 0.1
        evidence = pacer.observe(clock.now - 0.1, info=None, rate_limited=True, retry_after_s=1.0)
    assert evidence and pacer.cuts == 2 and pacer.rate < PLATEAU * ceiling


def test_after_a_pause_waiting_requests_go_one_at_a_time_at_the_pace() -> None:
    clock = Clock()
    limiter = LocalLimiter(Limits(), clock=clock)
    for permit in [limiter._admit(clock.now, 0) for _ in range(3)]:  # a herd of three 429s: a burst
        asyncio.run(limiter.release(permit, None, rate_limited=True, retry_after_s=1.0))
    asyncio.run(limiter.pause(1.0))
    interval = limiter._pace()[0]
    assert interval > 0
    sends = []
    for _ in range(4):  # the head of the queue, each time it wakes
        clock.now += max(0.0, limiter._wait(clock.now, 0))
        sends.append(clock.now)
        limiter._admit(clock.now, 0)
    assert sends[0] == pytest.approx(101.0)  # the first at the pause's end...
    gaps = [b - a for a, b in itertools.pairwise(sends)]
    assert all(g == pytest.approx(interval) for g in gaps)  # ...the rest at the pace, never together


def test_configured_rpm_stays_an_upper_bound() -> None:
    clock = Clock()
    limiter = LocalLimiter(Limits(rpm=30), clock=clock)
    permit = limiter._admit(clock.now, 0)
    asyncio.run(limiter.release(permit, None, info=RateInfo(6000, 5999, 0.01)))  # the server allows far more
    assert limiter._pace()[0] == pytest.approx(limiter._span / 30)


class _Limited:
    """A provider that is rate limited ``n`` times, then answers."""

    name = "fake"

    def __init__(self, n: int, retry_after_s: float | None = 1.0) -> None:
        self.n, self.calls, self.retry_after_s = n, 0, retry_after_s

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        if self.calls <= self.n:
            raise ProviderError(ErrorKind.RATE_LIMITED, "HTTP 429: slow down", retry_after_s=self.retry_after_s,
                                status_code=429)
        return ChatResponse("ok", usage=Usage(1, 1))

    async def aclose(self) -> None:
        pass



def _managed(inner: _Limited, policy: RetryPolicy, clock: Clock) -> ManagedProvider:
    async def sleep(s: float) -> None:
        clock.now += s

    return ManagedProvider(inner, endpoint="x", limiter=NoLimits(), book=RemedyBook(),
                           policy=policy, strict_params=True, sleep=sleep, clock=clock)


def test_429s_do_not_spend_the_attempts_transient_errors_use() -> None:
    clock = Clock()
    inner = _Limited(10)
    response = asyncio.run(_managed(inner, RetryPolicy(max_attempts=2), clock).complete(
        ChatRequest("m", (Message("user", "hi"),))))
    assert response.attempts == 11 and response.text == "ok"


def test_429_retries_end_at_max_wait() -> None:
    clock = Clock()
    inner = _Limited(1000, retry_after_s=2.0)
    with pytest.raises(ProviderError) as info:
        asyncio.run(_managed(inner, RetryPolicy(max_wait_s=30), clock).complete(
            ChatRequest("m", (Message("user", "hi"),))))
    error = info.value
    assert error.kind is ErrorKind.RATE_LIMITED and "retry.max_wait_s is 30 s" in error.message
    assert error.attempts == inner.calls == 16  # 15 waits of 2 s fit in 30 s
    with pytest.raises(ValidationError):
        RetryPolicy(max_wait_s=0)


def test_turnstile_serves_re_sends_before_first_sends_and_survives_cancellation() -> None:
    from runner.providers.turnstile import Turnstile

    async def go() -> list[str]:
        turnstile, order = Turnstile(), list[str]()
        gate = asyncio.Event()

        async def holder() -> None:
            async with turnstile.turn():
                await gate.wait()

        async def sender(name: str, first: bool) -> None:
            async with turnstile.turn(first=first):
                order.append(name)

        tasks = [asyncio.create_task(holder())]
        await asyncio.sleep(0)
        for name, first in [("new-1", False), ("retry-1", True), ("new-2", False), ("gone", True), ("retry-2", True)]:
            tasks.append(asyncio.create_task(sender(name, first)))
            await asyncio.sleep(0)
        tasks[4].cancel()  # "gone" gives up while waiting
        await asyncio.sleep(0)
        assert turnstile.waiting == 4
        gate.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        async with turnstile.turn():  # and the turnstile is free again
            order.append("after")
        return order

    assert asyncio.run(go()) == ["retry-1", "retry-2", "new-1", "new-2", "after"]


def test_a_cold_start_herd_learns_the_limit_from_the_answers_that_come_after_its_429s(serve) -> None:  # type: ignore[no-untyped-def]
    """Without rate headers, 32 requests go at once into a bucket of 20 (1,200 rpm): the 429s come back before the
    20 admitted answers (those take the server's latency), so the first cut saw almost none of them. The answers
    arriving after it are admissions of the same span and raise the cut's estimate: the pace is learned near the
    limit, not at about one request a second whatever the limit (the old cut, won back over minutes)."""
    from runner.core.types import ToolSpec
    from runner.providers.openai_wire import OpenAIProvider
    from runner.providers.settings import Connection

    rpm, wanted = 1200, 100
    limit = rpm / 60
    server = serve(rpm=rpm, rpm_mode="bucket", rate_headers=False, latency_ms=20)
    tool = ToolSpec("fetch_invoices", "Fetch invoices for a month.",
                    {"type": "object", "properties": {"month": {"type": "string"}}, "required": ["month"]})
    limiter = LocalLimiter(Limits())

    async def go() -> None:
        inner = OpenAIProvider(Connection("openai", server.base_url, None))
        managed = ManagedProvider(inner, endpoint=server.base_url, limiter=limiter, book=RemedyBook(),
                                  policy=RetryPolicy(max_attempts=3, backoff_base_s=0.01, backoff_max_s=0.05))
        todo = iter(range(wanted))

        async def worker() -> None:
            for i in todo:
                await managed.complete(ChatRequest("typical", (Message("user", f"Invoices, batch {i}."),), (tool,),
                                                   {}, i))

        try:
            # a bound, not a measurement: at the limit this takes 4 s; at the old one-a-second pace, 80
            await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(32))), 30)
        except TimeoutError:
            pass
        finally:
            await managed.aclose()

    asyncio.run(go())
    assert limiter.pacer is not None and limiter.pacer.ceiling is not None
    assert limiter.pacer.ceiling >= 0.8 * limit, limiter.pacer.snapshot()
    log = server.stats(with_log=True)["log"]
    admitted = sorted(t for t, tag in zip(log["t"], log["tag"], strict=True) if tag != "ratelimit")
    assert len(admitted) == wanted, f"{len(admitted)} of {wanted} requests answered within the bound"
    # after the bucket's first burst, the server admitted requests at about its limit (its own clock)
    paced = admitted[20:]
    assert (len(paced) - 1) / (paced[-1] - paced[0]) >= 0.5 * limit
