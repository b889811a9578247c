"""What a model call had sent when it ended without an answer (a deadline's cancellation).

A trial's deadline cancels the task mid-call; the retry loop then never returns, so
the ``attempts`` and latency it would have reported are lost and the row read
``attempts = 0, latency_ms = 0`` although requests went out. The loop
ticks a per-call ``SendLog`` here as it sends, and ``Agent.chat`` reads it when a
call ends by cancellation: the row counts every request sent, the one cut off
included, and the time they were out.

``on_send`` hears each request of the call as it goes out: the trial's deadline starts
at its first send (``runner.execution.deadlines``), not while the trial waits its turn
in the key's queue. ``time_left`` says how long the trial's deadline still allows: the
retry loop does not sleep out a server's long retry-after that the deadline would cut
short, it ends the call ``rate_limited`` (retryable) at once instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(slots=True)
class SendLog:
    """Requests sent for one call so far, and the time they spent out (the open one from ``since``)."""

    sent: int = 0
    busy_s: float = 0.0
    since: float | None = None
    on_send: Callable[[], None] | None = None
    #: seconds until the trial's deadline (inf: no deadline, or not armed yet)
    time_left: Callable[[], float] | None = None

    def elapsed_s(self) -> float:
        return self.busy_s + (time.monotonic() - self.since if self.since is not None else 0.0)


CURRENT: ContextVar[SendLog | None] = ContextVar("trialgrid_send_log", default=None)


def sending() -> None:
    """A request of the current call goes out now."""
    log = CURRENT.get()
    if log is not None:
        log.sent += 1
        log.since = time.monotonic()
        if log.on_send is not None:
            log.on_send()


def time_left() -> float:
    """Seconds the current call's trial may still run (inf when nothing says)."""
    log = CURRENT.get()
    if log is None or log.time_left is None:
        return math.inf
    return log.time_left()


def returned() -> None:
    """The request sent last has answered (or failed)."""
    log = CURRENT.get()
    if log is not None and log.since is not None:
        log.busy_s += time.monotonic() - log.since
        log.since = None
