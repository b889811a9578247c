"""A whole run of a sweep on this machine: output dir, resume, engine, manifest.

This is the single-node product's top: it checks the output directory belongs to
this sweep, repairs parts a crash left behind, skips trial ids already written,
runs the rest through the engine into the sink, and records how it ended. Ray mode
(``cluster``) reuses the same pieces around its own scheduler: ``open_output`` (manifest,
repair, resume set, schema, sink), ``build_trial_runner`` (providers and the trial
runner a worker executes) and ``RunOutput.finish`` — one place for each.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from runner.config.sweep import LoadedSweep
from runner.core.errors import UserError
from runner.core.manifest import CacheStats, Manifest, RemedyRecord, write_manifest
from runner.core.schema import trial_schema
from runner.core.types import TrialSpec
from runner.execution.budget import CostMeter
from runner.execution.engine import EngineStats, run_trials
from runner.execution.grid import Grid, skip_done
from runner.execution.progress import RunProgress
from runner.execution.trial import ModelBinding, TrialRunner
from runner.output.lock import OutputLock, lock_output
from runner.output.manifest import finish_manifest, start_manifest, sweep_snapshot
from runner.output.parts import quarantine_parts, resume_keys
from runner.output.reader import Output, spent_in
from runner.output.sink import RepairNote, TrialSink, repair_parts
from runner.providers import Provider
from runner.providers.cache import ResponseCache
from runner.providers.pool import ProviderPool
from runner.providers.remedies import Learned, remedy_from_json


@dataclass
class RunResult:
    out: Path
    total: int
    skipped: int
    stats: EngineStats
    counts: dict[str, int]
    elapsed_s: float
    repaired: list[RepairNote] = field(default_factory=list)
    status: str = "complete"
    stopped: str | None = None  # why scheduling stopped early (a spent budget); rerun to continue


def grid_of(loaded: LoadedSweep) -> Grid:
    return Grid(loaded.sweep_id, loaded.sweep.seed, [m.name for m in loaded.sweep.models], loaded.probes)


#: the error kinds ``--retry-errors`` re-attempts when none are named: the ones a later attempt may pass
DEFAULT_RETRY_KINDS = ("rate_limited", "transient", "timeout")


def count_statuses(trials_dir: Path, manifest: Manifest | None = None) -> dict[str, int]:
    """Rows by status, each trial once (its newest row), over the parts that count (``Output.counts``);
    ``manifest``: the one the writer holds (else it is read)."""
    return Output.open(trials_dir.parent, manifest=manifest, strict=False).counts()


@dataclass
class RunOutput:
    """An output directory opened for a run: checked, repaired, and what is already done.

    Both the single-node run and Ray mode open the output this way, write rows through
    ``sink`` and end with ``finish``, so the format and the resume rules are the same.
    """

    out: Path
    loaded: LoadedSweep
    grid: Grid
    total: int
    manifest: Manifest
    repaired: list[RepairNote]
    done: np.ndarray  # sorted uint64 keys of the trial ids already written (minus the errors retried)
    schema: pa.Schema
    lock: OutputLock | None = None  # held from open_output until finish
    retrying: dict[str, int] = field(default_factory=dict)  # error rows re-attempted this session, by kind

    @property
    def trials_dir(self) -> Path:
        return self.out / "trials"

    def pending(self) -> Iterator[TrialSpec]:
        """The grid's specs not yet written, in grid order (lazily)."""
        return skip_done(self.grid, self.done)

    def sink(self, worker: str) -> TrialSink:
        engine = self.loaded.sweep.engine
        return TrialSink(self.out, self.schema, worker=worker, batch_rows=engine.batch_rows,
                         flush_seconds=engine.flush_seconds)

    def finish(self, status: str, trials_run: int, elapsed_s: float) -> dict[str, int]:
        """Record how this session ended in the manifest; return the output's counts by status.

        ``trials_run`` is the rows this session wrote. Releases the output's lock, even if
        the manifest cannot be written (a full disk: the next run marks the session crashed).
        """
        try:
            counts = count_statuses(self.trials_dir, self.manifest)
            finish_manifest(self.out, self.manifest, status=status, trials_run=trials_run, counts=counts,
                            elapsed_s=elapsed_s)
            return counts
        finally:
            self.release()

    def release(self) -> None:
        """Let another process write this output (``finish`` does it)."""
        if self.lock is not None:
            self.lock.release()


