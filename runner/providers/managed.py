"""The one retry loop: limiter → remedies → wire format → HTTP, around a single-attempt provider.

Every configured provider (``openai``, ``anthropic``, ``callable``) is wrapped in a
``ManagedProvider``; the in-process ``sim`` is not (it cannot fail that way, and the
in-process path must stay at tens of thousands of trials per second). Probes call
``Agent.chat`` once per model turn and never retry: retrying is decided here, once,
from the kind the provider classified.

Per call:

1. apply the remedies learned for (provider, endpoint, model) — unless
   ``--strict-params`` — and, for the first request of a new shape, wait for the
   scout gate (see ``remedies.py``);
2. take a permit from the key's limiter (concurrency, rpm, tpm estimate, pause);
3. send one request; release the permit with the tokens the response reported;
4. tell the limiter how the attempt ended — the answer's rate-limit headers (read
   by the wire provider into a ``pacing.RateSlot``), whether it was a 429 — so it
   learns the key's pace (``pacing.py``);
5. on a rejected parameter whose body names a remedy not yet applied: learn it and
   re-send at once, without spending an attempt; on transient: back off
   (exponential, full jitter: a uniform draw in [0, min(cap, base·2^n)]), never
   shorter than the server's retry-after, up to ``max_attempts`` requests; on
   rate-limited: pause the whole key for the retry-after and queue again — the
   limiter then releases the waiting requests at the learned pace — for as long as
   ``max_wait_s`` allows, not counting attempts (a 429 says "slower", not "broken");
   a 429 without rate-limit headers that the limiter judged isolated (not in a burst,
   not past a learned limit: ``Permit.noise``) waits out its retry-after (or a
   jittered backoff) alone, without pausing the key;
   on anything else, raise — the trial becomes an ``error`` row carrying the kind
   and ``attempts``.

A server that died mid-run is not retried by every trial of the grid: once every
attempt on the endpoint has failed to connect for ``DOWN_AFTER_S`` with no answer
between, its calls end at once as ``transient`` rows ("connection failed: … not
sent"), one probe request every ``PROBE_EVERY_S`` finding out whether it is back.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from runner.core.errors import CONNECTION_FAILED
from runner.core.parking import parked
from runner.core.types import ChatRequest, ChatResponse
from runner.providers import inflight
from runner.providers.errors import ErrorKind, ProviderError, Remedy
from runner.providers.estimate import estimate_tokens
from runner.providers.limiter import Limiter
from runner.providers.pacing import is_rate_limit, rate_slot
from runner.providers.remedies import BookKey, RemedyBook, apply_remedies, request_shape
from runner.providers.settings import RetryPolicy

#: remedy re-sends allowed in one call (each must apply a remedy not applied before)
_MAX_REMEDY_RESENDS = 8
#: every attempt on an endpoint failed to connect for this long, none answered: it is down (see the docstring)
DOWN_AFTER_S = 30.0
#: while it is down, one request this often still goes out, to find it back
PROBE_EVERY_S = 5.0


def remedy_params(params: Mapping[str, Any], remedies: Sequence[Remedy]) -> tuple[dict[str, Any], list[str]]:
    """Remedies applied to a neutral ``params`` mapping (for providers without a wire body)."""
    out = dict(params)
    return out, apply_remedies([out], remedies)


class ManagedProvider:
    """A single-attempt provider made safe to run overnight: limits, remedies, retries."""

    def __init__(
        self,
        inner: Any,
        *,
        endpoint: str,
        limiter: Limiter,
        book: RemedyBook,
        policy: RetryPolicy,
        strict_params: bool = False,
        jitter: Callable[[], float] = random.random,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.endpoint = endpoint
        self.limiter = limiter
        self.book = book
        self.policy = policy
        self.strict_params = strict_params
        self._jitter = jitter
        self._sleep = sleep
        self._clock = clock
        self._wire = bool(getattr(inner, "accepts_remedies", False))
        #: since when every attempt failed to connect with no answer between (None: the endpoint answers)
        self._failing_since: float | None = None
        self._last_probe = 0.0

    def _refuse_if_down(self, attempts: int) -> None:
        """A call to an endpoint that has not answered for ``DOWN_AFTER_S`` ends at once, unless it is the probe."""
        since = self._failing_since
        if since is None:
            return
        now = self._clock()
        if now - since < DOWN_AFTER_S:  # not down yet: retried as any transient failure
            return
        if now - self._last_probe >= PROBE_EVERY_S:  # this one goes out, to find the server back
            self._last_probe = now
            return
        refused = ProviderError(ErrorKind.TRANSIENT, f"{CONNECTION_FAILED}: no connection to {self.endpoint} for "
                                f"{now - since:.0f} s, so not sent (rerun with --retry-errors once the server is "
                                "back)")
        refused.attempts = attempts
        raise refused

    def _note_connection(self, error: ProviderError | None) -> None:
        """After an attempt: a failure to connect starts (or continues) the endpoint's outage; any answer ends it."""
        if error is not None and error.status_code is None and error.message.startswith(CONNECTION_FAILED):
            if self._failing_since is None:
                self._failing_since = self._clock()
        else:
            self._failing_since = None

    async def complete(self, request: ChatRequest) -> ChatResponse:
        key: BookKey = (self.name, self.endpoint, request.model)
        if self.strict_params:
            return await self._call(request, key)
        book = self.book
        shape = request_shape(request.params, bool(request.tools), request.tool_choice)
        if not book.verified(key, shape):
            async with book.gate(key, shape):
                if not book.verified(key, shape):
                    try:
                        response = await self._call(request, key)
                    except ProviderError as exc:
                        if not exc.kind.retryable:  # nothing more to learn from this shape
                            book.mark_verified(key, shape)
                        raise
                    book.mark_verified(key, shape)
                    return response
        return await self._call(request, key)

    def backoff_s(self, failures: int) -> float:
        """Full jitter: uniform in [0, min(cap, base · 2^(failures-1))]."""
        policy = self.policy
        ceiling = min(policy.backoff_max_s, policy.backoff_base_s * (2 ** (failures - 1)))
        return self._jitter() * ceiling

    async def _call(self, request: ChatRequest, key: BookKey) -> ChatResponse:
        attempts = failures = limited = resends = 0
        started = self._clock()
        limiter = self.limiter
        policy = self.policy
        # the estimate walks every tool schema: only pay for it when a tpm budget reads it
        estimate = estimate_tokens(request) if getattr(limiter, "counts_tokens", True) else 0
        while True:
            remedies = () if self.strict_params else self.book.remedies(key)
            sent, applied = request, list[str]()
            if remedies and not self._wire:
                params, applied = remedy_params(request.params, remedies)
                sent = replace(request, params=params)  # every other field as asked (trial_seed keys the cache)
            paused = limiter.pause_left() if hasattr(limiter, "pause_left") else 0.0
            if paused and paused >= (left := inflight.time_left()):
                # the key waits out a server's retry-after that this trial's deadline would cut short: a timeout
                # row would blame the trial; it is the rate limit, retryable once the pause is over
                refused = ProviderError(ErrorKind.RATE_LIMITED, f"the key is paused {paused:.0f} s more by the "
                                        f"server's retry-after, past this trial's deadline {left:.0f} s away; not "
                                        "waited out: run it again with --retry-errors")
                refused.attempts = attempts
                raise refused
            self._refuse_if_down(attempts)
            # a re-send has had its turn in the key's queue once: it goes ahead of first sends
            permit = await limiter.acquire(estimate, first=attempts > 0)
            attempts += 1
            error: ProviderError
            info = None
            inflight.sending()  # counted even if a deadline cancels the call in flight
            with rate_slot() as slot:
                try:
                    if self._wire:
                        response = await self.inner.complete(sent, remedies)
                    else:
                        response = await self.inner.complete(sent)
                except ProviderError as exc:
                    inflight.returned()
                    info = slot.info
                    rate_limited = exc.kind is ErrorKind.RATE_LIMITED
                    # the pace learns from a wait no longer than one call may wait: a server asking a billion
                    # seconds (or a day) must not set the key's pace to nothing for every trial behind it
                    asked = exc.retry_after_s
                    await limiter.release(permit, None, info=slot.info, rate_limited=rate_limited,
                                          retry_after_s=None if asked is None else min(asked, policy.max_wait_s),
                                          answered=exc.status_code is not None)
                    self._note_connection(exc)
                    error = exc
                except BaseException:
                    inflight.returned()
                    await limiter.release(permit, None, answered=False)
                    raise
                else:
                    inflight.returned()
                    self._note_connection(None)
                    usage = response.usage
                    await limiter.release(permit, (usage.input_tokens or 0) + (usage.output_tokens or 0), info=slot.info)
                    if self._wire and response.attempts == attempts:  # the wire set both (the usual first try)
                        return response
                    return replace(response, attempts=attempts,
                                   remedies=response.remedies if self._wire else tuple(applied))
            error.attempts = attempts
            if not self._wire:
                error.remedies = tuple(applied)
            remedy = error.remedy
            if (error.kind is ErrorKind.REJECTED_PARAM and remedy is not None and not self.strict_params
                    and remedy not in remedies and resends < _MAX_REMEDY_RESENDS):
                await self.book.learn(key, remedy, error.message)
                resends += 1
                continue  # at once, and it does not count against max_attempts
            if error.kind is ErrorKind.RATE_LIMITED and not is_rate_limit(info):
                # its headers say budget is left: an overload blip, retried as a transient error (attempts,
                # backoff no shorter than its retry-after) without pausing the key for everyone
                error.kind = ErrorKind.TRANSIENT
            if error.kind is ErrorKind.RATE_LIMITED:
                limited += 1
                retry_after = error.retry_after_s
                if retry_after is not None and not permit.noise:
                    # the key pauses once, for what the server asked but never longer than one call may wait:
                    # every trial queued on the key waits it out together, none sends into it
                    await limiter.pause(min(retry_after, policy.max_wait_s))
                delay = retry_after if retry_after is not None else self.backoff_s(limited)
                waited = self._clock() - started
                left = inflight.time_left()
                if waited + delay <= policy.max_wait_s and delay < left:
                    with parked():  # asleep: another trial takes this one's place meanwhile
                        await self._sleep(delay)
                    continue
                if waited + delay <= policy.max_wait_s:  # a wait the trial's deadline would cut short: say so now
                    error.message = (f"{error.message} (the server asked to wait {delay:g} s, past this trial's "
                                     f"deadline {left:.0f} s away; not slept out: run it again with --retry-errors)")
                else:
                    error.message = (f"{error.message} (still rate limited after {waited:.0f} s and {attempts} "
                                     f"attempts, the server asking {delay:g} s more: retry.max_wait_s is "
                                     f"{policy.max_wait_s:g} s; set limits.rpm below the account's limit, or raise "
                                     "retry.max_wait_s)")
            elif error.kind.retryable:
                failures += 1
                if failures < policy.max_attempts:
                    delay = self.backoff_s(failures)
                    if error.retry_after_s is not None:
                        delay = max(delay, error.retry_after_s)
                    with parked():
                        await self._sleep(delay)
                    continue
                error.message = f"{error.message} (gave up after {attempts} attempts)"
            elif error.kind is ErrorKind.REJECTED_PARAM and self.strict_params and remedy is not None:
                error.message = f"{error.message} (--strict-params: not applying '{remedy.describe()}')"
            raise error

    async def aclose(self) -> None:
        await self.inner.aclose()
