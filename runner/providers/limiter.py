"""Per provider and API key: how many requests may be in flight, per minute, and tokens per minute.

One ``Limiter`` interface (``acquire`` a permit before each request, ``release`` it
with the tokens the response reported, ``pause`` the whole key when the server
says retry-after), so the Ray issue can back it with one shared actor while a
single process uses ``LocalLimiter``.

``LocalLimiter`` guarantees, for the requests it admits (send times, this clock):

- at most ``max_concurrent`` permits out at once;
- at most ``rpm`` sends in any window of ``window_s`` (60 s) — a sliding log of
  send times, not a token bucket, because a bucket lets a full bucket's burst plus a
  window's refill into one window. The log's window is stretched by a small margin
  (``margin_s``) so that the server, which sees each request a little after it is
  sent and with varying delay, also never counts more than ``rpm`` in its windows;
  sustained throughput is therefore ``rpm × window / (window + margin)`` (99.5% of
  ``rpm`` at the defaults);
- sends paced at one per ``(window + margin) / rpm`` after a burst of up to a
  sixtieth of the budget, as providers enforce their per-minute limits over
  shorter spans too;
- at most ``tpm`` tokens per window: each request is charged an estimate when it
  is admitted, and the charge is corrected to the reported usage when it is
  released (estimate-then-reconcile);
- nothing sent while a ``pause`` is in force, and after it sends go out one at a
  time at the pace, never all at once (the herd a pause would otherwise gather);
- sends spaced by the pace learned from the server (``pacing.Pacer``: its
  rate-limit headers, or AIMD on its 429s) when that is slower than the
  configured ``rpm`` — a configured limit stays an upper bound. ``release``
  tells the pacer how each request ended, and marks a 429 the pacer judged
  isolated noise on its permit (``Permit.noise``) for the retry loop.

Waiters queue in FIFO order behind one turnstile, so only the head of the queue
sleeps on a timer and nobody is starved; a call's re-sends (``first=True``) take
the turnstile's front lane (``turnstile.py``), so a retried request does not queue
behind every trial in flight a second time.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from runner.providers.pacing import Pacer, RateInfo
from runner.providers.settings import Limits
from runner.providers.turnstile import Turnstile


class Permit:
    """One admitted request: what it was charged, so ``release`` can reconcile it."""

    __slots__ = ("entry", "noise", "released", "sent_at")

    def __init__(self, entry: list[float] | None, sent_at: float = 0.0) -> None:
        self.entry = entry  # [send time, tokens charged] in the token log, or None
        self.released = False
        self.sent_at = sent_at  # when it was admitted (the limiter's clock): which pace it was sent at
        #: set by ``release``: its 429 was isolated noise, not the limit (``pacing``'s burst rule), so the call
        #: retries it alone without pausing the key. A limiter that cannot tell leaves it False (pause, as for
        #: any 429).
        self.noise = False


class Limiter(Protocol):
    async def acquire(self, estimated_tokens: int = 0, *, first: bool = False) -> Permit:
        """A permit to send one request; ``first``: a re-send of a call that already had its turn."""
        ...

    async def release(self, permit: Permit, used_tokens: int | None = None, *, info: RateInfo | None = None,
                      rate_limited: bool = False, retry_after_s: float | None = None, answered: bool = True) -> None:
        """Give the permit back, saying how the request ended: its usage, rate-limit headers, a 429.

        ``answered`` is False when no answer came (cancelled, or an error of trialgrid's own).
        """
        ...

    async def pause(self, seconds: float) -> None: ...


class LocalLimiter:
    """An in-process limiter for one provider key (see the module docstring for the guarantees)."""

    def __init__(self, limits: Limits, *, window_s: float = 60.0, margin_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, learn: bool = True) -> None:
        self.limits = limits
        self.window_s = window_s
        self.margin_s = margin_s if margin_s is not None else max(0.005 * window_s, 0.05)
        self._clock = clock
        self._span = window_s + self.margin_s
        self._sem = asyncio.Semaphore(limits.max_concurrent) if limits.max_concurrent else None
        self._turnstile = Turnstile()
        self._sends: deque[float] = deque()
        self._tokens: deque[list[float]] = deque()
        self._token_sum = 0.0
        self._paused_until = 0.0
        rpm = limits.rpm
        self._interval = self._span / rpm if rpm else 0.0
        self._burst = max(1, math.ceil(rpm / 60)) if rpm else 0
        self._tat = 0.0  # pacing: theoretical arrival time of the next send (GCRA)
        #: the pace learned from the server (None: only the configured limits apply)
        self.pacer = Pacer(window_s=window_s, clock=clock) if learn else None

    @property
    def counts_tokens(self) -> bool:
        """Whether ``acquire`` uses its token estimate (only with a tpm limit)."""
        return self.limits.tpm is not None

    @property
    def paused_until(self) -> float:
        return self._paused_until

    async def acquire(self, estimated_tokens: int = 0, *, first: bool = False) -> Permit:
        if self._sem is not None:
            await self._sem.acquire()
        try:
            async with self._turnstile.turn(first=first):
                while True:
                    wait = self._wait(self._clock(), estimated_tokens)
                    if wait <= 0:
                        break
                    await asyncio.sleep(wait)
                return self._admit(self._clock(), estimated_tokens)
        except BaseException:
            if self._sem is not None:
                self._sem.release()
            raise

    def _wait(self, now: float, tokens: int) -> float:
        wait = self._paused_until - now
        limits = self.limits
        if limits.rpm:
            sends = self._sends
            while sends and sends[0] <= now - self._span:
                sends.popleft()
            if len(sends) >= limits.rpm:
                wait = max(wait, sends[0] + self._span - now)
        interval, burst = self._pace()
        if interval:
            wait = max(wait, self._tat - (burst - 1) * interval - now)
        if limits.tpm:
            log = self._tokens
            while log and log[0][0] <= now - self._span:
                self._token_sum -= log.popleft()[1]
            charge = min(tokens, limits.tpm)  # a request bigger than the budget goes alone
            excess = self._token_sum + charge - limits.tpm
            if excess > 0:
                freed = 0.0
                for sent, used in log:
                    freed += used
                    if freed >= excess:
                        wait = max(wait, sent + self._span - now)
                        break
        return wait

    def _pace(self) -> tuple[float, int]:
        """(seconds between sends, burst): the configured rpm's, or the learned pace when that is slower."""
        learned = self.pacer.interval() if self.pacer is not None else 0.0
        if learned > self._interval:
            return learned, 1  # a learned pace allows no burst: the server's may be a single request
        return self._interval, self._burst

    def _admit(self, now: float, tokens: int) -> Permit:
        if self.limits.rpm:
            self._sends.append(now)
        interval, _ = self._pace()
        if interval:
            self._tat = max(self._tat, now) + interval
        entry = None
        if self.limits.tpm:
            entry = [now, float(min(tokens, self.limits.tpm))]
            self._tokens.append(entry)
            self._token_sum += entry[1]
        return Permit(entry, now)

    async def release(self, permit: Permit, used_tokens: int | None = None, *, info: RateInfo | None = None,
                      rate_limited: bool = False, retry_after_s: float | None = None, answered: bool = True) -> None:
        if permit.released:
            return
        permit.released = True
        if self.pacer is not None and answered:
            evidence = self.pacer.observe(permit.sent_at, info=info, rate_limited=rate_limited,
                                          retry_after_s=retry_after_s, used_tokens=used_tokens)
            permit.noise = rate_limited and not evidence
        entry = permit.entry
        if entry is not None and used_tokens is not None and entry[0] > self._clock() - self._span:
            # reconcile: the estimate becomes what the server counted (still in the window)
            self._token_sum += used_tokens - entry[1]
            entry[1] = float(used_tokens)
        if self._sem is not None:
            self._sem.release()

    def pause_left(self) -> float:
        """Seconds the key's retry-after pause still holds every request (0: none)."""
        return max(0.0, self._paused_until - self._clock())

    async def pause(self, seconds: float) -> None:
        """Hold every request on this key for ``seconds`` from now (never shortens a pause)."""
        self._paused_until = max(self._paused_until, self._clock() + max(0.0, seconds))
        # the server named when it admits the next request: the first waiter goes then (not a pace
        # interval later, which would leave a one-request bucket's token unused), the rest at the pace
        self._tat = self._paused_until


def make_limiter(limits: Limits | None) -> LocalLimiter:
    """A key's limiter. Even without configured limits it carries the key-wide retry-after pause."""
    return LocalLimiter(limits if limits is not None else Limits())
