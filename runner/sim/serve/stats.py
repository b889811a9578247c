"""What the simulated server saw: a per-request log and the counts ``/stats`` reports.

Tests assert on the *server's* view — requests per key in every window, silence
after a 429, one rejection per (rule, model, parameter) — so the log is the ground
truth, kept in columns (arrival time since start, key id, api, model, status, tag,
tokens billed: input + output of a successful answer, the request's digest, and when
the answer's last byte went to the socket).
Keys are logged as a short hash, never as the key.

``digest`` names what was asked (a hash of the body and the seed header, so a trial sent
twice has one digest, and two runs of one case, which differ only by seed, have two);
``sent`` is the server's clock when a successful answer was handed whole to the
connection, ``None`` when it never was (an error, a fault, or a client gone first). Together they
tell a paid answer sent again (the same digest after an earlier ``sent``) from a request
that was only in flight when its client died (no ``sent``): ``benchmarks/kill_resend.py``.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, defaultdict
from typing import Any


def key_id(key: str | None) -> str:
    if not key:
        return "anonymous"
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:10]


class ServerStats:
    def __init__(self, log_limit: int = 2_000_000) -> None:
        self.started = time.monotonic()
        self.log_limit = log_limit
        self.t: list[float] = []
        self.key: list[str] = []
        self.api: list[str] = []
        self.model: list[str] = []
        self.status: list[int] = []
        self.tag: list[str] = []
        self.tokens: list[int] = []
        self.digest: list[str] = []
        self.sent: list[float | None] = []
        self.requests = 0
        self.by_status: Counter[int] = Counter()
        self.by_tag: Counter[str] = Counter()
        self.per_key: Counter[str] = Counter()
        self.first_seen: dict[str, float] = {}
        self.last_seen: dict[str, float] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.key_in_flight: Counter[str] = Counter()
        self.key_max_in_flight: Counter[str] = Counter()
        self.rejections: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
        #: batches created per api, and the requests they held (runner/sim/serve/batches.py)
        self.batches: Counter[str] = Counter()
        self.batch_requests: Counter[str] = Counter()

    def now(self) -> float:
        return time.monotonic() - self.started

    def enter(self, kid: str) -> float:
        """A request arrived; returns its arrival time (seconds since the server started)."""
        t = self.now()
        self.requests += 1
        self.per_key[kid] += 1
        self.first_seen.setdefault(kid, t)
        self.last_seen[kid] = t
        self.in_flight += 1
        self.key_in_flight[kid] += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
        if self.key_in_flight[kid] > self.key_max_in_flight[kid]:
            self.key_max_in_flight[kid] = self.key_in_flight[kid]
        return t

    def leave(self, kid: str) -> None:
        self.in_flight -= 1
        self.key_in_flight[kid] -= 1

    def record(self, t: float, kid: str, api: str, model: str, status: int, tag: str, tokens: int = 0,
               digest: str = "", sent: float | None = None) -> None:
        self.by_status[status] += 1
        self.by_tag[tag] += 1
        if len(self.t) < self.log_limit:
            self.t.append(t)
            self.key.append(kid)
            self.api.append(api)
            self.model.append(model)
            self.status.append(status)
            self.tag.append(tag)
            self.tokens.append(tokens)
            self.digest.append(digest)
            self.sent.append(sent)

    def batch_created(self, api: str, n_requests: int) -> None:
        self.batches[api] += 1
        self.batch_requests[api] += n_requests

    def rejected(self, rule: str, model: str, param: str) -> None:
        self.rejections[rule][model][param] += 1

    def snapshot(self, with_log: bool = False) -> dict[str, Any]:
        keys = {}
        for kid, n in self.per_key.items():
            span = self.last_seen[kid] - self.first_seen[kid]
            keys[kid] = {"requests": n, "rps": round(n / span, 3) if span > 0 else None,
                         "max_concurrency": self.key_max_in_flight[kid], "first_s": round(self.first_seen[kid], 6),
                         "last_s": round(self.last_seen[kid], 6)}
        out: dict[str, Any] = {
            "uptime_s": round(self.now(), 3),
            "requests": self.requests,
            "in_flight": self.in_flight,
            "max_concurrency": self.max_in_flight,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "by_tag": dict(sorted(self.by_tag.items())),
            "keys": keys,
            "rejections": {rule: {m: dict(params) for m, params in models.items()}
                           for rule, models in self.rejections.items()},
            "batches": dict(self.batches),
            "batch_requests": dict(self.batch_requests),
        }
        if with_log:
            out["log"] = {"t": self.t, "key": self.key, "api": self.api, "model": self.model,
                          "status": self.status, "tag": self.tag, "tokens": self.tokens,
                          "digest": self.digest, "sent": self.sent}
        return out
