"""Watching a cluster run while it goes: per-worker rates, requests in flight, limiter waits, spend.

A single-node run shows one progress bar; a cluster run has more to say: how fast each
worker goes (a slow node shows), how many requests are out, how often sends wait on a
rate limit, how many chunks were re-run after a worker was lost, and the spend so far
against the budget. ``Watch`` gathers that on the driver (it polls the workers' and the
shared services' counters once per interval), puts it on the progress line, logs it
as a line (what a Ray Job's log shows, where there is no terminal) and writes it into
the session's Ray record (``cluster.records``: ``sessions[-1].extensions.ray.watch``),
which ``trialgrid job status JOB`` prints.
``CountingLimiter`` is how a worker counts the waits: it wraps whatever limiter the
pool builds, so the limiters themselves need not know.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.records import RaySessionRecord, WatchRecord, WorkerWatch, put_ray_record, ray_record
from runner.core.manifest import MANIFEST, Manifest, read_manifest
from runner.core.messages import say


@dataclass
class WaitCounter:
    """Sends that had to wait for a limiter's permit, and for how long in total (one worker)."""

    waits: int = 0
    seconds: float = 0.0


#: a permit that took longer than this counts as a wait (an uncontended acquire is microseconds)
_WAIT_THRESHOLD_S = 0.005


class CountingLimiter:
    """A limiter that counts how often (and how long) ``acquire`` waited; everything else is the inner one's."""

    def __init__(self, inner: Any, counter: WaitCounter) -> None:
        self._inner = inner
        self._counter = counter

    async def acquire(self, estimated_tokens: int = 0, *, first: bool = False) -> Any:
        started = time.monotonic()
        permit = await self._inner.acquire(estimated_tokens, first=first)
        waited = time.monotonic() - started
        if waited >= _WAIT_THRESHOLD_S:
            self._counter.waits += 1
            self._counter.seconds += waited
        return permit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def summary_line(record: WatchRecord) -> str:
    """The one-line summary of a cluster run (the driver's log and ``trialgrid job status``)."""
    head = f"{record.done:,}/{record.total:,} trials; {record.trials_per_s:,.0f} trials/s"
    return f"{head}; {detail_line(record)}"


def detail_line(record: WatchRecord) -> str:
    """The summary without done/total and rate (the progress bar shows those itself)."""
    parts = []
    if record.workers:
        rates = " ".join(f"w{w.index}:{w.trials_per_s:,.0f}/s" for w in record.workers)
        parts.append(f"workers {rates}")
        parts.append(f"{sum(w.in_flight for w in record.workers):,} in flight")
        parts.append(f"{sum(w.limiter_waits for w in record.workers):,} limiter waits")
    parts.append(f"{record.requeued_chunks:,} chunks re-queued ({record.workers_lost} workers replaced)")
    if record.spent_usd is not None:
        parts.append(f"spent ${record.spent_usd:,.4f} / {record.spent_tokens:,} tokens of {record.budget}")
    if record.cache_hits is not None:
        parts.append(f"{record.cache_hits:,} cached")
    return "; ".join(parts)


def output_summary(out: Path) -> str:
    """What ``trialgrid job status JOB`` prints below the job's state: the output's last summary, read from its manifest."""
    manifest = read_manifest(out) if (out / MANIFEST).is_file() else None
    if manifest is None or not manifest.sessions:
        return f"output {out}: no manifest yet (the run has not started, or {out} is on another machine's disk)"
    session = manifest.sessions[-1]
    n = len(manifest.sessions)
    head = f"output {out}: {session.status} (its last of {n} session{'s' if n != 1 else ''})"
    record = ray_record(session, file=out / MANIFEST)
    if record is None or record.watch is None:
        return f"{head}; {session.trials_run:,} trials run (no cluster summary: not a Ray run, or none written yet)"
    return f"{head}; as of {record.watch.at}: {summary_line(record.watch)}"


class Watch:
    """The driver's view of a running cluster: ``poll`` builds a ``WatchRecord`` every ``interval_s``."""

    def __init__(self, total: int, already_done: int, *, interval_s: float = 2.0) -> None:
        self.total = total
        self.done = already_done
        self.interval_s = interval_s
        self._next = time.monotonic() + interval_s
        self._last_t = time.monotonic()
        self._last_done = already_done
        self._last_worker: dict[int, int] = {}
        self.record: WatchRecord | None = None

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def poll(self, workers: list[Any], *, requeued: int, lost: int, spend: Any = None, budget: str | None = None,
             cache_hits: int | None = None, timeout_s: float = 2.0) -> WatchRecord:
        """Ask each worker for its counters (a worker that does not answer in time is left out)."""
        import ray

        now = time.monotonic()
        span = max(now - self._last_t, 1e-6)
        refs = [w.stats.remote() for w in workers]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        per_worker = []
        for ref in ready:
            try:
                s = ray.get(ref)
            except Exception:
                continue
            previous = self._last_worker.get(s.pid, 0)  # a worker (or its replacement) starts at 0
            self._last_worker[s.pid] = s.trials
            per_worker.append(WorkerWatch(index=s.index, trials=s.trials, trials_per_s=(s.trials - previous) / span,
                                          in_flight=s.in_flight, limiter_waits=s.limiter_waits))
        per_worker.sort(key=lambda w: w.index)
        self.record = WatchRecord(
            at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), done=self.done, total=self.total,
            trials_per_s=(self.done - self._last_done) / span, requeued_chunks=requeued, workers_lost=lost,
            spent_usd=None if spend is None else spend.usd, spent_tokens=None if spend is None else spend.tokens,
            budget=budget, cache_hits=cache_hits, workers=per_worker)
        self._last_t, self._last_done = now, self.done
        self._next = now + self.interval_s
        return self.record

    def publish(self, manifest: Manifest, write: Callable[[], None], *, log: bool = True) -> None:
        """Put the last record into the session's Ray record, write the manifest, and (``log``) say its line
        (``runner.core.messages``; off while a progress bar shows the same)."""
        if self.record is None:
            return
        session = manifest.sessions[-1]
        current = ray_record(session) or RaySessionRecord()  # the driver put the address there when it began
        put_ray_record(session, current.model_copy(update={"watch": self.record}))
        write()
        if log:
            say(f"ray: {summary_line(self.record)}")
