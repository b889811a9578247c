"""A run of a sweep in this process (``run_local``, the local backend), and the trial runner every backend builds.

A run's lifecycle (lock, manifest, resume, budget, remedies, finish) is its session
(``runner.execution.session``); what turns pending specs into rows is a backend. The
local one is here: the engine over the session's pending specs. Batch mode and Ray's
workers build their trial runners with ``build_trial_runner`` (providers, remedies,
shared limiters, the cache) and read ``per_model_concurrency`` and the
``--retry-errors`` defaults from here too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from runner.config.sweep import LoadedSweep
from runner.core.errors import UserError
from runner.core.exits import DEFAULT_RETRY_KINDS
from runner.core.types import TrialSpec
from runner.execution.engine import EngineStats, RowSink, run_trials
from runner.execution.options import RunOptions
from runner.execution.progress import RunProgress
from runner.execution.session import RunResult, Session, count_statuses
from runner.execution.trial import ModelBinding, TrialRunner
from runner.providers import CONFIGURED, Provider
from runner.providers.cache import ResponseCache
from runner.providers.pool import ProviderPool
from runner.providers.remedies import Learned, remedy_from_json
from runner.sim.oracle import is_oracle
from runner.sim.oracle import learn as learn_keys

#: ``RunResult`` and ``count_statuses`` live in the session; re-exported here, beside the run that returns them
__all__ = ["DEFAULT_RETRY_KINDS", "RunResult", "build_trial_runner", "count_statuses", "per_model_concurrency",
           "response_cache_dir", "run_local"]




def build_trial_runner(loaded: LoadedSweep, *, strict_params: bool = False,
                       on_learn: Callable[[Learned], None] | None = None,
                       known_remedies: list[dict[str, Any]] | None = None,
                       **pool_options: Any) -> tuple[TrialRunner, list[Provider]]:
    """The trial runner of a sweep and the providers it owns (close them after the run).

    ``on_learn`` hears each parameter remedy the first time it is learned;
    ``known_remedies`` (the manifest's list, on resume) are applied from the start;
    ``pool_options`` go to ``ProviderPool`` (cluster mode passes a shared ``book`` and
    ``limiter_factory`` there).
    """
    sweep = loaded.sweep
    if any(m.provider == "sim" and is_oracle(m.model_id) for m in sweep.models):
        learn_keys(loaded.probes)  # the oracle persona answers from the cases' keys, in whichever process runs them
    pool = ProviderPool(strict_params=strict_params, on_learn=on_learn, **pool_options)
    if not strict_params:
        for entry in known_remedies or ():
            parsed = remedy_from_json(entry)
            if parsed is not None:
                pool.book.preload(*parsed)
    bindings = {}
    for i, m in enumerate(sweep.models):
        try:
            provider = pool.provider(m.provider, m.connection, limits=m.limits, retry=m.retry,
                                     max_connections=max(m.concurrency, m.limits.max_concurrent or 0))
        except (KeyError, ValueError) as exc:  # the key's variable vanished, or the callable broke, since loading
            raise UserError(str(exc).strip("'\""), file=loaded.path, key_path=("models", i)) from None
        # a configured provider goes through a key's limiter (ManagedProvider; not the in-process sim): its queue time is
        # the engine's admission, not the trial's time (the deadline starts at the first request)
        bindings[m.name] = ModelBinding(m.name, m.provider, provider, m.model_id, dict(m.params), m.tool_call_parser,
                                        queued=m.provider in CONFIGURED)
    return TrialRunner({p.name: p for p in loaded.probes}, bindings, sweep.engine.timeout_s), pool.all


def per_model_concurrency(loaded: LoadedSweep) -> dict[str, int]:
    return {m.name: m.concurrency for m in loaded.sweep.models}


def response_cache_dir(loaded: LoadedSweep, given: Path | None) -> Path | None:
    """The response cache a run uses: the one given (``--cache``), else the sweep's ``cache``, else none."""
    if given is None and loaded.sweep.cache is not None:
        return Path(loaded.sweep.cache)
    return given


def run_local(loaded: LoadedSweep, out: Path, options: RunOptions | None = None, *,
              worker: str = "local") -> RunResult:
    """Run (or resume) ``loaded`` into ``out`` in this process, live (the ``local`` backend of ``runner.run``).

    Inside its session, the local middle is: build the trial runner (providers, the
    response cache), run the pending specs through the engine into the session's
    metered sink while ``should_stop`` is false, close what it opened. ``options``
    (``RunOptions``) as ``runner.run`` checked them; ``worker`` names the parts written.
    Each newly learned parameter remedy is a note (``runner.core.messages``), and written
    into the manifest at once, so a crash keeps it. Raises ``UserError`` for a mismatched ``out``.
    """
    options = options or RunOptions()
    strict_params, quiet = options.strict_params, options.quiet
    cache_dir = response_cache_dir(loaded, options.cache_dir)
    stats = EngineStats()
    with Session(loaded, out, options) as session:
        cache = ResponseCache(cache_dir) if cache_dir is not None else None
        try:
            execute, providers = build_trial_runner(loaded, strict_params=strict_params, on_learn=session.learned,
                                                    known_remedies=[r.as_json() for r in session.manifest.remedies],
                                                    cache=cache)
            session.begin()
            with session.sink(worker) as sink, \
                    RunProgress(session.total, already_done=len(session.done), quiet=quiet,
                                cache_hits=(lambda: cache.hits) if cache is not None else None) as progress:
                stats = asyncio.run(_run(session.pending(), execute, session.metered(sink),
                                         loaded.sweep.engine.concurrency, per_model_concurrency(loaded), progress,
                                         providers, session.should_stop))
            if stats.stopped:
                session.stop()
        finally:
            if cache is not None:
                session.record_cache(cache.stats())
                cache.close()
    return session.result(stats)


async def _run(specs: Iterable[TrialSpec], execute: TrialRunner, sink: RowSink, concurrency: int,
               per_model: dict[str, int], progress: RunProgress, providers: list[Provider],
               stop: Callable[[], bool]) -> EngineStats:
    try:
        return await run_trials(specs, execute, sink, concurrency=concurrency, per_model=per_model, progress=progress,
                                stop=stop)
    finally:
        await execute.aclose()
        for provider in providers:
            await provider.aclose()
