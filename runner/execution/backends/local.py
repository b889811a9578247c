"""The ``local`` backend: every pending trial in this process, through the engine, live.

Its whole job inside the session (``runner.execution.session``): build the trial
runner (providers, the response cache), run the pending specs through the engine into
the session's metered sink while ``should_stop`` is false, and close what it opened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from runner.config.sweep import LoadedSweep
from runner.core.types import TrialSpec
from runner.execution.backends.base import RunOptions
from runner.execution.engine import EngineStats, RowSink, run_trials
from runner.execution.progress import RunProgress
from runner.execution.run import RunResult, build_trial_runner, per_model_concurrency, response_cache_dir
from runner.execution.session import Session
from runner.execution.trial import TrialRunner
from runner.providers import Provider
from runner.providers.cache import ResponseCache


def run_local(loaded: LoadedSweep, out: Path, *, quiet: bool = False, say: Callable[[str], None] = lambda s: None,
              worker: str = "local", strict_params: bool = False, notify: Callable[[str], None] | None = None,
              cache_dir: Path | None = None, retry_kinds: Sequence[str] | None = None,
              wait: bool = False) -> RunResult:
    """Run (or resume) ``loaded`` into ``out`` here (``runner.execution.run.run_sweep`` documents the keywords)."""
    cache_dir = response_cache_dir(loaded, cache_dir)
    stats = EngineStats()
    with Session(loaded, out, say=say, notify=notify, strict_params=strict_params, retry_kinds=retry_kinds,
                 wait=wait) as session:
        cache = ResponseCache(cache_dir, say=say) if cache_dir is not None else None
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


class _LocalBackend:
    name = "local"

    def run(self, loaded: LoadedSweep, out: Path, options: RunOptions) -> RunResult:
        return run_local(loaded, out, quiet=options.quiet, say=options.say, strict_params=options.strict_params,
                         notify=options.notify, cache_dir=options.cache_dir, retry_kinds=options.retry_kinds,
                         wait=options.wait)


LOCAL = _LocalBackend()
