"""Attempts and latency count what was sent, also when a deadline cancels the call in flight."""

from __future__ import annotations

import asyncio

import httpx

from runner.core.types import ChatRequest, ChatResponse, Message
from runner.providers import ErrorKind, ProviderError
from runner.providers.base import Agent
from runner.providers.classify import classify_http, is_context_overflow
from runner.providers.limiter import LocalLimiter
from runner.providers.managed import ManagedProvider
from runner.providers.remedies import RemedyBook
from runner.providers.settings import Limits, RetryPolicy


class _Slow:
    """Fails the first request as transient after a moment, then hangs (a server busy with other work)."""

    name = "slow"

    def __init__(self) -> None:
        self.sent = 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.sent += 1
        await asyncio.sleep(0.05)
        if self.sent == 1:
            raise ProviderError(ErrorKind.TRANSIENT, "HTTP 503")
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        return None


def test_a_call_cancelled_in_flight_counts_its_requests_and_time() -> None:
    async def go() -> tuple[Agent, _Slow]:
        inner = _Slow()
        managed = ManagedProvider(inner, endpoint="x", limiter=LocalLimiter(Limits()), book=RemedyBook(),
                                  policy=RetryPolicy(max_attempts=3, backoff_base_s=0.01, backoff_max_s=0.01))
        agent = Agent(managed, "m", {}, 1)
        task = asyncio.create_task(agent.chat([Message("user", "hi")]))
        await asyncio.sleep(0.3)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return agent, inner

    agent, inner = asyncio.run(go())
    assert inner.sent == 2 and agent.attempts == 2  # the failed request and the one cut off
    assert agent.latency_s >= 0.2


def test_context_length_overflow_is_its_own_fatal_kind_not_a_rejected_param() -> None:
    body = "This model's maximum context length is 2048 tokens. However, your messages resulted in 2311 tokens."
    exc = classify_http(400, httpx.Headers(), body, param="messages", code="context_length_exceeded")
    assert exc.kind is ErrorKind.CONTEXT_LENGTH and not exc.kind.retryable
    assert "longer than the model's context" in exc.message
    assert is_context_overflow("Requested tokens (5000) exceed context window of 4096", None)
    assert classify_http(400, httpx.Headers(), "Unsupported parameter: 'temperature'", param="temperature").kind \
        is ErrorKind.REJECTED_PARAM
