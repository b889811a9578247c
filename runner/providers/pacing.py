"""Rate limits learned from the server, per provider key: its headers when it sends them, AIMD on 429s when not.

Users rarely know their exact limits, and a sweep without ``limits:`` used to send
as fast as its concurrency allowed, meet a 429, pause the whole key, and then let
every waiting request out at once — one got through, the rest met 429 again and
spent their attempts. A ``Pacer`` learns a send rate instead, and the limiter
(``limiter.py``) spaces sends by it, after a pause too:

- **Headers.** Every answer's vendor rate-limit headers are read (OpenAI
  ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, with reset durations
  such as ``1s``, ``6m0s``, ``20ms``; Anthropic ``anthropic-ratelimit-{requests,tokens,
  input-tokens,output-tokens}-{limit,remaining,reset}``, with RFC 3339 resets). Both
  vendors state their limits per minute, so the pace is ``limit / window`` (60 s),
  a little under it (``_HEADER_MARGIN``) so that network jitter never makes two
  requests arrive closer than the server's refill; for tokens, the interval is the
  recent tokens per request (a moving average of reported usage) over the token rate.
- **Noise is not a limit.** A 429 whose own rate-limit headers say requests remain
  in the window (and no token budget is spent) is a vendor's overload blip, not the
  limit: it cuts nothing, pauses no key, and the call retries it as a transient
  error (``is_rate_limit``; the retry loop asks it too).
- **Bursts, not blips.** A 429 with no rate-limit headers says nothing about budget,
  so what tells the limit from noise is how 429s come: a real limit answers a rate
  past it with a run of 429s (at a cold start, most answers), while a vendor's
  overload blips come one at a time whatever the rate. Such a 429 is evidence of the
  limit when it is part of a burst (``BURST_MIN`` or more 429s, and at least
  ``BURST_SHARE`` of the answers, among the latest ``_BURST_ANSWERS`` answers to
  requests sent since the last cut, over ``_SAMPLE_S``); then it cuts the pace and
  the call pauses the key. Anything else is isolated: the call retries it alone,
  pausing no key (``Permit.noise``; the retry loop reads it), and it cuts nothing —
  unless it was met while the pace was probing past the rate the last cut was made
  from, where the rate is the likely cause: then it cuts the pace, still without a
  pause. Before this rule, 8% random 429s
  without headers held the pace at 0.74 of what the server admitted without them:
  every one cut the pace and paused the key for its retry-after.
- **AIMD** without headers: a 429 cuts the rate to ``BETA`` times the rate that met
  it — or, while nothing was known, to what the server actually admitted lately
  (answers that were not 429 over the last ``_SAMPLE_S``, over at least the
  retry-after). A 429 is answered at once while the requests admitted with it are
  still being answered, so an estimate made when the 429 arrives counts too few:
  the answers to requests sent before the cut that arrive after it are admissions
  of the same span, and raise the cut's estimate (never lower it) — otherwise a cold
  start cut the pace to about one request a second whatever the limit, and the slow
  growth below took minutes to win it back. Only requests sent after the last cut can
  cut again, so the herd of 429s one burst provokes counts once. Each admitted answer then grows the rate:
  fast back to just under the rate that failed (``PLATEAU``), then slowly past it,
  faster the longer no 429 comes, as TCP CUBIC does, so the pace sits near the
  limit most of the time instead of sawing between half and all of it.

The limiter takes the slowest of: the configured ``limits:`` (still an upper
bound), the header pace and the AIMD pace.

Headers reach the limiter without changing the provider interface: the retry
loop (``managed.py``) opens a ``RateSlot`` around each attempt (a context
variable, so concurrent calls never see each other's), and ``http_base`` fills it
from the response it got, error or not.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from runner.providers.classify import parse_duration, parse_rfc3339_wait

#: the header pace is this share of the stated limit (jitter margin)
_HEADER_MARGIN = 0.98
#: a 429 cuts the rate to this share of the rate that met it
BETA = 0.9
#: admitted answers to climb from a cut back to the plateau
_RECOVER_ANSWERS = 3
#: the plateau: the share of the last failing rate reached quickly; beyond it growth is slow
PLATEAU = 0.97
#: past the plateau, each admitted answer adds this share of the last failing rate, growing by the
#: same share every ``_PROBE_RAMP`` answers — near the old limit growth is slow, far past it, fast
#: (a ceiling learned from a poor estimate is outgrown within a few hundred answers)
_PROBE_STEP = 0.001
_PROBE_RAMP = 50
#: how far back the "admitted lately" estimate, and the burst rule, look (s)
_SAMPLE_S = 10.0
#: a 429 without headers is evidence of the limit in a burst: this many 429s or more among the last
#: ``_BURST_ANSWERS`` answers to requests sent since the last cut (over ``_SAMPLE_S``)...
BURST_MIN = 3
#: ...so many that the server's background share of 429s (``_NOISE_*``) makes them this unlikely (a binomial
#: tail): three 429s in a row at a 5% background, or a cold-start herd of them, are a burst; 8% random 429s
#: reach it about once in 20,000 answers
BURST_P = 1e-3
#: the answers the burst rule looks back over: few enough that a change to mostly 429s is a burst within a few
#: dozen answers at any rate
_BURST_ANSWERS = 50
#: the background share of 429s, a moving average over about ``1 / _NOISE_ALPHA`` answers that were no evidence
#: of the limit, never taken as lower
#: than ``_NOISE_FLOOR`` (nor higher than ``_NOISE_CEILING``: a share above it is the limit, not background)
_NOISE_ALPHA = 1 / 256
_NOISE_FLOOR = 0.05
_NOISE_CEILING = 0.25
#: past the last failing rate, an isolated 429 cuts the pace when the 429s since the pace passed that rate are
#: this unlikely at the background share: the pace met the limit again, not the server's noise
_PROBE_P = 1e-3
#: the answers that rule looks back over
_PROBE_ANSWERS = 200


@dataclass(frozen=True, slots=True)
class RateInfo:
    """What one answer's rate-limit headers said (requests and tokens; ``None`` where absent)."""

    limit_requests: float | None = None
    remaining_requests: float | None = None
    reset_requests_s: float | None = None
    limit_tokens: float | None = None
    remaining_tokens: float | None = None
    reset_tokens_s: float | None = None

    @property
    def any(self) -> bool:
        return self.limit_requests is not None or self.limit_tokens is not None

    @property
    def budget_left(self) -> bool:
        """The headers say requests remain in the window and no token budget is spent: a 429 sent with them is
        not the rate limit (a vendor's overload blip, answered as 429), so it teaches no pace."""
        return bool(self.remaining_requests) and self.remaining_tokens != 0


