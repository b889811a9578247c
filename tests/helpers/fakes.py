"""Stand-ins for the parts of a provider a unit test does not exercise (a limiter that admits everything, a model
that gives one recorded answer)."""

from __future__ import annotations

from typing import Any

from runner.core.types import ChatRequest, ChatResponse
from runner.providers.limiter import Permit


class NoLimits:
    """A limiter that admits everything at once (a fake clock would never end a real pause)."""

    async def acquire(self, estimated_tokens: int = 0, *, first: bool = False) -> Permit:
        return Permit(None)

    async def release(self, permit: Permit, used_tokens: int | None = None, **outcome: Any) -> None:
        pass

    async def pause(self, seconds: float) -> None:
        pass


class Recorded:
    """A provider client that answers every request with one recorded response (replayed through a probe)."""

    name = "recorded"

    def __init__(self, response: ChatResponse) -> None:
        self.response = response

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return self.response

    async def aclose(self) -> None:
        return None


class Clock:
    """A clock a test moves by hand (``clock.now += 5``): pacing without waiting."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now
