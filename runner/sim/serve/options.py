"""What ``trialgrid serve`` can be told: latency, faults, parameter rules, its own rate limit.

Kept apart from the app so the CLI, the test fixture and the benchmark build the
same ``ServeOptions`` and the app never parses strings.
"""

from __future__ import annotations

import fnmatch
import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: fault kinds, each injected at its own rate (``--fault KIND=RATE``). ``529``: the vendor's "overloaded"
#: (Anthropic's 529 overloaded_error; OpenAI says it with a 503). The stream faults strike halfway through a
#: streamed answer — ``disconnect`` (the connection closes), ``stall`` (held ``slow_s``, past the client's read
#: timeout), ``bad_chunk`` (an event whose JSON does not parse); a non-streamed request meets them as
#: ``truncated``, ``slow`` and ``malformed``, and a streamed one meets those two as ``disconnect`` and ``bad_chunk``.
FAULTS = ("429", "500", "503", "529", "slow", "reset", "malformed", "truncated", "disconnect", "stall", "bad_chunk")
#: faults named only on their own (``--fault drip=1``), never in the even ``--faults`` mix. ``drip``: the whole
#: answer sent one byte every ``drip_s`` (100 ms), so no single read waits long: only a timeout on the whole
#: request stops it
SOLO_FAULTS = ("drip",)
_RPM_MODES = ("window", "bucket")
_LATENCY_DISTS = ("fixed", "uniform", "exponential", "lognormal")


@dataclass(frozen=True)
class Rule:
    """A parameter-rejection rule, answered with a 400 in the vendor's own error style.

    - ``drop:P[@GLOB]``: the model does not accept ``P`` at all;
    - ``rename:OLD:NEW[@GLOB]``: the model wants ``NEW`` where ``OLD`` was sent;
    - ``require:P=V[:tools][@GLOB]``: if ``P`` is sent it must be ``V`` (only when the
      request has tools, with ``:tools``).

    ``GLOB`` matches the model id (default: every model).
    """

    spec: str
    action: str
    param: str
    new_name: str | None = None
    value: Any = None
    when_tools: bool = False
    model_glob: str = "*"

    def applies(self, model: str, body: Mapping[str, Any], has_tools: bool) -> bool:
        """True if this rule rejects a request for ``model`` with ``body``."""
        if not fnmatch.fnmatchcase(model, self.model_glob) or self.param not in body:
            return False
        if self.action == "require":
            return (has_tools or not self.when_tools) and body[self.param] != self.value
        return True


def parse_rule(spec: str) -> Rule:
    """``drop:temperature@gpt-5*`` → ``Rule``; ``ValueError`` saying the accepted forms."""
    text, _, glob = spec.partition("@")
    action, _, rest = text.partition(":")
    forms = "drop:PARAM, rename:OLD:NEW or require:PARAM=VALUE[:tools], each optionally @MODEL_GLOB"
    if action == "drop" and rest and ":" not in rest:
        return Rule(spec, "drop", rest, model_glob=glob or "*")
    if action == "rename":
        old, _, new = rest.partition(":")
        if old and new:
            return Rule(spec, "rename", old, new_name=new, model_glob=glob or "*")
    if action == "require" and "=" in rest:
        param, _, value_text = rest.partition("=")
        when_tools = value_text.endswith(":tools")
        if when_tools:
            value_text = value_text[: -len(":tools")]
        try:
            value = json.loads(value_text)
        except ValueError:
            value = value_text
        if param:
            return Rule(spec, "require", param, value=value, when_tools=when_tools, model_glob=glob or "*")
    raise ValueError(f"cannot read rule {spec!r}: expected {forms}")


def check_faults(faults: Mapping[str, object]) -> dict[str, float]:
    """``faults`` (kind → rate) checked: known kinds, rates numbers in [0, 1] that add up to at most 1."""
    bad = [k for k in faults if k not in FAULTS + SOLO_FAULTS]
    if bad:
        raise ValueError(f"unknown fault {bad[0]!r}: expected one of {', '.join(FAULTS + SOLO_FAULTS)}")
    rates: dict[str, float] = {}
    for kind, rate in faults.items():
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
            raise ValueError(f"fault {kind!r}: the rate must be a number in [0, 1], as in {{\"{kind}\": 0.05}}, "
                             f"not {rate!r}")
        rates[kind] = float(rate)
    if sum(rates.values()) > 1 + 1e-9:
        raise ValueError(f"fault rates add up to {sum(rates.values()):g}, more than 1")
    return rates