def is_rate_limit(info: RateInfo | None) -> bool:
    """Whether a 429 is evidence of a rate limit: unless its own rate-limit headers say budget is left (
    at 8% random 429s, cutting for every one collapsed the pace from 27 to 3.5 requests a second)."""
    return info is None or not info.budget_left


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def read_rate_headers(headers: Mapping[str, str], *, now: float | None = None) -> RateInfo | None:
    """The vendor rate-limit headers of one answer, OpenAI's or Anthropic's; ``None`` if it has neither.

    ``headers``: any mapping of names to values, in any case (httpx's and aiohttp's headers, a dict). Anthropic's
    token budget is the tightest of its ``tokens``, ``input-tokens`` and ``output-tokens``.
    """
    # one pass into a plain dict: every answer is read here, and httpx's case-insensitive ``get`` is a scan of
    # the headers per call (9 µs an answer for these lookups, against 1 µs for the copy and the lookups)
    headers = {k.lower(): v for k, v in headers.items()}
    if headers.get("x-ratelimit-limit-requests") is not None or headers.get("x-ratelimit-limit-tokens") is not None:
        info = RateInfo(
            _number(headers.get("x-ratelimit-limit-requests")), _number(headers.get("x-ratelimit-remaining-requests")),
            parse_duration(headers.get("x-ratelimit-reset-requests", "")),
            _number(headers.get("x-ratelimit-limit-tokens")), _number(headers.get("x-ratelimit-remaining-tokens")),
            parse_duration(headers.get("x-ratelimit-reset-tokens", "")))
        return info if info.any else None
    if not any(headers.get(f"anthropic-ratelimit-{b}-limit") is not None
               for b in ("requests", "tokens", "input-tokens", "output-tokens")):
        return None
    now = time.time() if now is None else now
    prefix = "anthropic-ratelimit-"
    token_limits = [(_number(headers.get(f"{prefix}{b}-limit")), b)
                    for b in ("tokens", "input-tokens", "output-tokens")]
    token_limits = [(v, b) for v, b in token_limits if v is not None]
    limit_tokens = remaining_tokens = reset_tokens = None
    if token_limits:
        limit_tokens, budget = min(token_limits, key=lambda vb: vb[0] or 0.0)
        remaining_tokens = _number(headers.get(f"{prefix}{budget}-remaining"))
        reset_tokens = parse_rfc3339_wait(headers.get(f"{prefix}{budget}-reset", ""), now)
    info = RateInfo(
        _number(headers.get(f"{prefix}requests-limit")), _number(headers.get(f"{prefix}requests-remaining")),
        parse_rfc3339_wait(headers.get(f"{prefix}requests-reset", ""), now),
        limit_tokens, remaining_tokens, reset_tokens)
    return info if info.any else None


