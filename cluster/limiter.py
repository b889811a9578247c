"""The Ray-backed ``Limiter``: one provider key's limits shared by every worker.

Two halves behind runner's ``Limiter`` interface (``acquire`` / ``release`` /
``pause``):

- ``LimiterActor`` (one per provider key, on the driver's node) is the authority.
  It runs runner's own ``LocalLimiter`` for the key's ``rpm`` and ``tpm``, so the
  sliding-window, pacing and pause rules are the single-node ones, not a copy.
- ``LeasedLimiter`` (in each worker) takes send permits from the actor in *leases*
  of several at once — one actor call per lease, not per request (one grant per
  call tops out near 1,400/s; leases of 10 reach ~13,000/s) — and hands them to
  the worker's requests locally.

Why this stays within the limit: the actor stamps each permit in its window when
it grants it, and a worker must use a leased permit within ``_LEASE_TTL_S`` of
receiving it (unused ones are returned, refunding their token charge). A request
is therefore sent at most ``_LEASE_TTL_S`` (plus the call's latency) after the time
the actor counted it; the actor's window margin covers that, so the server never
counts more than ``rpm`` in any 60 s. Lease sizes follow demand (the worker's
waiting requests) and are capped so that a lease never holds more than
``_LEASE_SPAN_S`` worth of the paced rate, keeping the stamps close to the sends.

``max_concurrent`` is split between workers (each enforces its share with a local
semaphore); if there are more workers than slots, each slot is taken from the
actor instead, one call per request — slow, but only at a concurrency too small
for that to matter.

A ``pause`` (a 429's retry-after) holds the worker's requests at once, and the
actor pushes it to every subscribed worker, which drops the permits it holds.

The pace learned from the server (``runner.providers.pacing``: rate-limit headers,
AIMD on 429s) is learned once, in the actor's limiter, from what every worker saw:
a worker reports how each request ended (its age, not its send time, so no clocks
are compared across nodes) with its next lease call, and a 429 at once. The actor
then grants permits at the learned pace, one lease at a time, so after a pause the
workers' waiting requests go out paced, not together. Every key of an HTTP provider
has an actor for that reason, ``limits:`` or not.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import deque
from typing import Any

from cluster.shares import share
from runner.providers.limiter import LocalLimiter, Permit
from runner.providers.pacing import RateInfo
from runner.providers.settings import Limits
from runner.providers.turnstile import Turnstile

#: a leased permit must be used within this long after it reaches the worker
_LEASE_TTL_S = 0.25
#: a lease holds at most this long's worth of the paced rate (and at least one permit)
_LEASE_SPAN_S = 0.1
#: and at most this many permits
_MAX_LEASE = 64

LimiterKey = tuple[str, str, str]
#: how a request ended, as a worker reports it: (seconds since it was sent, rate limited, retry-after, tokens used)
Observation = tuple[float, bool, float | None, int | None]

#: the leased limiters living in this worker process, by key: where pushed pauses land
_LIVE: dict[LimiterKey, LeasedLimiter] = {}


def _window_margin_s(window_s: float) -> float:
    """The actor's margin: the local limiter's own, plus how long a permit may wait to be sent.

    A permit is stamped when granted; it may wait up to ``_LEASE_SPAN_S`` for the rest
    of its lease, the call's latency (allowed 50 ms), then ``_LEASE_TTL_S`` in the pool.
    """
    return max(0.005 * window_s, 0.05) + _LEASE_SPAN_S + 0.05 + _LEASE_TTL_S


class LimiterActor:
    """The shared authority for one provider key (used as a Ray async actor)."""

    def __init__(self, key: LimiterKey, limits: Limits, window_s: float = 60.0) -> None:
        self.key = key
        rate_limits = Limits(rpm=limits.rpm, tpm=limits.tpm)
        self._limiter = LocalLimiter(rate_limits, window_s=window_s, margin_s=_window_margin_s(window_s))
        self._ids = itertools.count(1)
        self._permits: dict[int, Permit] = {}
        self._slots = asyncio.Semaphore(limits.max_concurrent) if limits.max_concurrent else None
        self._subscribers: list[Any] = []
        self.granted = 0
        self.leases = 0

    def _max_lease(self) -> int:
        """The most permits one lease may hold: ``_LEASE_SPAN_S`` of the current pace (configured or learned)."""
        interval, _ = self._limiter._pace()
        if not interval:
            return _MAX_LEASE
        return max(1, min(_MAX_LEASE, int(_LEASE_SPAN_S / interval) + 1))

    async def lease(self, wanted: int, estimated_tokens: int, settle: list[tuple[int, int | None]],
                    observed: list[Observation] | None = None, info: RateInfo | None = None) -> list[int]:
        """Grant up to ``wanted`` permits (at least one, waiting as the limits require).

        ``settle`` reconciles permits granted earlier: (permit id, tokens used), with
        ``None`` for a permit sent without a usage report and 0 for one never sent;
        ``observed`` and ``info`` are how the worker's requests ended since its last call.
        """
        await self.settle(settle)
        await self.observe(observed or [], info)
        ids = []
        for _ in range(max(1, min(wanted, self._max_lease()))):
            permit = await self._limiter.acquire(estimated_tokens)
            permit_id = next(self._ids)
            if permit.entry is not None:
                self._permits[permit_id] = permit
            ids.append(permit_id)
        self.granted += len(ids)
        self.leases += 1
        return ids

    async def settle(self, settle: list[tuple[int, int | None]]) -> None:
        for permit_id, used in settle:
            permit = self._permits.pop(permit_id, None)
            if permit is not None:
                await self._limiter.release(permit, used, answered=False)  # answers reach the pace via observe

    async def observe(self, observed: list[Observation], info: RateInfo | None = None) -> None:
        """Teach the key's pace what workers' requests met (their ages are turned into this clock's send times)."""
        pacer = self._limiter.pacer
        if pacer is None:
            return
        now = time.monotonic()
        for i, (age, rate_limited, retry_after_s, used) in enumerate(observed):
            pacer.observe(now - age, info=info if i == len(observed) - 1 else None, rate_limited=rate_limited,
                          retry_after_s=retry_after_s, used_tokens=used)
        if info is not None and not observed:
            pacer.observe(now, info=info, rate_limited=False)

    async def learned(self) -> dict[str, float | int | None]:
        pacer = self._limiter.pacer
        return pacer.snapshot() if pacer is not None else {}

    async def pause(self, seconds: float) -> None:
        """Hold the key for everyone: here, and in every subscribed worker."""
        await self._limiter.pause(seconds)
        for worker in list(self._subscribers):
            try:
                worker.limiter_pause.remote(self.key, seconds)
            except Exception:
                self._subscribers.remove(worker)

    async def subscribe(self, worker: Any) -> None:
        self._subscribers.append(worker)

    async def take_slot(self) -> None:
        assert self._slots is not None
        await self._slots.acquire()

    async def give_slot(self) -> None:
        assert self._slots is not None
        self._slots.release()

    async def counters(self) -> dict[str, int]:
        return {"granted": self.granted, "leases": self.leases}


class LeasedLimiter:
    """A worker's ``Limiter`` for one key, fed by leases from its ``LimiterActor``."""

    def __init__(self, actor: Any, key: LimiterKey, limits: Limits, index: int, workers: int) -> None:
        self._actor = actor
        self.key = key
        self.limits = limits
        # every permit comes from the actor: even without configured limits, it keeps the learned pace
        self._rated = True
        self._sem: asyncio.Semaphore | None = None
        self._remote_slots = False
        if limits.max_concurrent:
            if limits.max_concurrent >= workers:
                self._sem = asyncio.Semaphore(share(limits.max_concurrent, workers, index))
            else:
                self._remote_slots = True
        self._pool: deque[tuple[int, float]] = deque()  # (permit id, use-by time)
        self._settle: list[tuple[int, int | None]] = []
        self._turnstile = Turnstile()
        self._paused_until = 0.0
        self._observed: list[tuple[float, bool, float | None, int | None]] = []  # (sent at, ...) this clock
        self._info: RateInfo | None = None
        _LIVE[key] = self

    async def acquire(self, estimated_tokens: int = 0, *, first: bool = False) -> Permit:
        if self._sem is not None:
            await self._sem.acquire()
        elif self._remote_slots:
            await self._actor.take_slot.remote()
        try:
            if not self._rated:
                return Permit(None)
            permit_id = await self._take(estimated_tokens, first)
            return Permit([float(permit_id), float(estimated_tokens)], time.monotonic())
        except BaseException:
            await self._give_slot()
            raise

    async def _take(self, estimated_tokens: int, first: bool) -> int:
        # one request at a time takes a permit or leases more, re-sends first (runner's Turnstile)
        async with self._turnstile.turn(first=first):
            while True:
                now = time.monotonic()
                if self._paused_until > now:
                    await asyncio.sleep(self._paused_until - now)
                    continue
                while self._pool:
                    permit_id, use_by = self._pool.popleft()
                    if use_by > now:
                        return permit_id
                    self._settle.append((permit_id, 0))  # expired unused: refund its tokens
                settle, self._settle = self._settle, []
                observed, info = self._drain_observed()
                ids = await self._actor.lease.remote(self._turnstile.waiting + 1, estimated_tokens, settle,
                                                     observed, info)
                use_by = time.monotonic() + _LEASE_TTL_S
                self._pool.extend((i, use_by) for i in ids)

    async def release(self, permit: Permit, used_tokens: int | None = None, *, info: RateInfo | None = None,
                      rate_limited: bool = False, retry_after_s: float | None = None, answered: bool = True) -> None:
        if permit.released:
            return
        permit.released = True
        if permit.entry is not None and self.limits.tpm:
            self._settle.append((int(permit.entry[0]), used_tokens))
        if answered:
            self._observed.append((permit.sent_at, rate_limited, retry_after_s, used_tokens))
            if info is not None:
                self._info = info
            if rate_limited:  # the actor must cut the pace now, not at the next lease
                observed, latest = self._drain_observed()
                self._actor.observe.remote(observed, latest)
        await self._give_slot()

    def _drain_observed(self) -> tuple[list[Observation], RateInfo | None]:
        now = time.monotonic()
        observed = [(now - sent, limited, wait, used) for sent, limited, wait, used in self._observed]
        info, self._observed, self._info = self._info, [], None
        return observed, info

    async def _give_slot(self) -> None:
        if self._sem is not None:
            self._sem.release()
        elif self._remote_slots:
            self._actor.give_slot.remote()

    def pause_left(self) -> float:
        """Seconds the key's retry-after pause still holds every request here (0: none)."""
        return max(0.0, self._paused_until - time.monotonic())

    async def pause(self, seconds: float) -> None:
        self.apply_pause(seconds)
        self._actor.pause.remote(seconds)

    def apply_pause(self, seconds: float) -> None:
        """Hold this worker's requests for ``seconds``; permits held now are given back."""
        self._paused_until = max(self._paused_until, time.monotonic() + max(0.0, seconds))
        while self._pool:
            self._settle.append((self._pool.popleft()[0], 0))


def apply_pushed_pause(key: LimiterKey, seconds: float) -> None:
    """A pause pushed by a ``LimiterActor`` to this worker process."""
    limiter = _LIVE.get(tuple(key))  # type: ignore[arg-type]
    if limiter is not None:
        limiter.apply_pause(seconds)


def _lease_size_for(rpm: int, window_s: float = 60.0) -> int:
    """The largest lease the actor grants at this rpm (exposed for the benchmark's report)."""
    interval = (window_s + _window_margin_s(window_s)) / rpm
    return max(1, min(_MAX_LEASE, math.floor(_LEASE_SPAN_S / interval) + 1))