def open_output(loaded: LoadedSweep, out: Path, say: Callable[[str], None] = lambda s: None, *,
                retry_kinds: Sequence[str] | None = None, wait: bool = False) -> RunOutput:
    """Start (or resume) ``loaded`` in ``out``, holding its lock. Raises ``UserError`` for a mismatched ``out``
    or one another process is writing (``wait``: wait for it instead).

    ``retry_kinds``: error rows of these kinds are run again (``--retry-errors``); their
    new rows supersede the old ones for every reader.
    """
    grid = grid_of(loaded)
    total = len(grid)
    lock = lock_output(out, wait=wait)
    try:
        manifest = start_manifest(out, loaded, total, retry_kinds=retry_kinds)
        trials_dir = out / "trials"
        trials_dir.mkdir(exist_ok=True)
        repaired = repair_parts(trials_dir)
        for note in repaired:
            say(f"repaired {note}")
        parts = quarantine_parts(trials_dir, loaded.sweep_id, say)
        schema = trial_schema(loaded.schema_fields, metadata={"trialgrid.sweep_id": loaded.sweep_id})
        _check_written_schema(parts, trials_dir, schema)
        resume = resume_keys(parts, retry_kinds)
    except BaseException:
        lock.release()
        raise
    done = resume.done
    if retry_kinds is not None:
        what = ", ".join(f"{n:,} {k}" for k, n in sorted(resume.retry.items())) or "none"
        say(f"retrying error rows of kind {', '.join(retry_kinds)}: {what}")
    if len(done):
        say(f"resuming: {len(done):,} of {total:,} trials already written, running the rest")
    return RunOutput(out, loaded, grid, total, manifest, repaired, done, schema, lock, resume.retry)


def _check_written_schema(parts: list[Path], trials_dir: Path, schema: pa.Schema) -> None:
    """Refuse to resume into parts of another shape: one glob must scan as one table."""
    part = parts[0] if parts else None
    if part is None:
        return
    written = ipc.open_file(str(part)).schema
    if written.equals(schema, check_metadata=False):
        return
    missing = [n for n in schema.names if n not in written.names]
    extra = [n for n in written.names if n not in schema.names]
    detail = "; ".join(x for x in (f"this version adds {missing}" if missing else "",
                                   f"the output has {extra}" if extra else "") if x) or "column types differ"
    raise UserError(f"{trials_dir} was written with a different row schema ({detail})",
                    hint="resume with the trialgrid version that started the run, or start again in a new --out")


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
        bindings[m.name] = ModelBinding(m.name, m.provider, provider, m.model_id, dict(m.params), m.tool_call_parser)
    return TrialRunner({p.name: p for p in loaded.probes}, bindings, sweep.engine.timeout_s), pool.all


def _record_cache(manifest: Manifest, cache: ResponseCache) -> None:
    """This session's cache counts into its manifest entry, and the run's total hits."""
    manifest.sessions[-1].cache = CacheStats.model_validate(cache.stats())
    manifest.cache_hits = (manifest.cache_hits or 0) + cache.hits


def per_model_concurrency(loaded: LoadedSweep) -> dict[str, int]:
    return {m.name: m.concurrency for m in loaded.sweep.models}


