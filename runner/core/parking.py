"""A trial that only waits gives its place to one that can send: parking.

The engine runs ``concurrency`` trials at a time. A trial waiting out a server's
Retry-After (or a retry's backoff) holds one of those places while sending nothing:
at 8% random 429s with ``Retry-After: 1``, a tenth of a second of work per trial came
with a second of waiting for one trial in twelve, and the waiting trials filled most
places (by Little's law, throughput fell to about 0.4 of a clean run at concurrency
128). So a wait is *parked*: the provider's retry loop wraps it in ``parked()``, and
the engine lends the place (and the model's place) to another trial until the
parked one wakes, then takes it back.

The provider layer knows nothing of the engine: ``parked()`` calls whatever hook the
engine set for the running trial (a context variable), and does nothing without one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Protocol

__all__ = ["Parking", "parked", "set_parking"]


class Parking(Protocol):
    """What the engine does when the running trial parks and wakes."""

    def park(self) -> None: ...

    def unpark(self) -> None: ...


_HOOK: ContextVar[Parking | None] = ContextVar("trialgrid_parking", default=None)


def set_parking(hook: Parking | None) -> Token[Parking | None]:
    """Set the hook for the trials run from this context on (the engine does, per worker)."""
    return _HOOK.set(hook)


@contextmanager
def parked() -> Iterator[None]:
    """Around a wait that sends nothing: the trial's place goes to another trial meanwhile."""
    hook = _HOOK.get()
    if hook is None:
        yield
        return
    hook.park()
    try:
        yield
    finally:
        hook.unpark()