def parse_fault(spec: str) -> tuple[str, float]:
    kind, _, rate = spec.partition("=")
    if kind not in FAULTS + SOLO_FAULTS:
        raise ValueError(f"unknown fault {kind!r}: expected one of {', '.join(FAULTS + SOLO_FAULTS)}")
    try:
        value = float(rate)
    except ValueError:
        raise ValueError(f"fault {spec!r}: the rate must be a number in [0, 1], as in {kind}=0.05") from None
    if not 0 <= value <= 1:
        raise ValueError(f"fault {spec!r}: the rate must be in [0, 1]")
    return kind, value


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    #: response latency: mean of the distribution, in milliseconds
    latency_ms: float = 0.0
    latency_dist: str = "fixed"
    #: uniform: ± half-width; lognormal: sd of the latency (ms); ignored by fixed / exponential
    latency_spread_ms: float = 0.0
    #: fault kind → rate in [0, 1]; their sum must not exceed 1
    faults: dict[str, float] = field(default_factory=dict)
    fault_seed: int = 0
    #: the Retry-After an injected 429 carries (s)
    fault_retry_after_s: float = 1.0
    #: how long a "slow" fault holds the answer (s): set it past the client's timeout
    slow_s: float = 30.0
    #: the pause between two bytes of a "drip" fault's answer (s)
    drip_s: float = 0.1
    rules: list[Rule] = field(default_factory=list)
    #: the server's own rate limit per API key: requests per ``rpm_window_s`` (None: unlimited)
    rpm: int | None = None
    rpm_window_s: float = 60.0
    #: how ``rpm`` is enforced: "window" (a sliding window: one long Retry-After once it is full) or
    #: "bucket" (a token bucket refilled at rpm per window, as the vendors enforce: short Retry-Afters)
    rpm_mode: str = "window"
    #: the bucket's capacity (requests that may go at once); default one second's worth of ``rpm``
    rpm_burst: int | None = None
    #: send the vendor's rate-limit headers on every answer while ``rpm`` is set (off: 429s say only Retry-After)
    rate_headers: bool = True
    #: accepted API keys; empty accepts any (and no) key
    keys: tuple[str, ...] = ()
    #: requests kept in the /stats log (counts go on past it)
    log_limit: int = 2_000_000
    #: batch APIs (runner/sim/serve/batches.py): seconds from creation until a batch has ended
    batch_delay_s: float = 0.0
    #: share of batch requests answered with a 500 error result, and left unprocessed as expired
    batch_error_rate: float = 0.0
    batch_expire_rate: float = 0.0
    #: the "echo the key" fault: repeat the request's API key, whole, in every answer's text and every error's
    #: message (hostile on purpose: the client must keep every key it sent out of everything it writes)
    echo_key: bool = False

    def __post_init__(self) -> None:
        if self.latency_dist not in _LATENCY_DISTS:
            raise ValueError(f"unknown latency distribution {self.latency_dist!r}: expected one of {', '.join(_LATENCY_DISTS)}")
        check_faults(self.faults)
        if self.rpm_mode not in _RPM_MODES:
            raise ValueError(f"unknown rpm mode {self.rpm_mode!r}: expected one of {', '.join(_RPM_MODES)}")
        if self.rpm_burst is not None and self.rpm_burst < 1:
            raise ValueError(f"the bucket's burst must be at least 1 request (got {self.rpm_burst})")
        if self.batch_delay_s < 0:
            raise ValueError("the batch delay must be >= 0 seconds")
        if not (0 <= self.batch_error_rate <= 1 and 0 <= self.batch_expire_rate <= 1) \
                or self.batch_error_rate + self.batch_expire_rate > 1 + 1e-9:
            raise ValueError(f"batch error and expiry rates must each be in [0, 1] and add up to at most 1 "
                             f"(got {self.batch_error_rate:g} and {self.batch_expire_rate:g})")

    @property
    def bucket_capacity(self) -> float:
        """The token bucket's size: ``rpm_burst``, or one second's worth of ``rpm`` (at least one request)."""
        if self.rpm_burst is not None:
            return float(self.rpm_burst)
        return float(max(1, math.ceil((self.rpm or 0) / self.rpm_window_s)))

    @staticmethod
    def mixed_faults(total: float) -> dict[str, float]:
        """``total`` spread evenly over every fault kind (``--faults 0.2``)."""
        return {k: total / len(FAULTS) for k in FAULTS}

    def latency_sampler(self) -> LatencySampler:
        return LatencySampler(self.latency_ms / 1000, self.latency_dist, self.latency_spread_ms / 1000,
                              random.Random(self.fault_seed ^ 0x5EED))


class LatencySampler:
    def __init__(self, mean_s: float, dist: str, spread_s: float, rng: random.Random) -> None:
        self.mean_s, self.dist, self.spread_s, self._rng = mean_s, dist, spread_s, rng

    def __call__(self) -> float:
        mean = self.mean_s
        if mean <= 0:
            return 0.0
        if self.dist == "uniform":
            return max(0.0, self._rng.uniform(mean - self.spread_s, mean + self.spread_s))
        if self.dist == "exponential":
            return self._rng.expovariate(1 / mean)
        if self.dist == "lognormal":
            sd = self.spread_s or mean / 2
            import math

            sigma2 = math.log(1 + (sd / mean) ** 2)
            return self._rng.lognormvariate(math.log(mean) - sigma2 / 2, math.sqrt(sigma2))
        return mean