def run_sweep(loaded: LoadedSweep, out: Path, *, quiet: bool = False,
              say: Callable[[str], None] = lambda s: None, worker: str = "local",
              strict_params: bool = False, notify: Callable[[str], None] | None = None,
              cache_dir: Path | None = None, retry_kinds: Sequence[str] | None = None,
              wait: bool = False) -> RunResult:
    """Run (or resume) ``loaded`` into ``out``. Raises ``UserError`` for a mismatched ``out``.

    ``notify`` prints the one line announcing each newly learned parameter remedy
    (it is also written into the manifest at once, so a crash keeps it);
    ``strict_params`` turns remedies off: a rejected parameter fails the trial;
    ``cache_dir`` (else the sweep's ``cache``) answers repeated requests from disk;
    ``retry_kinds`` re-attempts error rows of those kinds; ``wait`` waits for another
    process writing ``out`` instead of refusing.
    """
    if cache_dir is None and loaded.sweep.cache is not None:
        cache_dir = Path(loaded.sweep.cache)
    output = open_output(loaded, out, say, retry_kinds=retry_kinds, wait=wait)
    try:
        cache = ResponseCache(cache_dir, say=say) if cache_dir is not None else None
    except BaseException:
        output.finish("failed", 0, 0.0)
        raise
    output.manifest.strict_params = strict_params

    def learned(entry: Learned) -> None:
        output.manifest.remedies.append(RemedyRecord.model_validate(entry.as_json()))
        write_manifest(out, output.manifest)
        if notify is not None:
            notify(f"remedy learned for {entry.provider} model {entry.model_id!r}: {entry.remedy.describe()} "
                   f"(the server said: {entry.message}); applied to every later request, recorded in the manifest")

    try:
        execute, providers = build_trial_runner(loaded, strict_params=strict_params, on_learn=learned,
                                                known_remedies=[r.as_json() for r in output.manifest.remedies],
                                                cache=cache)
    except BaseException:
        if cache is not None:
            cache.close()
        output.finish("failed", 0, 0.0)
        raise
    started = time.perf_counter()
    status = "interrupted"
    stats = EngineStats()
    meter: CostMeter | None = None
    sink: TrialSink | None = None
    # prices and budget may change between sessions (they are not the sweep's identity): record the ones in force
    in_force = sweep_snapshot(loaded)
    output.manifest.sweep.prices, output.manifest.sweep.budget = in_force.prices, in_force.budget
    try:
        with output.sink(worker) as sink, \
                RunProgress(output.total, already_done=len(output.done), quiet=quiet,
                            cache_hits=(lambda: cache.hits) if cache is not None else None) as progress:
            if loaded.sweep.budget is not None:
                usd, tokens = spent_in(output.trials_dir, loaded.sweep.prices, output.manifest)
                meter = CostMeter(sink, loaded.sweep.prices, loaded.sweep.budget, usd, tokens)
            stats = asyncio.run(_run(output.pending(), execute, meter or sink, loaded.sweep.engine.concurrency,
                                     per_model_concurrency(loaded), progress, providers,
                                     meter.exhausted if meter else None))
        status = "stopped_budget" if stats.stopped else "complete"
    finally:
        elapsed = time.perf_counter() - started
        if cache is not None:
            _record_cache(output.manifest, cache)
            cache.close()
        written = sink.rows_written if sink is not None else 0
        counts = _finish_quietly(output, status, written, elapsed, say)
    return RunResult(out, output.total, len(output.done), stats, counts, elapsed, output.repaired, status,
                     meter.reason() if meter is not None and stats.stopped else None)


def _finish_quietly(output: RunOutput, status: str, written: int, elapsed_s: float,
                   say: Callable[[str], None]) -> dict[str, int]:
    """``output.finish``, except that while another error is on its way out (a full disk), a manifest that
    cannot be written is said in a line instead of replacing that error."""
    import sys

    if sys.exc_info()[1] is None:
        return output.finish(status, written, elapsed_s)
    try:
        return output.finish(status, written, elapsed_s)
    except (OSError, UserError) as exc:
        say(f"could not record the end of this session in the manifest: {exc}")
        return {}


async def _run(specs, execute, sink, concurrency, per_model, progress, providers, stop=None) -> EngineStats:
    try:
        return await run_trials(specs, execute, sink, concurrency=concurrency, per_model=per_model, progress=progress,
                                stop=stop)
    finally:
        await execute.aclose()
        for provider in providers:
            await provider.aclose()
