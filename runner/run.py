"""A whole run of a sweep on this machine: output dir, resume, engine, manifest.

This is the single-node product's top: it checks the output directory belongs to
this sweep, repairs parts a crash left behind, skips trial ids already written,
runs the rest through the engine into the sink, and records how it ended. Ray mode
reuses the same pieces around its own scheduler.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import polars as pl

from runner.config import LoadedSweep
from runner.engine import EngineStats, run_trials
from runner.grid import Grid
from runner.manifest import finish_manifest, start_manifest
from runner.progress import RunProgress
from runner.providers import make_provider
from runner.schema import trial_schema
from runner.sink import RepairNote, TrialSink, completed_trial_ids, repair_parts
from runner.trial import ModelBinding, TrialRunner


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


def grid_of(loaded: LoadedSweep) -> Grid:
    return Grid(loaded.sweep_id, loaded.sweep.seed, [m.name for m in loaded.sweep.models], loaded.probes)


def count_statuses(trials_dir: Path) -> dict[str, int]:
    if not any(trials_dir.glob("*.arrow")):
        return {}
    frame = pl.scan_ipc(str(trials_dir / "*.arrow")).group_by("status").len().collect()
    return {row["status"]: int(row["len"]) for row in frame.iter_rows(named=True)}


def run_sweep(loaded: LoadedSweep, out: Path, *, quiet: bool = False,
              say: Callable[[str], None] = lambda s: None, worker: str = "local") -> RunResult:
    """Run (or resume) ``loaded`` into ``out``. Raises ``UserError`` for a mismatched ``out``."""
    sweep = loaded.sweep
    grid = grid_of(loaded)
    total = len(grid)
    out.mkdir(parents=True, exist_ok=True)
    manifest = start_manifest(out, loaded, total)
    trials_dir = out / "trials"
    trials_dir.mkdir(exist_ok=True)
    repaired = repair_parts(trials_dir)
    for note in repaired:
        say(f"repaired {note}")
    done = completed_trial_ids(trials_dir)
    if done:
        say(f"resuming: {len(done):,} of {total:,} trials already written, running the rest")

    providers = {m.provider: make_provider(m.provider) for m in sweep.models}
    bindings = {m.name: ModelBinding(m.name, m.provider, providers[m.provider], m.model_id, dict(m.params))
                for m in sweep.models}
    execute = TrialRunner({p.name: p for p in loaded.probes}, bindings, sweep.engine.timeout_s)
    schema = trial_schema(loaded.schema_fields, metadata={"trialgrid.sweep_id": loaded.sweep_id})
    specs = (s for s in grid if s.trial_id not in done) if done else iter(grid)

    started = time.perf_counter()
    status = "interrupted"
    stats = EngineStats()
    try:
        with TrialSink(out, schema, worker=worker, batch_rows=sweep.engine.batch_rows,
                       flush_seconds=sweep.engine.flush_seconds) as sink, \
                RunProgress(total, already_done=len(done), quiet=quiet) as progress:
            stats = asyncio.run(_run(specs, execute, sink, sweep.engine.concurrency,
                                     {m.name: m.concurrency for m in sweep.models}, progress,
                                     list(providers.values())))
        status = "complete"
    finally:
        elapsed = time.perf_counter() - started
        counts = count_statuses(trials_dir)
        finish_manifest(out, manifest, status=status, trials_run=stats.done, counts=counts, elapsed_s=elapsed)
    return RunResult(out, total, len(done), stats, counts, elapsed, repaired, status)


async def _run(specs, execute, sink, concurrency, per_model, progress, providers) -> EngineStats:  # type: ignore[no-untyped-def]
    try:
        return await run_trials(specs, execute, sink, concurrency=concurrency, per_model=per_model, progress=progress)
    finally:
        await execute.aclose()
        for provider in providers:
            await provider.aclose()
