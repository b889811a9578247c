"""The ``local`` backend: every pending trial in this process, through the engine, live (``run.run_sweep``)."""

from __future__ import annotations

from pathlib import Path

from runner.config.sweep import LoadedSweep
from runner.execution.backends.base import RunOptions
from runner.execution.run import RunResult, run_sweep


class _LocalBackend:
    name = "local"

    def run(self, loaded: LoadedSweep, out: Path, options: RunOptions) -> RunResult:
        return run_sweep(loaded, out, quiet=options.quiet, strict_params=options.strict_params,
                         cache_dir=options.cache_dir, retry_kinds=options.retry_kinds,
                         wait=options.wait, limit=options.limit)


LOCAL = _LocalBackend()
