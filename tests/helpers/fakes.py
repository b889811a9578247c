"""Stand-ins for the parts of a provider a unit test does not exercise (a limiter that admits everything)."""

from __future__ import annotations

from typing import Any

from runner.providers.limiter import Permit


class NoLimits:
    """A limiter that admits everything at once (a fake clock would never end a real pause)."""

    async def acquire(self, estimated_tokens: int = 0, *, first: bool = False) -> Permit:
        return Permit(None)

    async def release(self, permit: Permit, used_tokens: int | None = None, **outcome: Any) -> None:
        pass

    async def pause(self, seconds: float) -> None:
        pass