# ---------------------------------------------------------------- headers → limiter, per attempt


class RateSlot:
    """Where one attempt's answer leaves its rate-limit headers for the retry loop."""

    __slots__ = ("info",)

    def __init__(self) -> None:
        self.info: RateInfo | None = None


_SLOT: ContextVar[RateSlot | None] = ContextVar("trialgrid_rate_slot", default=None)


@contextmanager
def rate_slot() -> Iterator[RateSlot]:
    """Open a slot for the attempt made inside the ``with`` (the retry loop does, around each send)."""
    slot = RateSlot()
    token = _SLOT.set(slot)
    try:
        yield slot
    finally:
        _SLOT.reset(token)


def note_rate_headers(headers: Mapping[str, str]) -> None:
    """Called by a wire provider with every answer's headers; a no-op outside a ``rate_slot``."""
    slot = _SLOT.get()
    if slot is not None:
        slot.info = read_rate_headers(headers)


# ---------------------------------------------------------------- the learned pace


class Pacer:
    """One key's learned send rate (requests per second); ``interval()`` is what the limiter spaces sends by."""

    def __init__(self, *, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self.rate: float | None = None          # AIMD pace; None until a 429 teaches one
        self.ceiling: float | None = None       # the rate the last cut was made from
        self.header_rate: float | None = None   # requests/s the headers allow (with the margin)
        self.token_rate: float | None = None    # tokens/s the headers allow (with the margin)
        self._tokens_per_request: float | None = None
        self._last_cut = -math.inf
        self._informed_at: float | None = None  # when headers first told us a limit
        self._admitted: deque[float] = deque()  # send times of recent answers that were not 429
        #: (send time, was a 429) of the latest answers, for the burst rule
        self._answers: deque[tuple[float, bool]] = deque(maxlen=_BURST_ANSWERS)
        #: the last cut made from the admitted estimate: (when, the pace it may not exceed, the retry-after
        #: it spans at least). Late answers to requests sent before it revise it — and so every cut after
        #: it, whose pace came from it — for as long as its sample lasts.
        self._estimated_cut: tuple[float, float, float] | None = None
        self._probes = 0  # answers since the plateau was reached
        self._noise = _NOISE_FLOOR  # the background share of 429s (moving average)
        #: the latest answers (was each a 429) while the pace is past the last failing rate
        self._probe_answers: deque[bool] = deque(maxlen=_PROBE_ANSWERS)
        self.cuts = 0
        self.rate_limited = 0
        self.isolated = 0  # 429s without headers judged noise (neither a cut nor a pause)

    # -- what the limiter asks

    def interval(self) -> float:
        """Seconds between sends at the learned pace (0: nothing learned, do not pace)."""
        rates = [r for r in (self.rate, self.header_rate) if r]
        interval = 1.0 / min(rates) if rates else 0.0
        if self.token_rate and self._tokens_per_request:
            interval = max(interval, self._tokens_per_request / self.token_rate)
        return interval

    # -- what an answer tells

    def observe(self, sent_at: float, *, info: RateInfo | None, rate_limited: bool,
                retry_after_s: float | None = None, used_tokens: int | None = None) -> bool:
        """One answer (or failure) of a request sent at ``sent_at`` (the limiter's clock).

        Returns whether it was evidence of the rate limit, for which the call pauses the key: a 429 with
        headers that say the budget is spent, one in a burst, or one answered to a request sent before a cut
        that already answered its burst. False for an answer, a 429 whose headers say budget is left, and an
        isolated 429 without headers — those the call retries alone. (An isolated one met while the pace
        probes past the last failing rate still cuts the pace: there the rate is the likely cause.)
        """
        now = self._clock()
        if info is not None:
            self._headers(info, now)
        if used_tokens:
            avg = self._tokens_per_request
            self._tokens_per_request = float(used_tokens) if avg is None else 0.8 * avg + 0.2 * used_tokens
        cutoff = now - _SAMPLE_S
        answers = self._answers
        while answers and answers[0][0] < cutoff:
            answers.popleft()
        if rate_limited and not is_rate_limit(info):
            return False  # a 429 whose headers say budget is left: noise, neither a cut nor an admission
        answers.append((sent_at, rate_limited))
        if self._probing():
            self._probe_answers.append(rate_limited)
        evidence = False
        if rate_limited:
            self.rate_limited += 1
            # with headers (budget spent), from the herd a cut has answered, or in a burst: the limit
            evidence = info is not None or sent_at < self._last_cut or self._burst()
            if evidence or self._probing_met_the_limit():
                self._cut(sent_at, now, retry_after_s)  # past the last failing rate, the likely cause is the rate
            if not evidence:
                self.isolated += 1
        else:
            self._admitted.append(sent_at)
            if self._estimated_cut is not None and sent_at < self._estimated_cut[0]:
                self._revise()
            self._grow()
        if not evidence:  # the background is what comes back when the limit is not met
            self._noise += _NOISE_ALPHA * (float(rate_limited) - self._noise)
        while self._admitted and self._admitted[0] < cutoff:
            self._admitted.popleft()
        return evidence

    def _background(self) -> float:
        return min(max(self._noise, _NOISE_FLOOR), _NOISE_CEILING)

    def _burst(self) -> bool:
        """Whether the 429 just recorded is part of a burst (see the module docstring): evidence of the limit
        though it carries no headers."""
        since = [limited for sent, limited in self._answers if sent >= self._last_cut]
        limited = sum(since)
        return limited >= BURST_MIN and _binomial_tail(limited, len(since), self._background()) < BURST_P

    def _probing(self) -> bool:
        """Whether the pace is past the rate the last cut was made from (probing past a learned limit)."""
        return self.rate is not None and self.ceiling is not None and self.rate > self.ceiling

    def _probing_met_the_limit(self) -> bool:
        """Probing past the last failing rate, more 429s came back than the server's background share explains:
        the pace met the limit again (an isolated 429 among them then cuts, without a pause)."""
        answers = self._probe_answers
        return self._probing() and _binomial_tail(sum(answers), len(answers), self._background()) < _PROBE_P

    def _headers(self, info: RateInfo, now: float) -> None:
        if info.limit_requests:
            self.header_rate = _HEADER_MARGIN * info.limit_requests / self.window_s
        if info.limit_tokens:
            self.token_rate = _HEADER_MARGIN * info.limit_tokens / self.window_s
        if self._informed_at is None and (info.limit_requests or info.limit_tokens):
            self._informed_at = now

    def _cut(self, sent_at: float, now: float, retry_after_s: float | None) -> None:
        if sent_at < self._last_cut:
            return  # sent at the old pace: this burst of 429s has been answered already
        if self._informed_at is not None and sent_at < self._informed_at:
            return  # sent before the headers told us the limit we now keep to
        interval = self.interval()
        pace = 1.0 / interval if interval > 0 else math.inf
        wait = retry_after_s or 0.0
        # the pace we kept met the limit — unless it had grown far past what was sent (it did not bind)
        estimated = 1.5 * self._estimate(now, wait) if interval > 0 else self._estimate(now, wait)
        # never slower than one request a window: no real limit is lower, and a pace of nothing would hold every
        # trial behind it forever (a hostile Retry-After, a server answering only 429s)
        failing = max(min(pace, estimated), 1.0 / self.window_s)
        if failing < pace:
            self._estimated_cut = (now, pace, wait)
        self.ceiling = failing
        self.rate = BETA * failing
        self._probes = 0
        self._probe_answers.clear()
        self._last_cut = now
        self.cuts += 1

    def _estimate(self, upto: float, wait: float) -> float:
        """What the server admitted of the requests sent over ``_SAMPLE_S`` up to ``upto``, per second
        over at least ``wait`` (the retry-after) and a second: about the rate it allows."""
        cutoff = upto - _SAMPLE_S
        sent = [t for t in self._admitted if cutoff <= t <= upto]
        first = min(sent, default=upto)
        return max(len(sent), 1) / max(upto - first, wait, 1.0)

    def _revise(self) -> None:
        """An admitted answer to a request sent before the last estimated cut: that cut's estimate counts it too."""
        assert self._estimated_cut is not None and self.ceiling is not None and self.rate is not None
        at, pace, wait = self._estimated_cut
        if self._clock() - at > _SAMPLE_S:  # its sample is gone: what the pace met since is the better guide
            self._estimated_cut = None
            return
        estimate = self._estimate(at, wait)
        failing = min(pace, 1.5 * estimate if math.isfinite(pace) else estimate)
        if failing > self.ceiling:
            self.ceiling = failing
            self.rate = max(self.rate, BETA * failing)

    def _grow(self) -> None:
        rate, ceiling = self.rate, self.ceiling
        if rate is None or ceiling is None:
            return
        plateau = PLATEAU * ceiling
        if rate < plateau:
            rate = min(plateau, rate + (plateau - BETA * ceiling) / _RECOVER_ANSWERS)
        else:
            self._probes += 1
            rate += _PROBE_STEP * ceiling * (1 + self._probes / _PROBE_RAMP)
        if self.header_rate:  # no use growing past what the headers allow
            rate = min(rate, self.header_rate)
        self.rate = rate

    def snapshot(self) -> dict[str, float | int | None]:
        """What was learned (for benchmarks and tests)."""
        return {"rate": self.rate, "ceiling": self.ceiling, "header_rate": self.header_rate,
                "token_rate": self.token_rate, "cuts": self.cuts, "rate_limited": self.rate_limited,
                "isolated": self.isolated}


def _binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p): how unlikely ``k`` 429s in ``n`` answers are at a background share ``p``
    (``n`` is a window of at most a few hundred answers, ``0 < p < 1``: the terms neither overflow nor vanish)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    term = (1.0 - p) ** n  # P(X = 0); each next term by the ratio of successive binomial probabilities
    below = 0.0
    for i in range(k):
        below += term
        term *= (n - i) / (i + 1) * p / (1.0 - p)
    return max(0.0, 1.0 - below)
